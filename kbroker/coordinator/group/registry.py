"""The registry of group types: which records each type owns, and its replay and membership
modules (what they provide: :mod:`kbroker.coordinator.group.types`). The shard replays a record
through the type that owns its record type, and loads and unloads each group through its type's
membership module. Modules are imported on first use, so a shard holding only classic groups and
offsets never imports the other types' packages. A new group type is one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from kbroker.coordinator.group.records import GROUP_METADATA_TYPE


@dataclass(frozen=True)
class GroupType:
    name: str
    record_types: frozenset[int]
    replay_module: str
    membership_module: str

    def replay(self) -> ModuleType:
        return importlib.import_module(self.replay_module)

    def membership(self) -> ModuleType:
        return importlib.import_module(self.membership_module)


_G = "kbroker.coordinator.group"

# The group types, one line each: name, the record types it owns (Kafka's numbers), its replay
# and membership modules.
GROUP_TYPES = (
    GroupType("classic", frozenset({GROUP_METADATA_TYPE}), f"{_G}.classic", f"{_G}.classic"),
    GroupType("consumer", frozenset({3, 4, 5, 6, 7, 8, 16}), f"{_G}.consumer.replay",
              f"{_G}.consumer.membership"),
    GroupType("share", frozenset({10, 11, 12, 13, 14, 15}), f"{_G}.share.replay",
              f"{_G}.share.membership"),
    GroupType("streams", frozenset({17, 19, 20, 21, 22, 23}), f"{_G}.streams.replay",
              f"{_G}.streams.membership"),
)
BY_NAME = {t.name: t for t in GROUP_TYPES}
BY_RECORD_TYPE = {record_type: t for t in GROUP_TYPES for record_type in t.record_types}
if len(BY_NAME) != len(GROUP_TYPES) or \
        len(BY_RECORD_TYPE) != sum(len(t.record_types) for t in GROUP_TYPES):
    raise ImportError("two group types share a name or a record type")
