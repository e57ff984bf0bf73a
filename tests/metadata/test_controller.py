"""The controller over the local store, in process: changes persist, images never change."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from kbroker.metadata.controller import MAX_PARTITIONS, Controller
from kbroker.metadata.local_store import LocalMetadataStore
from kbroker.protocol.errors import Errors, KafkaError

NODE = 1


def reopen(path) -> Controller:
    return Controller(LocalMetadataStore(str(path), node_id=NODE), NODE)


def test_create_alter_delete_are_persisted(tmp_path):
    controller = reopen(tmp_path)
    topic = asyncio.run(controller.create_topic_async("orders", 3, {"retention.ms": "1000"}))
    assert reopen(tmp_path).image.topic("orders").topic_id == topic.topic_id
    assert reopen(tmp_path).image.topic("orders").assignments == ((NODE,),) * 3

    asyncio.run(controller.alter_topic_configs("orders", {"retention.ms": "2000"}))
    assert dict(reopen(tmp_path).image.topic("orders").configs) == {"retention.ms": "2000"}

    asyncio.run(controller.create_partitions("orders", 5))
    again = reopen(tmp_path).image.topic("orders")
    assert again.num_partitions == 5 and dict(again.configs) == {"retention.ms": "2000"}

    asyncio.run(controller.alter_broker_configs({"log.retention.ms": "5000"},
                                            cluster_default=True))
    assert reopen(tmp_path).image.broker_configs(cluster_default=True) == {
        "log.retention.ms": "5000"}

    asyncio.run(controller.delete_topic("orders"))
    assert reopen(tmp_path).image.topic("orders") is None


def test_a_readers_image_does_not_change(tmp_path):
    controller = reopen(tmp_path)
    controller.create_topic("a", 1, {})
    kept = controller.image
    controller.create_topic("b", 2, {})
    asyncio.run(controller.alter_topic_configs("a", {"cleanup.policy": "compact"}))
    asyncio.run(controller.delete_topic("a"))
    assert set(kept.topics()) == {"a"}
    assert dict(kept.topic("a").configs) == {}
    assert set(controller.image.topics()) == {"b"}
    assert kept.topic_by_id(controller.image.topic("b").topic_id) is None


def test_images_and_topics_are_immutable(tmp_path):
    controller = reopen(tmp_path)
    topic = controller.create_topic("frozen", 2, {"retention.ms": "1"})
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
    controller.create_topic("__consumer_offsets", 3, {"cleanup.policy": "compact"})
    with pytest.raises(KafkaError) as deleted:
        asyncio.run(controller.delete_topic("__consumer_offsets"))
    assert deleted.value.error == Errors.TOPIC_DELETION_DISABLED
    assert "__consumer_offsets" in deleted.value.message
    with pytest.raises(KafkaError) as grown:
        asyncio.run(controller.create_partitions("__consumer_offsets", 6))
    assert grown.value.error == Errors.POLICY_VIOLATION
    with pytest.raises(KafkaError) as altered:
        asyncio.run(controller.alter_topic_configs("__consumer_offsets",
                                                   {"cleanup.policy": "delete"}))
    assert altered.value.error == Errors.INVALID_CONFIG
    assert reopen(tmp_path).image.topic("__consumer_offsets").num_partitions == 3


def test_a_fuzzed_partition_count_is_refused_before_any_work(tmp_path):
    controller = reopen(tmp_path)
    for count in (15_000_000, MAX_PARTITIONS + 1, 2**31 - 1):
        with pytest.raises(KafkaError) as refused:
            asyncio.run(controller.create_topic_async("huge", count, {}))
        assert refused.value.error == Errors.POLICY_VIOLATION
        assert str(MAX_PARTITIONS) in refused.value.message
    controller.create_topic("small", 1, {})
    with pytest.raises(KafkaError) as refused:
        asyncio.run(controller.create_partitions("small", 15_000_000))
    assert refused.value.error == Errors.POLICY_VIOLATION
    assert reopen(tmp_path).image.topic("huge") is None
    assert reopen(tmp_path).image.topic("small").num_partitions == 1


def test_a_failed_store_write_changes_nothing(tmp_path):
    controller = reopen(tmp_path)
    controller.create_topic("kept", 1, {})
    store_file = tmp_path / "kbroker-metadata.json"
    before = store_file.read_bytes()
    (tmp_path / "kbroker-metadata.json.tmp").mkdir()  # the atomic write cannot open its file
    with pytest.raises(KafkaError) as failed:
        controller.create_topic("lost", 1, {})
    assert failed.value.error == Errors.KAFKA_STORAGE_ERROR
    assert controller.image.topic("lost") is None
    assert store_file.read_bytes() == before
    (tmp_path / "kbroker-metadata.json.tmp").rmdir()
    controller.create_topic("lost", 1, {})  # the name is free: nothing was half made
    assert set(reopen(tmp_path).image.topics()) == {"kept", "lost"}
