"""Cluster metadata: topics, their ids, partition assignments and configs, and who may change them.

Key files: ``image`` (the immutable MetadataImage every reader holds), ``controller`` (the only
writer: persists a change, then publishes the next image for the replica manager to apply),
``store`` (the interface the controller persists through), ``local_store`` (the embedded
single-node store, a JSON file in the data dir; a ZooKeeper store with Kafka's znode layout will
implement the same interface), ``producer_ids`` (producer id blocks reserved through the
controller).

Concurrency rule: owned by the event loop. Images are replaced, never changed, so a reader that
keeps one sees a consistent view; a change is durable before its image is published.
"""
