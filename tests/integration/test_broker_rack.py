"""A node's ``broker.rack`` as clients see it: Kafka's Metadata and DescribeCluster both carry it
(clients use it for rack-aware fetching, KIP-392)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.integration.clients import Wire

RACK = "rack-\u00fc"


def test_a_single_node_reports_its_rack_in_metadata_and_describe_cluster(broker_factory):
    """A single node answered Metadata with no rack (DescribeCluster had it)."""
    broker = broker_factory({"broker.rack": RACK})
    with Wire(broker.bootstrap) as wire:
        wire.api_versions()
        assert [(b.node_id, b.rack) for b in wire.metadata([]).brokers] == [(1, RACK)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    nodes = admin.describe_cluster(request_timeout=10).result(10).nodes
    assert [(n.id, n.rack) for n in nodes] == [(1, RACK)]
