"""Share-group dead-letter queues (KIP-1191) over real sockets: a broker in this process with the
in-memory persister, group configs set with IncrementalAlterConfigs (confluent's AdminClient),
records rejected or out of delivery attempts through ShareFetch/ShareAcknowledge, and the DLQ
topic read back with Fetch. Checks the records (headers exactly, key and value copied or not,
the partition), the topic checks at write time, the states persisted (3 before 4), and the
resend of records loaded in ARCHIVING without writing one twice."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kbroker.coordinator.share.persister import ARCHIVED, ARCHIVING, SharePartitionKey
from tests.integration.clients import Wire, ensure_topic, wait_until
from compat_tests.clients.records import Rec
from tests.recordbatch import build_batch
from tests.share.broker import share_broker
from tests.share.test_share_fetch_wire import RELEASE, REJECT, Member, acquired, partition

LIMIT = 2


@pytest.fixture(scope="module")
def kafka():
    with share_broker({"group.share.record.lock.duration.ms": 1000,
                       "group.share.min.record.lock.duration.ms": 1000,
                       "group.share.delivery.count.limit": LIMIT}) as broker:
        yield broker


def admin(kafka):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


def set_group_configs(kafka, group: str, configs: dict):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    client = admin(kafka)  # kept until the answer: a dropped client cancels its requests
    return client.incremental_alter_configs([resource])[resource].result(20)


def set_broker_config(kafka, name: str, value: str):
    """A cluster-wide dynamic broker config (resource name ""), through the wire: confluent's
    AdminClient refuses an empty broker name."""
    from kbroker.protocol import messages
    Q = messages.request_class(44)
    request = Q(validate_only=False, resources=[Q.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[Q.AlterableConfig(
            name=name, config_operation=0, value=value)])])
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        response = wire.call(44, 1, request)
    assert response.responses[0].error_code == 0, response.responses[0].error_message


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


class Setup:
    """A source topic (3 partitions) with records in partition 2, a share group reading it
    from offset 0, and a DLQ topic (2 partitions, so partition 2 maps to DLQ partition 0)."""

    def __init__(self, kafka, dlq_configs=None, copy=False, dlq_name=None, create_dlq=True):
        self.kafka = kafka
        self.group = unique("dlq-group-")
        self.source = unique("dlq-source-")
        self.dlq = dlq_name or unique("dlq.target-")
        ensure_topic(kafka.bootstrap, self.source, 3)
        if create_dlq:
            configs = {"errors.deadletterqueue.group.enable": "true"} if dlq_configs is None \
                else dlq_configs
            ensure_topic(kafka.bootstrap, self.dlq, 2, configs)
        with Wire(kafka.bootstrap) as wire:
            wire.api_versions()
            batch = build_batch([Rec(key=b"k0", value=b"v0", headers=(("h", b"x"),)),
                                 Rec(key=None, value=b"v1"), Rec(key=b"k2", value=None)])
            assert wire.produce(self.source, 2, batch).error_code == 0
            self.topic_id = wire.metadata([self.source]).topics[0].topic_id
        self.key = SharePartitionKey(self.group, self.topic_id, 2)
        kafka.persister.state[self.key] = (0, 0, {})
        set_group_configs(kafka, self.group, {
            "errors.deadletterqueue.topic.name": self.dlq,
            "errors.deadletterqueue.copy.record.enable": "true" if copy else "false"})
        self.member = Member(kafka, unique("m-")[:20], group=self.group)

    def close(self):
        self.member.close()

    def fetch(self, acks=None):
        return self.member.fetch(self.topic_id, partitions=(2,), acks=acks or {})

    def persisted(self):
        return self.kafka.persister.state[self.key]

    def written_states(self):
        """(offset, state) of every batch written for this share partition, in order."""
        return [(o, b.delivery_state) for key, _, batches in self.kafka.persister.writes
                if key == self.key for b in batches
                for o in range(b.first_offset, b.last_offset + 1)]


@pytest.fixture
def setups(kafka):
    made = []

    def make(**kw):
        setup = Setup(kafka, **kw)
        made.append(setup)
        return setup
    yield make
    for setup in made:
        setup.close()


def dlq_records(kafka, topic: str, index: int, count: int | None = None, wait: float = 10):
    """The records of DLQ partition ``index`` (waiting until there are ``count``):
    [(key, value, [(header, value)], timestamp)]."""
    def read():
        with Wire(kafka.bootstrap) as wire:
            wire.api_versions()
            data, batches = wire.fetch(topic, index, 0)
            if count is not None and data.error_code == 3:
                return []  # not created yet
            assert data.error_code == 0
        return [(r.key, r.value, list(r.headers), b.base_timestamp + r.timestamp_delta)
                for b in batches for r in b.raw_records()]
    if count is None:
        return read()
    return wait_until(lambda: (lambda got: got if len(got) >= count else None)(read()), wait,
                      0.05, f"{count} DLQ records in {topic}-{index}")


def headers(setup, offset, count, message):
    return [("__dlq.errors.topic", setup.source.encode()), ("__dlq.errors.partition", b"2"),
            ("__dlq.errors.offset", str(offset).encode()),
            ("__dlq.errors.group", setup.group.encode()),
            ("__dlq.errors.delivery.count", str(count).encode()),
            ("__dlq.errors.message", message.encode())]


REJECTED = "Offset rejected by client."
EXCEEDED = "Offset delivery count exceeded the threshold."


def wait_archived(setup, start_offset):
    wait_until(lambda: setup.persisted()[1] >= start_offset, 10, 0.05,
               f"start offset {start_offset} persisted")


def test_rejected_records_go_to_the_dlq_with_headers_only(kafka, setups):
    setup = setups()
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    response = setup.member.acknowledge(setup.topic_id, [(0, 2, [REJECT, 1, REJECT])],
                                        partition=2)
    assert response.responses[0].partitions[0].error_code == 0
    got = dlq_records(kafka, setup.dlq, 0, 2)
    assert [(k, v, h) for k, v, h, _ in got] == [
        (None, None, headers(setup, 0, 1, REJECTED)), (None, None, headers(setup, 2, 1, REJECTED))]
    assert dlq_records(kafka, setup.dlq, 1) == []  # 2 % 2 partitions: partition 0 only
    wait_archived(setup, 3)
    # ARCHIVING persisted (before the acknowledgement was answered), then archived after the
    # DLQ write: the start offset moving past them carries ARCHIVED
    writes = [(start, [(b.first_offset, b.last_offset, b.delivery_state) for b in batches])
              for key, start, batches in kafka.persister.writes if key == setup.key]
    first_archiving = next(i for i, (_, b) in enumerate(writes) if (0, 0, ARCHIVING) in b)
    assert (2, 2, ARCHIVING) in writes[first_archiving][1]
    assert writes[first_archiving][0] == 0
    assert any(start == 3 for start, _ in writes[first_archiving + 1:])


def test_copy_record_enable_copies_key_and_value_not_headers(kafka, setups):
    setup = setups(copy=True)
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 2, [REJECT])], partition=2)
    got = dlq_records(kafka, setup.dlq, 0, 3)
    assert [(k, v, h) for k, v, h, _ in got] == [
        (b"k0", b"v0", headers(setup, 0, 1, REJECTED)),
        (None, b"v1", headers(setup, 1, 1, REJECTED)),
        (b"k2", None, headers(setup, 2, 1, REJECTED))]


def test_the_delivery_limit_sends_records_to_the_dlq(kafka, setups):
    setup = setups()
    for delivery in range(1, LIMIT + 1):
        assert acquired(setup.fetch()) == [(0, 2, delivery)]
        setup.member.acknowledge(setup.topic_id, [(0, 2, [RELEASE])], partition=2)
    got = dlq_records(kafka, setup.dlq, 0, 3)
    assert [h for _, _, h, _ in got] == [headers(setup, o, LIMIT, EXCEEDED) for o in range(3)]
    wait_archived(setup, 3)
    assert acquired(setup.fetch()) == []


def test_a_topic_without_the_enable_flag_gets_nothing_and_records_are_archived(kafka, setups):
    setup = setups(dlq_configs={})
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 2, [REJECT])], partition=2)
    wait_archived(setup, 3)
    assert dlq_records(kafka, setup.dlq, 0) == []


def test_a_name_without_the_prefix_gets_nothing(kafka, setups):
    setup = setups(dlq_name=unique("nodlq-"))
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 0, [REJECT])], partition=2)
    wait_archived(setup, 1)
    assert dlq_records(kafka, setup.dlq, 0) == []


def test_a_missing_topic_is_created_only_with_auto_create(kafka, setups):
    setup = setups(create_dlq=False)
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 0, [REJECT])], partition=2)
    wait_archived(setup, 1)
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        assert wire.metadata([setup.dlq]).topics[0].error_code == 3  # not created
    set_broker_config(kafka, "errors.deadletterqueue.auto.create.topics.enable", "true")
    try:
        setup.member.acknowledge(setup.topic_id, [(1, 1, [REJECT])], partition=2)
        got = dlq_records(kafka, setup.dlq, 0, 1)  # num.partitions 1: partition 0
        assert [h for _, _, h, _ in got] == [headers(setup, 1, 1, REJECTED)]
        topic = kafka.controller.image.topic(setup.dlq)
        assert dict(topic.configs) == {"errors.deadletterqueue.group.enable": "true",
                                       "message.timestamp.type": "CreateTime"}
    finally:
        set_broker_config(kafka, "errors.deadletterqueue.auto.create.topics.enable", "false")


def test_a_dlq_name_starting_with_two_underscores_is_refused(kafka):
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException) as err:
        set_group_configs(kafka, unique("g-"), {"errors.deadletterqueue.topic.name": "__x"})
    error = err.value.args[0]
    assert error.code() == 40  # INVALID_CONFIG
    assert "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'" in \
        error.str()


def _reload(kafka, setup):
    """Forget the share partition as a new leader would, so the next fetch loads it again."""
    async def drop():
        manager = kafka.share_partitions
        partition = manager._partitions.get(setup.key)
        if partition is not None:
            manager._drop(partition)
    asyncio.run_coroutine_threadsafe(drop(), kafka.loop).result(10)


def test_records_loaded_in_archiving_are_resent_once(kafka, setups):
    """A broker that stopped between the DLQ write and the ARCHIVED write leaves offsets in
    ARCHIVING: the next leader resends them, and leaves out those the DLQ has already."""
    setup = setups()
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 0, [REJECT])], partition=2)
    dlq_records(kafka, setup.dlq, 0, 1)
    wait_archived(setup, 1)
    # As if offset 0's ARCHIVED write was lost and offset 1 (delivery 2, the limit) was
    # persisted ARCHIVING but its DLQ write never happened; offset 2 was delivered once.
    epoch, _, _ = setup.persisted()
    kafka.persister.state[setup.key] = (epoch, 0, {0: (ARCHIVING, 1), 1: (ARCHIVING, LIMIT),
                                                   2: (0, 1)})
    _reload(kafka, setup)
    assert acquired(setup.fetch()) == [(2, 2, 2)]
    got = dlq_records(kafka, setup.dlq, 0, 2)
    assert [h for _, _, h, _ in got] == [headers(setup, 0, 1, REJECTED),
                                         headers(setup, 1, LIMIT, EXCEEDED)]
    wait_archived(setup, 2)
    assert len(dlq_records(kafka, setup.dlq, 0)) == 2  # offset 0 not written twice


def test_share_version_1_archives_without_the_dlq(kafka, setups):
    """Kafka's gate: below share.version 2 a REJECT archives as before, whatever the group's
    configs (checked at each transition)."""
    from tests.integration.test_features import update
    assert update(kafka.bootstrap, 1, "share.version", 1, upgrade_type=2).error_code == 0
    try:
        setup = setups()
        assert acquired(setup.fetch()) == [(0, 2, 1)]
        setup.member.acknowledge(setup.topic_id, [(0, 2, [REJECT])], partition=2)
        wait_archived(setup, 3)
        assert ARCHIVING not in [s for _, s in setup.written_states()]
    finally:
        assert update(kafka.bootstrap, 1, "share.version", 2).error_code == 0
    assert dlq_records(kafka, setup.dlq, 0) == []


def test_dlq_meters_count_records_and_produce_requests(kafka, setups):
    setup = setups()
    meters = kafka.share_partitions.dead_letters.meters
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    setup.member.acknowledge(setup.topic_id, [(0, 2, [REJECT])], partition=2)
    dlq_records(kafka, setup.dlq, 0, 3)
    wait_until(lambda: meters[setup.group].records == 3, 10, 0.05, "3 records counted")
    assert (meters[setup.group].produces, meters[setup.group].failed_produces) == (1, 0)


def test_a_refused_archiving_write_undoes_the_reject_and_writes_nothing(kafka, setups):
    """As Kafka: ARCHIVING is persisted before the answer; a write the share coordinator
    refuses rolls the REJECT back (the member may acknowledge again) and nothing goes to the
    DLQ."""
    from kbroker.protocol.errors import Errors
    setup = setups()
    assert acquired(setup.fetch()) == [(0, 2, 1)]
    kafka.persister.fail_writes = Errors.COORDINATOR_NOT_AVAILABLE
    try:
        response = setup.member.acknowledge(setup.topic_id, [(0, 0, [REJECT])], partition=2)
    finally:
        kafka.persister.fail_writes = None
    assert response.responses[0].partitions[0].error_code == \
        Errors.COORDINATOR_NOT_AVAILABLE.code
    # still acquired by the member: it rejects again, and only that one is written
    response = setup.member.acknowledge(setup.topic_id, [(0, 0, [REJECT])], partition=2)
    assert response.responses[0].partitions[0].error_code == 0
    got = dlq_records(kafka, setup.dlq, 0, 1)
    wait_archived(setup, 1)
    assert [h for _, _, h, _ in dlq_records(kafka, setup.dlq, 0)] == \
        [headers(setup, 0, 1, REJECTED)] == [h for _, _, h, _ in got]
