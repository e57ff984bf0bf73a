"""The group metadata hash (KIP-1101) equals Apache Kafka's, bit for bit.

kbroker writes the hash into ConsumerGroupMetadataValue / ShareGroupMetadataValue /
StreamsGroupMetadataValue, and a Kafka broker reading that ``__consumer_offsets`` recomputes it
and bumps the group's epoch on any difference. So the reference here is Kafka's own code:
java/MetadataHash.java replays the same brokers and topics as KRaft records into Kafka 4.4.0's
MetadataImage and asks its group coordinator (``Utils.computeTopicHash``,
``ModernGroup.computeMetadataHash``) for the hashes; kbroker's ``modern.topic_hash`` /
``group_hash`` must give the same numbers.
"""

from __future__ import annotations

import base64
import random
import subprocess
import uuid
from pathlib import Path

from kbroker.coordinator.group.modern import group_hash, topic_hash
from kbroker.metadata.image import BrokerInfo, MetadataImage, TopicMetadata
from tests import java_source
from tests.log.conftest import kafka_classpath

DRIVER = Path(__file__).resolve().parent / "java" / "MetadataHash.java"


def _hex(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").hex()


def _kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def kafka_hashes(brokers, topics, queries) -> list[int]:
    """Kafka's hashes for ``queries`` (("topic", name) or ("group", [names])) over an image of
    ``brokers`` ({id: rack or None}) and ``topics`` (TopicMetadata)."""
    lines = [f"B\t{node}\t{'-' if rack is None else _hex(rack)}" for node, rack in brokers.items()]
    for t in topics:
        replicas = ";".join(",".join(str(r) for r in part) for part in t.assignments)
        lines.append(f"T\t{_kafka_uuid(t.topic_id)}\t{_hex(t.name)}\t{replicas}")
    for kind, arg in queries:
        if kind == "topic":
            lines.append(f"H\t{_hex(arg)}")
        else:
            lines.append("G\t" + ",".join(_hex(name) for name in arg))
    out = subprocess.run(java_source.command(DRIVER, kafka_classpath()),
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         encoding="utf-8", timeout=180)
    assert out.returncode == 0, out.stderr
    return [int(line) for line in out.stdout.split()]


def kbroker_hashes(brokers, topics, queries) -> list[int]:
    image = MetadataImage.build("hash-test", topics)
    if brokers:
        image = image.with_brokers([BrokerInfo(node, {}, rack) for node, rack in brokers.items()],
                                   min(brokers))
    return [topic_hash(image, arg) if kind == "topic" else group_hash(image, arg)
            for kind, arg in queries]


def _topic(name, partitions, topic_id=None):
    return TopicMetadata(name, topic_id or uuid.uuid4(), tuple(tuple(p) for p in partitions))


def test_hashes_equal_kafkas():
    rng = random.Random(1101)
    # Racks with non-ASCII text, one outside the BMP (a surrogate pair in Java), one where Java's
    # order (UTF-16 code units) differs from Python's (code points): U+FFFD sorts after U+1F600
    # in Java, before it in Python. Two brokers share a rack: Kafka lists it once per replica.
    brokers = {1: "rack-a", 2: "rack-a", 3: "zone-ü", 4: "z\U0001F600", 5: "z\uFFFD", 6: None,
               7: "r,,", 8: "r,"}
    names = ["orders", "café-événements", "注文", "\U0001F680-launches", "\uFFFD-x",
             "t" * 249, "a", "b"]
    topics = [
        # one partition on no known broker: no racks at all
        _topic("orders", [[42]], uuid.UUID(int=0x0123456789ABCDEF_FEDCBA9876543210)),
        # the id's high bits set (negative longs in Java)
        _topic("café-événements", [[1, 2, 3]], uuid.UUID(int=(1 << 128) - 12345)),
        # many partitions: a stream of several of XXH3's 1 KiB blocks
        _topic("注文", [rng.sample(range(1, 10), 3) for _ in range(300)]),
        _topic("\U0001F680-launches", [[4, 5], [5, 4, 6], [6], [], [7, 8], [8, 7]]),
        _topic("\uFFFD-x", [[3, 4, 5]]),
        _topic("t" * 249, [[1], [2], [3], [4], [5], [6]]),
        _topic("a", [[1]]),
        _topic("b", [[2]]),
    ]
    queries = [("topic", name) for name in names]
    queries += [("topic", "missing")]
    queries += [("group", names), ("group", ["orders"]), ("group", ["a", "b"]),
                ("group", ["b", "a", "missing"]), ("group", ["\U0001F680-launches", "\uFFFD-x"]),
                ("group", []), ("group", ["missing", "also-missing"])]
    kafka = kafka_hashes(brokers, topics, queries)
    ours = kbroker_hashes(brokers, topics, queries)
    assert len(kafka) == len(queries)
    assert ours == kafka
    # Kafka's conventions the rest of the coordinator relies on: absent topics and empty groups
    # hash to 0, and a group's hash ignores the topics that do not exist.
    assert kafka[len(names)] == 0
    assert kafka[-2] == kafka[-1] == 0
    assert kafka[len(names) + 3] == kafka[len(names) + 4]


def test_hashes_equal_kafkas_without_brokers():
    """No broker known (an image without a broker list, nothing else given): no racks."""
    topics = [_topic(f"topic-{i}", [[1]] * (1 + i * 7)) for i in range(12)]
    queries = [("topic", t.name) for t in topics] + [("group", [t.name for t in topics])]
    assert kbroker_hashes({}, topics, queries) == kafka_hashes({}, topics, queries)


def test_random_topics_equal_kafkas():
    rng = random.Random(848)
    alphabet = "abcxyz-_.0123456789é中\U0001F600"
    brokers = {node: (None if rng.random() < 0.2 else
                      "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))))
               for node in range(1, 9)}
    topics = []
    for i in range(40):
        name = f"{i}-" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        partitions = [rng.sample(range(1, 11), rng.randint(0, 4))
                      for _ in range(rng.randint(1, 64))]
        topics.append(_topic(name, partitions, uuid.UUID(int=rng.getrandbits(128))))
    names = [t.name for t in topics]
    queries = [("topic", n) for n in names]
    queries += [("group", rng.sample(names, rng.randint(1, len(names)))) for _ in range(10)]
    assert kbroker_hashes(brokers, topics, queries) == kafka_hashes(brokers, topics, queries)


def test_cached_hash_follows_broker_and_topic_changes():
    """Topic hashes are cached per topic and broker map; a new rack or a new partition count
    gives the hash a fresh image of the same state gives."""
    topic_id = uuid.uuid4()

    def image(racks, partitions, topic=None):
        topic = topic or _topic("t", [[1, 2]] * partitions, topic_id)
        return MetadataImage.build("c", [topic]).with_brokers(
            [BrokerInfo(node, {}, rack) for node, rack in racks.items()], 1), topic

    before, topic = image({1: "a", 2: "b"}, 3)
    first = topic_hash(before, "t")
    moved, _ = image({1: "a", 2: "c"}, 3, topic)  # the same TopicMetadata, a new rack
    assert topic_hash(moved, "t") != first
    assert topic_hash(moved, "t") == topic_hash(image({1: "a", 2: "c"}, 3)[0], "t")
    assert topic_hash(before, "t") == first
    grown, _ = image({1: "a", 2: "b"}, 4)
    assert topic_hash(grown, "t") not in (first, topic_hash(moved, "t"))
