"""ShareFetch (78) and ShareAcknowledge (79) over a real socket against a broker that has the
in-memory persister: acquisition and redelivery across members, acknowledgement errors, share
session epochs, lock expiry, the delivery limit, read_committed, and what gets persisted."""

from __future__ import annotations

import time

import pytest

from kbroker.coordinator.share.persister import SharePartitionKey
from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from tests.integration.clients import Wire, ensure_topic
from tests.recordbatch import build_batch
from tests.share.broker import share_broker

SHARE_FETCH, SHARE_ACK = 78, 79
ACCEPT, RELEASE, REJECT = 1, 2, 3
GROUP = "sg"


@pytest.fixture(scope="module")
def kafka():
    with share_broker({"group.share.record.lock.duration.ms": 1000,
                       "group.share.min.record.lock.duration.ms": 1000,
                       "group.share.delivery.count.limit": 3}) as broker:
        yield broker


_topics = iter(range(10**6))


@pytest.fixture
def topic(kafka):
    """A fresh topic with 5 records in 2 batches (offsets 0-2 and 3-4); returns (name, id)."""
    name = f"share-{next(_topics)}"
    ensure_topic(kafka.bootstrap, name)
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        assert wire.produce(name, 0, build_batch([b"a", b"b", b"c"])).error_code == 0
        assert wire.produce(name, 0, build_batch([b"d", b"e"])).error_code == 0
        topic_id = wire.metadata([name]).topics[0].topic_id
    # As the group coordinator does when it assigns the partition (share.auto.offset.reset
    # earliest): the share partition starts at 0, not at the high watermark.
    kafka.persister.state[SharePartitionKey(GROUP, topic_id, 0)] = (0, 0, {})
    return name, topic_id


class Member:
    """One share consumer's wire: its session epoch and requests."""

    def __init__(self, kafka, member_id: str, group: str = GROUP, version: int = 2):
        self.wire = Wire(kafka.bootstrap)
        self.member_id = member_id
        self.group = group
        self.epoch = 0
        self.version = version

    def close(self):
        self.wire.close()

    def fetch(self, topic_id, partitions=(0,), acks=None, max_wait_ms=0, max_records=500,
              epoch=None, batch_size=500, min_bytes=1, **fields):
        Q = messages.request_class(SHARE_FETCH)
        acks = acks or {}
        request = Q(group_id=self.group, member_id=self.member_id,
                    share_session_epoch=self.epoch if epoch is None else epoch,
                    max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                    max_records=max_records, batch_size=batch_size, **fields,
                    topics=[Q.FetchTopic(topic_id=topic_id, partitions=[
                        Q.FetchPartition(partition_index=p, acknowledgement_batches=[
                            Q.AcknowledgementBatch(first_offset=f, last_offset=l,
                                                   acknowledge_types=t)
                            for f, l, t in acks.get(p, [])]) for p in partitions])])
        response = self.wire.call(SHARE_FETCH, self.version, request)
        if response.error_code == 0 and epoch is None:
            self.epoch = -1 if self.epoch == -1 else self.epoch + 1
        return response

    def acknowledge(self, topic_id, batches, partition=0, epoch=None):
        Q = messages.request_class(SHARE_ACK)
        request = Q(group_id=self.group, member_id=self.member_id,
                    share_session_epoch=self.epoch if epoch is None else epoch,
                    topics=[Q.AcknowledgeTopic(topic_id=topic_id, partitions=[
                        Q.AcknowledgePartition(partition_index=partition, acknowledgement_batches=[
                            Q.AcknowledgementBatch(first_offset=f, last_offset=l,
                                                   acknowledge_types=t)
                            for f, l, t in batches])])])
        response = self.wire.call(SHARE_ACK, self.version, request)
        if response.error_code == 0 and epoch is None:
            self.epoch += 1
        return response


def acquired(response):
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def partition(response, index=0):
    return next(p for t in response.responses for p in t.partitions
                if p.partition_index == index)


@pytest.fixture
def members(kafka):
    made = []

    def make(member_id, **kw):
        member = Member(kafka, member_id, **kw)
        made.append(member)
        return member
    yield make
    for member in made:
        member.close()


