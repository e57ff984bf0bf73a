"""The DLQ writer's topic checks at write time (kbroker/share/dlq.py), on a real metadata image
and broker config: Kafka 4.4.0's order (the first failure wins) and messages, the
``share.version`` gate, and the records' headers."""

from __future__ import annotations

import uuid

import pytest

from kbroker.config import BrokerConfig
from kbroker.metadata.image import MetadataImage, TopicMetadata
from kbroker.share.dlq import (DeadLetter, DeadLetterError, DeadLetterWriter,
                               dead_letter_headers)

ENABLED = {"errors.deadletterqueue.group.enable": "true"}


def writer(topics=(), features=None, **settings):
    image = MetadataImage.build("c", topics=[
        TopicMetadata(name, uuid.uuid4(), ((0,),), configs) for name, configs in topics],
        finalized_features=features)
    return DeadLetterWriter(0, BrokerConfig(settings), lambda: image, None, None)


@pytest.mark.parametrize("name, topics, settings, message", [
    ("", [], {}, "Configured DLQ topic name in share group: g is empty."),
    ("__dlq", [("__dlq", ENABLED)], {},
     "Configured DLQ topic name in share group: g cannot start with __, topic: __dlq."),
    ("dlq.t", [("dlq.t", {})], {},
     "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.t."),
    ("dlq.t", [("dlq.t", {"errors.deadletterqueue.group.enable": "false"})], {},
     "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.t."),
    ("dlq.t", [], {},
     "DLQ topic does not exist and auto create is disabled on cluster for share group: g, "
     "topic: dlq.t."),
    # the flag is checked before the prefix, and a missing topic before it too
    ("t", [("t", {})], {},
     "DLQ is not enabled on configured DLQ topic for share group: g, topic: t."),
    ("t", [], {},
     "DLQ topic does not exist and auto create is disabled on cluster for share group: g, "
     "topic: t."),
    ("t", [("t", ENABLED)], {},
     "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, "
     "topic: t, prefix: dlq.."),  # Kafka's "prefix: %s."
    ("t", [], {"errors.deadletterqueue.auto.create.topics.enable": "true"},
     "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, "
     "topic: t, prefix: dlq.."),  # Kafka's "prefix: %s."
    ("x.t", [("x.t", ENABLED)], {"errors.deadletterqueue.topic.name.prefix": "y."},
     "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, "
     "topic: x.t, prefix: y.."),
])
def test_refused_topics_in_kafkas_order(name, topics, settings, message):
    with pytest.raises(DeadLetterError) as err:
        writer(topics, **settings).check_topic("g", name)
    assert str(err.value) == message


def test_accepted_topics():
    assert writer([("dlq.t", ENABLED)]).check_topic("g", "dlq.t").name == "dlq.t"
    assert writer([("t", ENABLED)], **{"errors.deadletterqueue.topic.name.prefix": ""}) \
        .check_topic("g", "t").name == "t"
    # missing, but auto-creation is on: to be created
    assert writer(**{"errors.deadletterqueue.auto.create.topics.enable": "true"}) \
        .check_topic("g", "dlq.new") is None


def test_share_version_gate():
    assert writer().enabled()  # a cluster that never set it has Kafka 4.4's default, 2
    assert writer(features={"share.version": 2}).enabled()
    assert not writer(features={"share.version": 1}).enabled()


def test_headers_in_kafkas_order():
    assert dead_letter_headers("g", "orders", 3, DeadLetter(17, 2, "Offset rejected by client.")) \
        == [("__dlq.errors.topic", b"orders"), ("__dlq.errors.partition", b"3"),
            ("__dlq.errors.offset", b"17"), ("__dlq.errors.group", b"g"),
            ("__dlq.errors.delivery.count", b"2"),
            ("__dlq.errors.message", b"Offset rejected by client.")]
