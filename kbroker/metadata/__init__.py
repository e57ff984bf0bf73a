"""Cluster metadata: topics, their ids, partition assignments and configs, and who may change them.

Key files: ``image`` (the immutable MetadataImage every reader holds), ``controller`` (the only
writer: persists a change, then publishes the next image for the replica manager to apply),
``store`` (the interface the controller persists through), ``local_store`` (the embedded
single-node store, a JSON file in the data dir), ``producer_ids`` (producer id blocks reserved
through the controller).

Cluster mode (``zookeeper.connect``): ``zk_cluster`` (a broker's life in the cluster: connect,
register, elect, follow ZooKeeper, controlled shutdown), ``zk_controller`` (the controller
writing to ZooKeeper and publishing images read from it; the elected broker's duties),
``zk_image`` (ZooKeeper -> image), ``leader_election`` (the election rules, pure),
``placement`` (rack-aware replica placement), ``zk_store`` / ``zk_znodes`` (Kafka's znode layout,
conditional writes fenced by the controller epoch), ``zk_security`` (SCRAM credentials, ACLs
and client quotas in ZooKeeper: read, and written as conditional deltas), ``zk_election``,
``zk_registration``, ``zk_client``.

Concurrency rule: owned by the event loop. Images are replaced, never changed, so a reader that
keeps one sees a consistent view; a change is durable before its image is published.
"""