def test_api_versions_advertise_share_fetch_and_acknowledge(kafka):
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        assert wire.versions[SHARE_FETCH] == (1, 2)
        assert wire.versions[SHARE_ACK] == (1, 2)


def test_three_members_each_record_once_when_all_accept(kafka, topic, members):
    _, topic_id = topic
    a, b, c = members("member-a"), members("member-b"), members("member-c")
    first = a.fetch(topic_id, max_records=1)
    assert first.error_code == 0 and first.acquisition_lock_timeout_ms == 1000
    assert acquired(first) == [(0, 2, 1)]  # a whole batch, past max_records
    assert partition(first).records  # the batch's bytes
    second = b.fetch(topic_id, max_records=1)
    assert acquired(second) == [(3, 4, 1)]
    assert acquired(c.fetch(topic_id)) == []
    ack_a = a.fetch(topic_id, acks={0: [(0, 2, [ACCEPT])]})
    assert partition(ack_a).acknowledge_error_code == 0
    assert b.acknowledge(topic_id, [(3, 4, [ACCEPT])]).responses[0].partitions[0].error_code == 0
    assert acquired(c.fetch(topic_id)) == []
    key = next(k for k in kafka.persister.state if k.topic_id == topic_id)
    assert kafka.persister.state[key][1] == 5  # the start offset moved past all five


