"""The registry's state: subjects, versions, ids, configs and modes, replayed from ``_schemas``.

:class:`RegistryShard` is the coordinator shard of ``_schemas`` partition 0 (the topic has one
partition, as Confluent's). Its durable state changes only in :meth:`RegistryShard.replay`, so a
restart, a ``kill -9`` and a leadership move rebuild it the same way; the maps are timeline maps,
so a write that is not committed is undone by the runtime (kbroker.coordinator.runtime).

State (keys -> values):

- ``versions``: (subject, version) -> :class:`~kbroker.schema_registry.records.SchemaValue`
  (soft-deleted versions stay, with ``deleted``; hard-deleted ones are gone);
- ``subject_versions``: subject -> sorted tuple of its versions (soft-deleted included);
- ``id_users``: id -> frozenset of the (subject, version) that use it; an id with no user left
  is unknown again (Confluent answers 40403 for it), but never handed out again: ``max_id``
  only grows;
- ``id_of``: (schema type, canonical text, references) -> id: the same schema in any subject
  gets the same id;
- ``configs`` / ``modes``: subject (None: global) -> compatibility level / mode.

Parsed schemas and the rendered answer of ``GET /schemas/ids/{id}`` are cached by id outside the
durable state (an id's schema never changes).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.runtime import Shard
from kbroker.coordinator.timeline import TimelineValue
from kbroker.schema_registry import records
from kbroker.schema_registry.records import Key, SchemaValue

log = logging.getLogger("kbroker.schema_registry")


class RegistryShard(Shard):
    def __init__(self, runtime, partition_index: int, defaults):
        super().__init__(runtime, partition_index)
        self.defaults = defaults  # the broker's default compatibility level and mode
        self.versions = self.timeline_dict()
        self.subject_versions = self.timeline_dict()
        self.id_users = self.timeline_dict()
        self.id_of = self.timeline_dict()
        self.configs = self.timeline_dict()
        self.modes = self.timeline_dict()
        self.max_id = TimelineValue(self.timeline, 0)
        self.parsed_cache: dict[int, object] = {}
        # id -> (the entry it was rendered from, GET /schemas/ids/{id}'s body); an entry is
        # immutable, so a stale rendering is recognized by identity
        self.rendered: dict[int, tuple] = {}

    # --- replay --------------------------------------------------------------------------------

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        parsed = records.decode_key(key)
        if parsed is None:
            return
        try:
            self._apply(parsed, value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping an unreadable _schemas record at offset %d (%s: %s)", offset,
                        type(exc).__name__, exc)

    def _apply(self, key: Key, value: bytes | None) -> None:
        if key.keytype == records.SCHEMA:
            if value is None:
                self._remove_version(key.subject, key.version)
            else:
                self._put_version(SchemaValue.decode(value))
        elif key.keytype == records.CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = records.decode_json(value)["compatibilityLevel"]
        elif key.keytype == records.MODE:
            if value is None:
                self.modes.pop(key.subject, None)
            else:
                self.modes[key.subject] = records.decode_json(value)["mode"]
        elif key.keytype == records.DELETE_SUBJECT and value is not None:
            up_to = int(records.decode_json(value)["version"])
            for version in self.subject_versions.get(key.subject, ()):
                entry = self.versions[(key.subject, version)]
                if version <= up_to and not entry.deleted:
                    self.versions[(key.subject, version)] = _deleted(entry)
        elif key.keytype == records.CLEAR_SUBJECT and value is not None:
            for version in self.subject_versions.get(key.subject, ()):
                self._remove_version(key.subject, version)

    def _put_version(self, entry: SchemaValue) -> None:
        at = (entry.subject, entry.version)
        previous = self.versions.get(at)
        if previous is not None and previous.id != entry.id:
            self._drop_user(previous, at)
        self.versions[at] = entry
        known = self.subject_versions.get(entry.subject, ())
        if entry.version not in known:
            self.subject_versions[entry.subject] = tuple(sorted(known + (entry.version,)))
        self.id_users[entry.id] = self.id_users.get(entry.id, frozenset()) | {at}
        self.id_of.setdefault(identity(entry), entry.id)
        if entry.id > self.max_id.get():
            self.max_id.set(entry.id)

    def _remove_version(self, subject: str, version: int) -> None:
        entry = self.versions.pop((subject, version), None)
        if entry is None:
            return
        left = tuple(v for v in self.subject_versions.get(subject, ()) if v != version)
        if left:
            self.subject_versions[subject] = left
        else:
            self.subject_versions.pop(subject, None)
        self._drop_user(entry, (subject, version))

    def _drop_user(self, entry: SchemaValue, at: tuple) -> None:
        """``at`` no longer uses ``entry``'s id; the id is unknown once nothing uses it."""
        users = self.id_users.get(entry.id, frozenset()) - {at}
        if users:
            self.id_users[entry.id] = users
            return
        self.id_users.pop(entry.id, None)
        if self.id_of.get(identity(entry)) == entry.id:
            self.id_of.pop(identity(entry))

    def durable_state(self):
        return (dict(self.versions), dict(self.configs), dict(self.modes), self.max_id.get())

    # --- queries -------------------------------------------------------------------------------

    def schema_by_id(self, schema_id: int) -> SchemaValue | None:
        """One version that uses ``schema_id`` (the schema, type and references are the id's)."""
        users = self.id_users.get(schema_id)
        if not users:
            return None
        return self.versions[min(users)]

    def subject_entries(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, ascending; soft-deleted ones only with ``deleted``."""
        out = []
        for version in self.subject_versions.get(subject, ()):
            entry = self.versions[(subject, version)]
            if deleted or not entry.deleted:
                out.append(entry)
        return out

    def subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subject_versions if self.subject_entries(s, deleted))

    def compatibility(self, subject: str | None) -> str:
        level = self.configs.get(subject) if subject is not None else None
        if level is None:
            level = self.configs.get(None)
        return level or self.defaults.compatibility

    def mode(self, subject: str | None) -> str:
        mode = self.modes.get(subject) if subject is not None else None
        if mode is None:
            mode = self.modes.get(None)
        return mode or self.defaults.mode

    def referenced_by(self, subject: str, version: int, deleted: bool = False) -> list[int]:
        """Ids of the schemas that reference (subject, version)."""
        found = set()
        for entry in self.versions.values():
            if entry.deleted and not deleted:
                continue
            if any(r.subject == subject and r.version == version for r in entry.references):
                found.add(entry.id)
        return sorted(found)


def identity(entry: SchemaValue) -> tuple:
    """What makes two registrations the same schema (the same id)."""
    return (entry.schema_type, entry.schema, entry.references)


def _deleted(entry: SchemaValue) -> SchemaValue:
    return SchemaValue(entry.subject, entry.version, entry.id, entry.schema, entry.schema_type,
                       entry.references, True)
