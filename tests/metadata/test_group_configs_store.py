"""Group configs (KIP-848, the GROUP resource) as metadata on a single node: committed through
the controller into the store's file, kept across restarts, removed when empty; the side file
they were kept in before (``group-configs.json``) is imported once and deleted."""

from __future__ import annotations

import asyncio
import json

import pytest

from kbroker.metadata.controller import Controller
from kbroker.metadata.local_store import FILE_NAME, OLD_GROUP_CONFIGS, LocalMetadataStore
from kbroker.protocol.errors import Errors, KafkaError

NODE = 1


def reopen(path) -> Controller:
    store = LocalMetadataStore(str(path), node_id=NODE)
    return Controller(store, NODE, asyncio.run(store.load()))


def setter(values):
    return lambda current: {**current, **values}


def test_group_configs_are_persisted_and_removed_when_empty(tmp_path):
    controller = reopen(tmp_path)
    asyncio.run(controller.alter_group_configs("g1", setter({"consumer.heartbeat.interval.ms":
                                                             700})))
    assert dict(controller.image.group_config("g1")) == {"consumer.heartbeat.interval.ms": "700"}
    assert dict(reopen(tmp_path).image.group_config("g1")) == {
        "consumer.heartbeat.interval.ms": "700"}
    stored = json.loads((tmp_path / FILE_NAME).read_text())
    assert stored["group_configs"] == {"g1": {"consumer.heartbeat.interval.ms": "700"}}

    # validate_only and a decision that raises change nothing.
    asyncio.run(controller.alter_group_configs("g1", setter({"consumer.heartbeat.interval.ms":
                                                             900}), validate_only=True))

    def refuse(current):
        raise KafkaError(Errors.INVALID_CONFIG, "no")
    with pytest.raises(KafkaError):
        asyncio.run(controller.alter_group_configs("g1", refuse))
    assert dict(reopen(tmp_path).image.group_config("g1")) == {
        "consumer.heartbeat.interval.ms": "700"}

    asyncio.run(controller.alter_group_configs("g1", lambda current: {}))
    assert "g1" not in reopen(tmp_path).image.group_configs
    assert json.loads((tmp_path / FILE_NAME).read_text())["group_configs"] == {}


def test_the_old_side_file_is_imported_once(tmp_path):
    reopen(tmp_path)  # a data dir made before group configs were metadata
    (tmp_path / OLD_GROUP_CONFIGS).write_text(json.dumps(
        {"old": {"consumer.session.timeout.ms": 50000}, "empty": {}}))
    image = reopen(tmp_path).image
    assert dict(image.group_config("old")) == {"consumer.session.timeout.ms": "50000"}
    assert "empty" not in image.group_configs
    assert not (tmp_path / OLD_GROUP_CONFIGS).exists()
    assert dict(reopen(tmp_path).image.group_config("old")) == {
        "consumer.session.timeout.ms": "50000"}


def test_a_stored_group_keeps_its_configs_over_the_old_file(tmp_path):
    controller = reopen(tmp_path)
    asyncio.run(controller.alter_group_configs("g", setter({"consumer.session.timeout.ms":
                                                            46000})))
    (tmp_path / OLD_GROUP_CONFIGS).write_text(json.dumps(
        {"g": {"consumer.session.timeout.ms": 50000}}))
    assert dict(reopen(tmp_path).image.group_config("g")) == {
        "consumer.session.timeout.ms": "46000"}


def test_an_unreadable_old_file_is_left_alone(tmp_path, caplog):
    (tmp_path / OLD_GROUP_CONFIGS).write_text("{not json")
    image = reopen(tmp_path).image
    assert dict(image.group_configs) == {}
    assert (tmp_path / OLD_GROUP_CONFIGS).exists()
    assert len([r for r in caplog.records if OLD_GROUP_CONFIGS in r.getMessage()]) == 1