def test_release_redelivers_and_reject_does_not(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    assert acquired(a.fetch(topic_id)) == [(0, 4, 1)]
    response = a.acknowledge(topic_id, [(0, 1, [RELEASE]), (2, 4, [REJECT])])
    assert response.responses[0].partitions[0].error_code == 0
    assert acquired(b.fetch(topic_id)) == [(0, 1, 2)]


def test_acknowledgement_errors(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    a.fetch(topic_id, max_records=1)  # 0-2
    b.fetch(topic_id)  # 3-4
    err = Errors.INVALID_RECORD_STATE.code
    # another member's offsets
    assert a.acknowledge(topic_id, [(3, 3, [ACCEPT])]).responses[0].partitions[0].error_code == err
    # past what was ever acquired
    assert a.acknowledge(topic_id, [(4, 9, [ACCEPT])]).responses[0].partitions[0].error_code == \
        Errors.INVALID_REQUEST.code
    # overlapping / unordered batches, and a types list of the wrong length
    for batches in ([(0, 2, [ACCEPT]), (1, 1, [ACCEPT])], [(2, 2, [ACCEPT]), (0, 0, [ACCEPT])],
                    [(0, 2, [ACCEPT, ACCEPT])], [(0, 0, [7])], [(2, 0, [ACCEPT])]):
        response = a.acknowledge(topic_id, batches)
        assert response.responses[0].partitions[0].error_code == Errors.INVALID_REQUEST.code, \
            batches
    # an offset this member already acknowledged is no longer acquired
    assert a.acknowledge(topic_id, [(2, 2, [ACCEPT])]).responses[0].partitions[0].error_code == 0
    assert a.acknowledge(topic_id, [(2, 2, [ACCEPT])]).responses[0].partitions[0].error_code == err
    # Kafka's order check is "first offset < previous last offset": batches may touch
    # (0-1 then 1-2 passes it); 1 is then named twice and 2 is acknowledged already
    touching = a.acknowledge(topic_id, [(0, 1, [ACCEPT]), (1, 2, [ACCEPT])])
    assert touching.responses[0].partitions[0].error_code == err
    # piggybacked on a fetch: answered in acknowledge_error_code
    response = b.fetch(topic_id, acks={0: [(1, 1, [ACCEPT])]})
    assert response.error_code == 0
    assert partition(response).acknowledge_error_code == err
    # below the start offset: done already, and Kafka answers NONE
    assert a.acknowledge(topic_id, [(0, 1, [ACCEPT])]).responses[0].partitions[0].error_code == 0
    assert a.acknowledge(topic_id, [(0, 0, [ACCEPT])]).responses[0].partitions[0].error_code == 0


def test_share_session_epochs(kafka, topic, members):
    _, topic_id = topic
    a = members("member-a")
    assert a.acknowledge(topic_id, [(0, 0, [ACCEPT])], epoch=1).error_code == \
        Errors.SHARE_SESSION_NOT_FOUND.code
    assert a.fetch(topic_id, epoch=3).error_code == Errors.SHARE_SESSION_NOT_FOUND.code
    a.fetch(topic_id)
    assert a.fetch(topic_id, epoch=5).error_code == Errors.INVALID_SHARE_SESSION_EPOCH.code
    assert a.acknowledge(topic_id, [(0, 0, [ACCEPT])], epoch=0).error_code == \
        Errors.INVALID_SHARE_SESSION_EPOCH.code
    # acknowledgements in an opening fetch
    assert a.fetch(topic_id, epoch=0, acks={0: [(0, 0, [ACCEPT])]}).error_code == \
        Errors.INVALID_REQUEST.code
    # the right epoch still works; closing releases what the member held
    assert a.fetch(topic_id).error_code == 0
    closing = a.fetch(topic_id, epoch=-1)
    assert closing.error_code == 0
    b = members("member-b")
    assert acquired(b.fetch(topic_id)) == [(0, 4, 2)]


def test_bad_group_and_member_ids(kafka, topic, members):
    _, topic_id = topic
    long_id = members("x" * 37)
    assert long_id.fetch(topic_id).error_code == Errors.INVALID_REQUEST.code
    empty = members("")
    assert empty.fetch(topic_id).error_code == Errors.INVALID_REQUEST.code


def test_unknown_topic_id(kafka, members):
    import uuid
    a = members("member-a")
    response = a.fetch(uuid.uuid4())
    assert response.error_code == 0
    assert partition(response).error_code == Errors.UNKNOWN_TOPIC_ID.code


def test_lock_expiry_hands_records_to_another_member(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    assert acquired(a.fetch(topic_id)) == [(0, 4, 1)]
    started = time.monotonic()
    response = b.fetch(topic_id, max_wait_ms=5000)  # long poll until the lock (1 s) expires
    assert acquired(response) == [(0, 4, 2)]
    assert 0.5 < time.monotonic() - started < 4.5
    # a's lock is gone: its acknowledgement is refused
    assert a.acknowledge(topic_id, [(0, 4, [ACCEPT])]).responses[0].partitions[0].error_code == \
        Errors.INVALID_RECORD_STATE.code


def test_long_poll_wakes_on_new_records(kafka, topic, members):
    name, topic_id = topic
    a = members("member-a")
    a.fetch(topic_id)
    a.acknowledge(topic_id, [(0, 4, [ACCEPT])])
    import threading
    def produce_later():
        time.sleep(0.3)
        with Wire(kafka.bootstrap) as wire:
            wire.api_versions()
            wire.produce(name, 0, build_batch([b"f"]))
    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    assert acquired(a.fetch(topic_id, max_wait_ms=5000)) == [(5, 5, 1)]
    assert time.monotonic() - started < 3


def test_min_bytes_waits_for_enough_records(kafka, topic, members):
    """As Kafka's DelayedShareFetch: with less than min_bytes to acquire the fetch waits, and
    answers once a produce brings enough, or at max_wait_ms with what there is."""
    name, topic_id = topic
    a = members("member-a")
    a.fetch(topic_id, max_records=1)  # opens the session; takes the first batch (0-2)
    started = time.monotonic()
    assert acquired(a.fetch(topic_id, min_bytes=100_000, max_wait_ms=700)) == [(3, 4, 1)]
    assert time.monotonic() - started >= 0.6  # the 2 small records are not 100 kB: it waited
    a.acknowledge(topic_id, [(0, 4, [ACCEPT])])

    import threading

    def produce_later():
        for value in (b"small", b"x" * 3000):  # the second batch brings min_bytes
            time.sleep(0.4)
            with Wire(kafka.bootstrap) as wire:
                wire.api_versions()
                wire.produce(name, 0, build_batch([value]))
    producer = threading.Thread(target=produce_later)
    producer.start()
    started = time.monotonic()
    response = a.fetch(topic_id, min_bytes=2000, max_wait_ms=20_000)
    producer.join()
    assert acquired(response) == [(5, 6, 1)]
    assert time.monotonic() - started < 15  # answered when min_bytes was met, not at max wait


def test_poison_record_archived_after_the_delivery_limit(kafka, topic, members):
    _, topic_id = topic
    a = members("member-a")
    for delivery in (1, 2, 3):
        got = acquired(a.fetch(topic_id, max_records=1))
        assert got == [(0, 2 if delivery == 1 else 0, delivery)]
        a.acknowledge(topic_id, [(0, 0, [RELEASE]), (1, 2, [ACCEPT])] if delivery == 1
                      else [(0, 0, [RELEASE])])
    # offset 0 was delivered 3 times (the limit): archived; the next fetch starts at 3
    assert acquired(a.fetch(topic_id)) == [(3, 4, 1)]


def test_renew_extends_the_lock(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    a.fetch(topic_id)
    time.sleep(0.6)
    response = a.fetch(topic_id, acks={0: [(0, 4, [4])]}, is_renew_ack=True, max_wait_ms=0,
                       max_records=0)
    # min_bytes and max_bytes must be 0 too
    assert response.error_code == Errors.INVALID_REQUEST.code
    renew = a.acknowledge(topic_id, [(0, 4, [4])])
    # RENEW outside an is_renew_ack request is INVALID_REQUEST
    assert renew.responses[0].partitions[0].error_code == Errors.INVALID_REQUEST.code
    Q = messages.request_class(SHARE_ACK)
    request = Q(group_id=GROUP, member_id="member-a", share_session_epoch=a.epoch,
                is_renew_ack=True, topics=[Q.AcknowledgeTopic(topic_id=topic_id, partitions=[
                    Q.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                        Q.AcknowledgementBatch(first_offset=0, last_offset=4,
                                               acknowledge_types=[4])])])])
    response = a.wire.call(SHARE_ACK, 2, request)
    assert response.responses[0].partitions[0].error_code == 0
    a.epoch += 1
    time.sleep(0.6)  # past the first lock, not the renewed one
    assert acquired(b.fetch(topic_id)) == []


def test_closed_connection_releases_the_members_records(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    a.fetch(topic_id)
    a.close()
    started = time.monotonic()
    response = b.fetch(topic_id, max_wait_ms=5000)
    assert acquired(response) == [(0, 4, 2)]
    assert time.monotonic() - started < 0.5  # released at once, not when the 1 s lock expires


def test_a_group_without_share_state(kafka, topic, members):
    """ShareFetch does not ask the group coordinator: a group id with no initialized share
    state (a classic group's, or no group at all) reaches the persister, which refuses to read;
    Kafka 4.4.0 answers the partition UNKNOWN_SERVER_ERROR, and an acknowledgement for it
    UNKNOWN_TOPIC_OR_PARTITION with the error's default message."""
    _, topic_id = topic
    a = members("member-a", group="classic-group")
    response = a.fetch(topic_id)
    assert response.error_code == 0
    assert partition(response).error_code == Errors.UNKNOWN_SERVER_ERROR.code
    assert partition(response).error_message is None
    ack = a.acknowledge(topic_id, [(0, 0, [ACCEPT])]).responses[0].partitions[0]
    assert ack.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert ack.error_message == "This server does not host this topic-partition."


def test_top_level_errors_carry_no_message(kafka, topic, members):
    _, topic_id = topic
    response = members("x" * 37).fetch(topic_id)
    assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST.code, None)


def test_read_committed_skips_aborted_and_open_transactions(kafka, members):
    """share.isolation.level=read_committed: only records below the last stable offset are
    acquired, aborted transactions' records and the markers are never delivered."""
    from confluent_kafka import Producer

    from kbroker.share.settings import READ_COMMITTED, ShareGroupSettings

    name = f"share-rc-{next(_topics)}"
    ensure_topic(kafka.bootstrap, name)
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        topic_id = wire.metadata([name]).topics[0].topic_id
    group = "rc-group"
    kafka.persister.state[SharePartitionKey(group, topic_id, 0)] = (0, 0, {})
    defaults = kafka.share_partitions.settings
    kafka.share_partitions.settings = lambda g: (
        ShareGroupSettings(record_lock_duration_ms=1000, delivery_count_limit=3,
                           isolation_level=READ_COMMITTED) if g == group else defaults(g))
    try:
        producer = Producer({"bootstrap.servers": kafka.bootstrap,
                             "transactional.id": f"tx-{name}"})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce(name, b"aborted-1", partition=0)
        producer.produce(name, b"aborted-2", partition=0)
        producer.flush(20)  # else librdkafka drops them unsent and writes no marker
        producer.abort_transaction(20)
        producer.begin_transaction()
        producer.produce(name, b"committed", partition=0)
        producer.flush(20)
        producer.commit_transaction(20)
        producer.begin_transaction()
        producer.produce(name, b"open", partition=0)
        producer.flush(20)
        a = members("member-a", group=group)
        response = a.fetch(topic_id)
        got = acquired(response)
        # offsets: 0-1 aborted, 2 abort marker, 3 committed, 4 commit marker, 5 open
        assert got == [(3, 3, 1)], got
        from tests.recordbatch import parse_batches
        batches = parse_batches(partition(response).records)
        assert [r.value for batch in batches for r in batch.raw_records()] == [b"committed"]
        producer.commit_transaction(20)
        got = acquired(a.fetch(topic_id, max_wait_ms=3000))
        assert got == [(5, 5, 1)], got
    finally:
        kafka.share_partitions.settings = defaults


def test_what_is_persisted(kafka, topic, members):
    """Acknowledgements are written with their delivery counts and the moved start offset;
    acquisition alone is not."""
    _, topic_id = topic
    key = SharePartitionKey(GROUP, topic_id, 0)
    a = members("member-a")
    a.fetch(topic_id)
    assert [w for w in kafka.persister.writes if w[0] == key] == []
    a.acknowledge(topic_id, [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT])])
    from kbroker.coordinator.share.persister import ARCHIVED, AVAILABLE, StateBatch
    writes = [w for w in kafka.persister.writes if w[0] == key]
    assert writes == [(key, 1, [StateBatch(1, 1, AVAILABLE, 1), StateBatch(2, 2, ARCHIVED, 1)])]


