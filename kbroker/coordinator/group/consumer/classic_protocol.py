"""The consumer embedded protocol of classic members (ConsumerProtocolSubscription and
ConsumerProtocolAssignment, versions 0-3), as a consumer group reads and writes it for the classic
members it serves, for an upgrade and for a downgrade."""

from __future__ import annotations

from kbroker.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kbroker.protocol.messages.consumer_protocol_subscription import \
    ConsumerProtocolSubscription

CONSUMER = "consumer"  # the protocol type of a consumer's classic group
MAX_PROTOCOL_VERSION = 3


def protocol_version(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError("no version")
    return int.from_bytes(data[:2], "big", signed=True)


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    version = protocol_version(data)
    return ConsumerProtocolSubscription.decode(memoryview(data)[2:],
                                               max(0, min(version, MAX_PROTOCOL_VERSION)))


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    version = protocol_version(data)
    return ConsumerProtocolAssignment.decode(memoryview(data)[2:],
                                             max(0, min(version, MAX_PROTOCOL_VERSION)))


def encode_assignment(partitions: dict, image, version: int) -> bytes:
    """{topic id: partitions} as ConsumerProtocolAssignment bytes of ``version``."""
    version = max(0, min(version, MAX_PROTOCOL_VERSION))
    topics = []
    for topic_id in sorted(partitions, key=lambda t: t.bytes):
        topic = image.topic_by_id(topic_id)
        if topic is not None and partitions[topic_id]:
            topics.append(ConsumerProtocolAssignment.TopicPartition(
                topic=topic.name, partitions=sorted(partitions[topic_id])))
    body = ConsumerProtocolAssignment(assigned_partitions=topics, user_data=None)
    return version.to_bytes(2, "big") + body.to_bytes(version)


def by_topic_id(topic_partitions, image) -> dict:
    out = {}
    for tp in topic_partitions:
        topic = image.topic(tp.topic)
        if topic is not None and tp.partitions:
            out.setdefault(topic.topic_id, set()).update(tp.partitions)
    return {t: frozenset(p) for t, p in out.items()}
