"""Cluster metadata: which topics exist, their ids, partition counts and config overrides.

Key files: ``image`` (immutable topic descriptions), ``store`` (the interface the broker codes
against), ``local_store`` (the embedded single-node store, a JSON file in the data dir). The
ZooKeeper store (Kafka's classic znode layout) will implement the same interface.

Concurrency rule: the store is owned by the event loop; every change is written to disk before
the call returns, so a crash never loses a created topic that a client was told about.
"""