def test_forgotten_partitions_and_incremental_answers(kafka, topic, members):
    _, topic_id = topic
    a = members("member-a")
    opening = a.fetch(topic_id, partitions=(0,), max_records=1)
    assert acquired(opening) == [(0, 2, 1)]
    # incremental: a partition with nothing new is left out of the answer
    a.acknowledge(topic_id, [(0, 2, [ACCEPT])])
    Q = messages.request_class(SHARE_FETCH)
    forget = a.fetch(topic_id, partitions=(), forgotten_topics_data=[
        Q.ForgottenTopic(topic_id=topic_id, partitions=[0])])
    assert forget.error_code == 0 and forget.responses == []
    # the session no longer fetches partition 0: records 3-4 stay with nobody
    assert a.fetch(topic_id, partitions=()).responses == []
    b = members("member-b")
    assert acquired(b.fetch(topic_id)) == [(3, 4, 1)]


def test_share_session_limit():
    with share_broker({"group.share.max.share.sessions": 1}) as broker:
        one, two = Member(broker, "member-1"), Member(broker, "member-2")
        try:
            import uuid
            topic_id = uuid.uuid4()
            assert one.fetch(topic_id).error_code == 0
            started = time.monotonic()
            refused = two.fetch(topic_id, max_wait_ms=400)
            assert refused.error_code == Errors.SHARE_SESSION_LIMIT_REACHED.code
            assert time.monotonic() - started >= 0.35  # after max_wait_ms, as Kafka
            assert one.fetch(topic_id, epoch=-1).error_code == 0  # closing frees the slot
            assert two.fetch(topic_id, epoch=0).error_code == 0
        finally:
            one.close()
            two.close()


