"""Cluster metadata: topics, their ids, partition assignments and configs, and who may change them.

Key files: ``image`` (the immutable MetadataImage every reader holds), ``delta`` (one change, as
a value: what a write commits and what a ZooKeeper notification brings), ``controller`` (the
one pipeline every change takes, in both modes: validate against the image -> delta ->
``store.commit(delta)`` -> publish ``image.apply(delta)`` -> listeners reconcile),
``topic_policy`` and ``partition_changes`` (the validation rules, pure functions of an image),
``store`` (the interface), ``local_store`` (the single node's store, a JSON file in the data
dir), ``leader_election`` and ``placement`` (Kafka's election and replica placement rules,
pure), ``producer_ids`` (producer id blocks reserved through the controller),
``delegation_tokens`` (KIP-48's rules: create, renew, expire, the HMAC).

Cluster mode adds one package, ``zk``: the ZooKeeper store, the sync that turns watches into
deltas, the elected controller's duties, registration and election. Nothing outside it knows
ZooKeeper; the store is the only thing that differs between modes.

Concurrency rule: owned by the event loop. Images are replaced, never changed, so a reader that
keeps one sees a consistent view; a change is durable before its image is published, and
listeners apply images in order.
"""
