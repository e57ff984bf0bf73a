"""The controller's pipeline over the local store, in process: validate -> delta -> commit ->
publish -> reconcile; changes persist, images never change, listeners see every change in order."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from kbroker.metadata.controller import MAX_PARTITIONS, Controller, NewTopic
from kbroker.metadata.local_store import LocalMetadataStore
from kbroker.protocol.errors import Errors, KafkaError

NODE = 1


def reopen(path) -> Controller:
    store = LocalMetadataStore(str(path), node_id=NODE)
    return Controller(store, NODE, asyncio.run(store.load()))


def run(coroutine):
    return asyncio.run(coroutine)


def test_create_alter_delete_are_persisted(tmp_path):
    controller = reopen(tmp_path)
    topic = run(controller.create_topic(NewTopic("orders", 3, configs={"retention.ms": "1000"})))
    assert reopen(tmp_path).image.topic("orders").topic_id == topic.topic_id
    assert reopen(tmp_path).image.topic("orders").assignments == ((NODE,),) * 3

    run(controller.alter_topic_configs("orders", {"retention.ms": "2000"}))
    assert dict(reopen(tmp_path).image.topic("orders").configs) == {"retention.ms": "2000"}

    run(controller.create_partitions("orders", 5))
    again = reopen(tmp_path).image.topic("orders")
    assert again.num_partitions == 5 and dict(again.configs) == {"retention.ms": "2000"}

    run(controller.alter_broker_configs({"log.retention.ms": "5000"}, cluster_default=True))
    assert reopen(tmp_path).image.broker_configs(cluster_default=True) == {
        "log.retention.ms": "5000"}

    run(controller.delete_topic("orders"))
    assert reopen(tmp_path).image.topic("orders") is None


def test_security_quotas_and_features_are_persisted(tmp_path):
    controller = reopen(tmp_path)
    acl = (2, "orders", 3, "User:alice", "*", 3, 3)
    run(controller.alter_scram_credentials({("alice", "SCRAM-SHA-256"): "salt=a"}, set()))
    assert run(controller.create_acls([acl, acl])) == {}
    run(controller.alter_client_quotas({(("user", "alice"),): {"producer_byte_rate": 1024}}))
    run(controller.update_features({"transaction.version": 2}))
    image = reopen(tmp_path).image
    assert image.scram_credential("alice", "SCRAM-SHA-256") == "salt=a"
    assert image.acls == (acl,)
    assert dict(image.client_quotas[(("user", "alice"),)]) == {"producer_byte_rate": 1024.0}
    assert dict(image.finalized_features) == {"transaction.version": 2}
    assert image.features_epoch == controller.image.features_epoch > 1

    run(controller.alter_scram_credentials({}, {("alice", "SCRAM-SHA-256")}))
    assert run(controller.delete_acls([acl])) == {}
    run(controller.alter_client_quotas({(("user", "alice"),): {"producer_byte_rate": None}}))
    image = reopen(tmp_path).image
    assert image.scram_credential("alice", "SCRAM-SHA-256") is None
    assert image.acls == () and dict(image.client_quotas) == {}


def test_a_readers_image_does_not_change(tmp_path):
    controller = reopen(tmp_path)

    async def changes():
        await controller.create_topic(NewTopic("a", 1))
        kept = controller.image
        await controller.create_topic(NewTopic("b", 2))
        await controller.alter_topic_configs("a", {"cleanup.policy": "compact"})
        await controller.delete_topic("a")
        return kept

    kept = run(changes())
    assert set(kept.topics()) == {"a"}
    assert dict(kept.topic("a").configs) == {}
    assert set(controller.image.topics()) == {"b"}
    assert kept.topic_by_id(controller.image.topic("b").topic_id) is None


def test_images_and_topics_are_immutable(tmp_path):
    controller = reopen(tmp_path)
    topic = run(controller.create_topic(NewTopic("frozen", 2, configs={"retention.ms": "1"})))
    image = controller.image
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.assignments = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        image.cluster_id = "x"
    with pytest.raises(TypeError):
        topic.configs["retention.ms"] = "2"
    with pytest.raises(TypeError):
        image.topics()["other"] = topic
    with pytest.raises(TypeError):
        image.topics_by_id[topic.topic_id] = topic


def test_internal_topics_cannot_be_deleted_or_grown(tmp_path):
    controller = reopen(tmp_path)
    run(controller.create_topic(NewTopic("__consumer_offsets", 3,
                                         configs={"cleanup.policy": "compact"})))
    with pytest.raises(KafkaError) as deleted:
        run(controller.delete_topic("__consumer_offsets"))
    assert deleted.value.error == Errors.TOPIC_DELETION_DISABLED
    assert "__consumer_offsets" in deleted.value.message
    with pytest.raises(KafkaError) as grown:
        run(controller.create_partitions("__consumer_offsets", 6))
    assert grown.value.error == Errors.POLICY_VIOLATION
    with pytest.raises(KafkaError) as altered:
        run(controller.alter_topic_configs("__consumer_offsets", {"cleanup.policy": "delete"}))
    assert altered.value.error == Errors.INVALID_CONFIG
    assert reopen(tmp_path).image.topic("__consumer_offsets").num_partitions == 3


def test_policy_lives_in_the_controller(tmp_path):
    """What handlers used to check: name collisions, manual assignments, replication factors."""
    controller = reopen(tmp_path)
    run(controller.create_topic(NewTopic("a.b", 1)))

    def refused(wanted: NewTopic) -> KafkaError:
        with pytest.raises(KafkaError) as info:
            run(controller.create_topic(wanted))
        return info.value

    assert refused(NewTopic("a_b", 1)).error == Errors.INVALID_TOPIC_EXCEPTION
    assert refused(NewTopic("a.b", 1)).error == Errors.TOPIC_ALREADY_EXISTS
    assert refused(NewTopic("bad/name", 1)).error == Errors.INVALID_TOPIC_EXCEPTION
    assert refused(NewTopic("t", 1, 2)).error == Errors.INVALID_REPLICATION_FACTOR
    assert refused(NewTopic("t", 0)).error == Errors.INVALID_PARTITIONS
    assert refused(NewTopic("t", 1, -1, {0: [NODE]})).error == Errors.INVALID_REQUEST
    assert refused(NewTopic("t", assignments={0: [NODE], 2: [NODE]})).error == \
        Errors.INVALID_REPLICA_ASSIGNMENT
    assert refused(NewTopic("t", assignments={0: [NODE, NODE]})).error == \
        Errors.INVALID_REPLICA_ASSIGNMENT
    assert refused(NewTopic("t", assignments={0: [7]})).error == Errors.INVALID_REPLICA_ASSIGNMENT
    assert refused(NewTopic("t", 1, configs={"retention.ms": None})).error == \
        Errors.INVALID_CONFIG
    assert refused(NewTopic("t", 1, configs={"no.such.key": "1"})).error == Errors.INVALID_CONFIG
    manual = run(controller.create_topic(NewTopic("t", assignments={0: [NODE], 1: [NODE]})))
    assert manual.assignments == ((NODE,), (NODE,))
    checked = run(controller.create_topic(NewTopic("dry", 4), validate_only=True))
    assert checked.num_partitions == 4 and controller.image.topic("dry") is None


def test_a_fuzzed_partition_count_is_refused_before_any_work(tmp_path):
    controller = reopen(tmp_path)
    for count in (15_000_000, MAX_PARTITIONS + 1, 2**31 - 1):
        with pytest.raises(KafkaError) as refused:
            run(controller.create_topic(NewTopic("huge", count)))
        assert refused.value.error == Errors.POLICY_VIOLATION
        assert str(MAX_PARTITIONS) in refused.value.message
    run(controller.create_topic(NewTopic("small", 1)))
    with pytest.raises(KafkaError) as refused:
        run(controller.create_partitions("small", 15_000_000))
    assert refused.value.error == Errors.POLICY_VIOLATION
    assert reopen(tmp_path).image.topic("huge") is None
    assert reopen(tmp_path).image.topic("small").num_partitions == 1


def test_a_failed_store_write_changes_nothing(tmp_path):
    controller = reopen(tmp_path)
    run(controller.create_topic(NewTopic("kept", 1)))
    store_file = tmp_path / "kbroker-metadata.json"
    before = store_file.read_bytes()
    (tmp_path / "kbroker-metadata.json.tmp").mkdir()  # the atomic write cannot open its file
    with pytest.raises(KafkaError) as failed:
        run(controller.create_topic(NewTopic("lost", 1)))
    assert failed.value.error == Errors.KAFKA_STORAGE_ERROR
    assert controller.image.topic("lost") is None
    assert store_file.read_bytes() == before
    (tmp_path / "kbroker-metadata.json.tmp").rmdir()
    run(controller.create_topic(NewTopic("lost", 1)))  # the name is free: nothing half made
    assert set(reopen(tmp_path).image.topics()) == {"kept", "lost"}


class Recorder:
    """A listener that records every (old, new) it is given; while ``hold`` is set it keeps
    working (disk work, giving the loop a turn between steps)."""

    def __init__(self):
        self.applied = []
        self.hold = False

    def apply(self, old, new, delta):
        while self.hold:
            time.sleep(0.011)
            yield
        self.applied.append((old, new, delta))
        return {}


def test_listeners_reconcile_in_order_and_a_burst_in_one_go(tmp_path):
    controller = reopen(tmp_path)
    recorder = Recorder()
    controller.subscribe(recorder)
    start = controller.image

    async def burst():
        recorder.hold = True
        first = asyncio.create_task(controller.create_topic(NewTopic("t0", 1)))
        while controller.image.topic("t0") is None:  # published; its reconciliation is held
            await asyncio.sleep(0.001)
        rest = [asyncio.create_task(controller.create_topic(NewTopic(f"t{i}", 1)))
                for i in range(1, 5)]
        while len(controller.image.topics()) < 5:  # committed and published meanwhile
            await asyncio.sleep(0.001)
        recorder.hold = False
        await asyncio.gather(first, *rest)

    run(burst())
    assert [set(new.topics()) for _, new, _ in recorder.applied] == [
        {"t0"}, {f"t{i}" for i in range(5)}]
    assert recorder.applied[0][0] is start
    assert recorder.applied[1][0] is recorder.applied[0][1]
    assert recorder.applied[1][1] is controller.image
    # Each listener call carries the changes between its two images, merged (issue 34): the
    # second one the four creations published while the first was held.
    assert [set(delta.topic_names()) for _, _, delta in recorder.applied] == [
        {"t0"}, {f"t{i}" for i in range(1, 5)}]


def test_a_cancelled_request_does_not_stop_its_change(tmp_path):
    controller = reopen(tmp_path)

    async def cancel_midway():
        task = asyncio.create_task(controller.create_topic(NewTopic("kept", 2)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await controller.close()

    run(cancel_midway())
    assert controller.image.topic("kept") is not None
    assert reopen(tmp_path).image.topic("kept").num_partitions == 2