def test_a_refused_write_undoes_the_acknowledgement(kafka, topic, members):
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    assert acquired(a.fetch(topic_id)) == [(0, 4, 1)]
    kafka.persister.fail_writes = Errors.COORDINATOR_NOT_AVAILABLE
    try:
        refused = a.acknowledge(topic_id, [(0, 4, [ACCEPT])])
    finally:
        kafka.persister.fail_writes = None
    assert refused.responses[0].partitions[0].error_code == \
        Errors.COORDINATOR_NOT_AVAILABLE.code
    # still a's: nobody else gets them, and a's retry goes through
    assert acquired(b.fetch(topic_id)) == []
    assert a.acknowledge(topic_id, [(0, 4, [ACCEPT])]).responses[0].partitions[0].error_code == 0
    key = SharePartitionKey(GROUP, topic_id, 0)
    assert kafka.persister.state[key][1] == 5


def test_a_new_leader_epoch_of_the_same_leader_keeps_the_share_partition(kafka, topic, members):
    """The ZooKeeper controller bumps the leader epoch when the ISR shrinks, with the leader
    unchanged: the share partition stays (as Kafka's), so the records a member holds stay its
    own and its ACCEPT sticks. (Reloading it there lost both: the share soak saw accepted
    records delivered again.)"""
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    assert acquired(a.fetch(topic_id)) == [(0, 4, 1)]
    name = kafka.controller.image.topic_by_id(topic_id).name
    replica = kafka.replicas.get(name, 0)
    replica.leader_epoch += 1
    try:
        assert acquired(b.fetch(topic_id)) == []  # still a's
        assert a.acknowledge(topic_id, [(0, 4, [ACCEPT])]).responses[0].partitions[0] \
            .error_code == 0
        assert acquired(b.fetch(topic_id)) == []  # accepted: never again
        assert kafka.persister.state[SharePartitionKey(GROUP, topic_id, 0)][1] == 5
    finally:
        replica.leader_epoch -= 1


