"""The group interface (kbroker/coordinator/group/types.py): the registry of group types agrees with
each type's records and modules, every group class implements the interface, and the shard's one
id-collision rule answers Kafka's error for every pair of types."""

from __future__ import annotations

import importlib

import pytest

from kbroker.coordinator.group import admin
from kbroker.coordinator.group import records as classic_records
from kbroker.coordinator.group.consumer.group import ConsumerGroup
from kbroker.coordinator.group.share.group import ShareGroup
from kbroker.coordinator.group.state import ClassicGroup
from kbroker.coordinator.group.streams.group import StreamsGroup
from kbroker.coordinator.group.registry import BY_NAME, BY_RECORD_TYPE, GROUP_TYPES
from kbroker.coordinator.group.types import Group
from kbroker.protocol.errors import Errors, KafkaError
from tests.coordinator.consumer_fakes import make_consumer_shard

CLASSES = {"classic": ClassicGroup, "consumer": ConsumerGroup, "streams": StreamsGroup,
           "share": ShareGroup}


@pytest.mark.parametrize("name", ["consumer", "streams", "share"])
def test_registry_owns_exactly_the_records_of_each_type(name):
    records = importlib.import_module(f"kbroker.coordinator.group.{name}.records")
    assert BY_NAME[name].record_types == frozenset(records.KEYS)
    assert all(BY_RECORD_TYPE[t] is BY_NAME[name] for t in records.KEYS)


def test_classic_type_owns_the_group_metadata_record_and_offsets_are_no_type():
    assert BY_RECORD_TYPE[classic_records.GROUP_METADATA_TYPE] is BY_NAME["classic"]
    assert classic_records.OFFSET_COMMIT_TYPE not in BY_RECORD_TYPE


@pytest.mark.parametrize("group_type", GROUP_TYPES, ids=lambda t: t.name)
def test_every_type_has_its_modules_and_a_class_implementing_group(group_type):
    assert callable(group_type.replay().replay)
    assert callable(group_type.membership().on_loaded)
    assert callable(group_type.membership().on_unloaded)
    cls = CLASSES[group_type.name]
    assert cls.group_type == group_type.name
    for name in ("list_entry", "delete_error", "tombstones", "guarded_topics",
                 "expired_offsets", "expires_with_offsets", "durable_view",
                 "validate_offset_fetch"):
        assert callable(getattr(cls, name)), (cls, name)
    assert {"state", "list_entry", "durable_view"} <= set(dir(Group))


def _shard_with_one_group_of_each_type():
    shard = make_consumer_shard()
    shard.add_group("classic-g")  # a classic group's live object, as a commit installs it
    for name, cls in (("consumer", ConsumerGroup), ("streams", StreamsGroup),
                      ("share", ShareGroup)):
        shard.groups[f"{name}-g"] = cls(f"{name}-g")  # what replaying its records makes
    return shard


def test_the_collision_rule_answers_kafkas_error_for_every_pair():
    shard = _shard_with_one_group_of_each_type()
    for held in CLASSES:
        for asked in CLASSES:
            group_id = f"{held}-g"
            if held == asked:
                assert shard.group_of_type(group_id, asked) is shard.groups[group_id]
                continue
            with pytest.raises(KafkaError) as raised:
                shard.group_of_type(group_id, asked)
            assert raised.value.error is Errors.GROUP_ID_NOT_FOUND
            assert raised.value.message == f"Group {group_id} is not a {asked} group."
        assert shard.group_of_type("nobody", held) is None
    shard.runtime.unload(0)


def test_one_map_lists_every_type_and_only_durable_groups_have_a_durable_view():
    shard = _shard_with_one_group_of_each_type()
    listed = sorted(admin.list_groups(shard, None))
    assert listed == [("classic-g", "", "Empty", "classic"),
                      ("consumer-g", "consumer", "Empty", "consumer"),
                      ("share-g", "share", "Empty", "share"),
                      ("streams-g", "streams", "Empty", "streams")]
    assert admin.list_groups(shard, None, {"share"}) == [("share-g", "share", "Empty", "share")]
    assert set(shard.durable_state()[3]) == {"consumer-g", "streams-g", "share-g"}
    shard.runtime.unload(0)
    assert set(shard.groups) == {"consumer-g", "streams-g", "share-g"}  # live state went
