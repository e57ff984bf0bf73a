"""Running a local cluster: the processes `kbroker cluster up` and tests/cluster start.

Key files: ``zookeeper`` (a real Apache ZooKeeper server from the jars that
``scripts/install-test-deps.sh`` fetches into ``tools/zookeeper/target/jars``). The brokers'
side of a cluster (the ZooKeeper metadata store, registration, controller election) lives in
``kbroker.metadata.zk``; this package only starts and stops processes.

Concurrency rule: plain blocking code, called from a CLI or a test, never from the event loop.
"""
