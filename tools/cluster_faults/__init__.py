"""Cluster fault tooling (issue 13): proxies, fault actions, load drivers and the checker, for any
cluster described by ``kbroker cluster up --json`` (kbroker's, or Apache Kafka 3.9's reference of
tools/kafka_ref/zk_cluster.py). ``python -m tools.cluster_faults --help``."""
