"""The metadata hash a running kbroker stores for a consumer group is Kafka's (KIP-1101).

A single node with ``broker.rack`` set (its image lists no brokers: the rack comes from the
node's own config, as Kafka's single node registers it), a topic and a consumer-protocol member:
Kafka 4.4.0's DumpLogSegments reads the group's ConsumerGroupMetadata record from the broker's
``__consumer_offsets`` segment, and the hash in it must equal what Kafka's group coordinator
code computes for that topic id, name, partition count and rack
(tests/coordinator/java/MetadataHash.java, through tests/coordinator/test_metadata_hash_kafka.py).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

from kbroker.protocol import messages
from kbroker.protocol.primitives import ZERO_UUID
from kbroker.metadata.image import TopicMetadata
from tests.coordinator.test_metadata_hash_kafka import kafka_hashes
from tests.integration.clients import Wire, ensure_topic
from tests.log.conftest import kafka_classpath

RACK = "rack-ü"
METADATA, CONSUMER_HB = 3, 68
RETRIABLE = {14, 15, 16}


def _join(wire, group: str, topic: str):
    Q = messages.request_class(CONSUMER_HB)
    deadline = time.monotonic() + 30
    while True:
        r = wire.call(CONSUMER_HB, 1, Q(group_id=group, member_id=uuid.uuid4().hex,
                                        member_epoch=0, rebalance_timeout_ms=30000,
                                        subscribed_topic_names=[topic], topic_partitions=[]))
        if r.error_code not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def _stored_hashes(data_dir: str, group: str) -> list[int]:
    """The metadataHash of every ConsumerGroupMetadata record of ``group``, as Kafka decodes it."""
    segments = sorted(Path(data_dir).glob("__consumer_offsets-*/*.log"))
    dump = subprocess.run(["java", "-cp", kafka_classpath(),
                           "org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder",
                           "--files", ",".join(map(str, segments))],
                          capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr[-2000:]
    hashes = []
    for line in dump.stdout.splitlines():
        if '"type":"3"' not in line or f'"groupId":"{group}"' not in line:
            continue
        payload = json.loads(line[line.index("payload: ") + len("payload: "):])
        hashes.append(payload["data"]["metadataHash"])
    return hashes


def test_stored_metadata_hash_is_kafkas(broker_factory):
    broker = broker_factory({"broker.rack": RACK, "offsets.topic.num.partitions": 1})
    topic, group = f"hash-{uuid.uuid4().hex[:6]}", f"g-hash-{uuid.uuid4().hex[:6]}"
    ensure_topic(broker.bootstrap, topic, 3)
    with Wire(broker.bootstrap) as wire:
        assert _join(wire, group, topic).error_code == 0
        M = messages.request_class(METADATA)
        meta = wire.call(METADATA, 12, M(
            topics=[M.MetadataRequestTopic(name=topic, topic_id=ZERO_UUID)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    (described,) = meta.topics
    node = meta.brokers[0].node_id
    hashes = _stored_hashes(str(broker.data_dir), group)
    assert hashes, "no ConsumerGroupMetadata record of the group"
    topics = [TopicMetadata(topic, described.topic_id, [[node]] * 3)]
    (expected,) = kafka_hashes({node: RACK}, topics, [("group", [topic])])
    assert expected != 0
    assert hashes[-1] == expected