def test_a_fenced_write_reloads_the_share_partition(kafka, topic, members):
    """Another leader read the state under a newer epoch (leadership moved away and back): the
    share coordinator fences this copy's write, which is refused to the member, and the copy is
    dropped; the next fetch loads the persisted state again (locks held under the old epoch are
    gone, as on Kafka)."""
    _, topic_id = topic
    a, b = members("member-a"), members("member-b")
    assert acquired(a.fetch(topic_id)) == [(0, 4, 1)]
    key = SharePartitionKey(GROUP, topic_id, 0)
    stale = kafka.share_partitions._partitions[key]
    kafka.persister.fail_writes = Errors.FENCED_LEADER_EPOCH
    try:
        refused = a.acknowledge(topic_id, [(0, 4, [ACCEPT])])
    finally:
        kafka.persister.fail_writes = None
    assert refused.responses[0].partitions[0].error_code == Errors.NOT_LEADER_OR_FOLLOWER.code
    # dropped, and the undo of the refused acknowledgement set no lock timer on it
    assert key not in kafka.share_partitions._partitions and stale.timer is None
    assert acquired(b.fetch(topic_id)) == [(0, 4, 1)]  # nothing was persisted for them


def test_deleting_a_topic_drops_its_share_partitions_and_no_other(kafka, topic, members):
    """A metadata change looks at the share partitions of the topics it names: the deleted
    topic's go (with their lock timers), another topic's stay as they are."""
    from confluent_kafka.admin import AdminClient

    from tests.integration.clients import wait_until

    doomed_name, doomed_id = topic
    kept_name = f"{doomed_name}-kept"
    ensure_topic(kafka.bootstrap, kept_name)
    with Wire(kafka.bootstrap) as wire:
        wire.api_versions()
        assert wire.produce(kept_name, 0, build_batch([b"x"])).error_code == 0
        kept_id = wire.metadata([kept_name]).topics[0].topic_id
    kafka.persister.state[SharePartitionKey(GROUP, kept_id, 0)] = (0, 0, {})
    a = members("member-a")
    assert acquired(a.fetch(doomed_id)) == [(0, 4, 1)]
    assert acquired(a.fetch(kept_id)) == [(0, 0, 1)]
    loaded = kafka.share_partitions._partitions
    doomed = loaded[SharePartitionKey(GROUP, doomed_id, 0)]
    kept = loaded[SharePartitionKey(GROUP, kept_id, 0)]
    assert doomed.timer is not None  # the lock of the acquired records

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.delete_topics([doomed_name])[doomed_name].result(10)
    wait_until(lambda: SharePartitionKey(GROUP, doomed_id, 0) not in loaded,
               message="the deleted topic's share partition is still loaded")
    assert doomed.timer is None
    assert loaded[SharePartitionKey(GROUP, kept_id, 0)] is kept and kept.timer is not None
    assert doomed_id not in kafka.share_partitions._by_topic
    assert kafka.share_partitions._by_topic[kept_id] == {SharePartitionKey(GROUP, kept_id, 0)}
