"""The registry's operations on its shard: each validates against the state, then returns the
records to write and the answer (``CoordinatorResult``), or raises a RegistryError. State changes
only when the records are replayed (kbroker.schema_registry.store), after the runtime appended
them; a request that fails changes nothing.

The rules are Confluent's ``KafkaSchemaRegistry``: register returns the existing version when the
subject already holds the same schema; the same schema in another subject reuses its id; a new
version is one more than the highest ever (soft-deleted included); ids come from the highest id
ever replayed plus one, so they never repeat. Soft deletes keep the versions (``deleted``), a
permanent delete needs a soft delete first and writes tombstones.
"""

from __future__ import annotations

from kbroker.coordinator.runtime import CoordinatorResult
from kbroker.schema_registry import compatibility, errors, records
from kbroker.schema_registry.formats import InvalidSchema, parse
from kbroker.schema_registry.records import Key, Reference, SchemaValue
from kbroker.schema_registry.store import RegistryShard, identity

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
CONTEXT = "."


# --- schemas ----------------------------------------------------------------------------------

class Candidate:
    """A schema from a request, parsed with its references resolved."""

    def __init__(self, schema_type: str, parsed, references: tuple[Reference, ...]):
        self.schema_type = schema_type
        self.parsed = parsed
        self.references = references

    @property
    def text(self) -> str:
        return self.parsed.canonical()

    def identity(self) -> tuple:
        return (self.schema_type, self.text, self.references)


def read_request(body) -> tuple[str, str, tuple[Reference, ...]]:
    """(schema type, schema text, references) of a register/lookup/compatibility body."""
    if not isinstance(body, dict):
        raise errors.bad_request("The request body must be a JSON object")
    text = body.get("schema")
    if not isinstance(text, str) or not text:
        raise errors.invalid_schema("Empty schema")
    schema_type = (body.get("schemaType") or "AVRO").upper()
    refs = []
    for raw in body.get("references") or ():
        try:
            refs.append(Reference(str(raw["name"]), str(raw["subject"]), int(raw["version"])))
        except (KeyError, TypeError, ValueError):
            raise errors.invalid_schema(f"Invalid schema reference {raw}") from None
    return schema_type, text, tuple(refs)


def candidate(shard: RegistryShard, schema_type: str, text: str,
              refs: tuple[Reference, ...], normalize: bool = False) -> Candidate:
    """Parse a request's schema (42201 when its format refuses it or a reference is unknown)."""
    resolved: dict[str, str] = {}
    pinned = []
    for ref in refs:
        target = _reference_target(shard, ref)
        if target is None:
            raise errors.invalid_schema(
                f"Invalid schema {text} with refs {[r.as_json() for r in refs]} of type "
                f"{schema_type}, details: No schema reference found for subject "
                f"\"{ref.subject}\" and version {ref.version}")
        _resolve(shard, target, ref.name, resolved, set())
        pinned.append(Reference(ref.name, ref.subject, target.version))
    try:
        parsed = parse(schema_type, text, resolved)
        if normalize:
            parsed = parsed.normalized()
    except InvalidSchema as exc:
        raise errors.invalid_schema(str(exc) or f"Invalid schema {text}") from None
    except ImportError as exc:  # a format whose library is not installed
        raise errors.invalid_schema(f"Invalid schema type {schema_type}: {exc}") from None
    if normalize:
        pinned.sort(key=lambda r: (r.name, r.subject, r.version))
    return Candidate(schema_type, parsed, tuple(pinned))


def _reference_target(shard: RegistryShard, ref: Reference) -> SchemaValue | None:
    if ref.version == -1:
        live = shard.subject_entries(ref.subject)
        return live[-1] if live else None
    return shard.versions.get((ref.subject, ref.version))


def _resolve(shard, entry: SchemaValue, name: str, out: dict, seen: set) -> None:
    """Texts of ``entry`` and everything it references, dependencies first."""
    if (entry.subject, entry.version) in seen:
        return
    seen.add((entry.subject, entry.version))
    for ref in entry.references:
        target = shard.versions.get((ref.subject, ref.version))
        if target is not None:
            _resolve(shard, target, ref.name, out, seen)
    out.setdefault(name, entry.schema)


def parsed_of(shard: RegistryShard, entry: SchemaValue):
    """The parsed schema of a stored version (cached by id)."""
    cached = shard.parsed_cache.get(entry.id)
    if cached is None:
        resolved: dict[str, str] = {}
        for ref in entry.references:
            target = shard.versions.get((ref.subject, ref.version))
            if target is not None:
                _resolve(shard, target, ref.name, resolved, set())
        cached = parse(entry.schema_type, entry.schema, resolved)
        shard.parsed_cache[entry.id] = cached
    return cached


# --- register ---------------------------------------------------------------------------------

def register(subject: str, body: dict, normalize: bool):
    def op(shard: RegistryShard) -> CoordinatorResult:
        schema_type, text, refs = read_request(body)
        wanted_id = _optional_int(body.get("id"), "id")
        wanted_version = _optional_int(body.get("version"), "version")
        mode = shard.mode(subject)
        _check_writable(subject, mode)
        importing = mode == "IMPORT"
        if wanted_id is not None and wanted_id >= 0 and not importing:
            raise errors.not_permitted(f"Subject {subject} is not in import mode")
        normalize_now = normalize or shard.defaults.normalize
        new = candidate(shard, schema_type, text, refs, normalize_now)
        live = shard.subject_entries(subject)
        every = shard.subject_entries(subject, deleted=True)
        existing_id = shard.id_of.get(new.identity())
        if wanted_id is not None and wanted_id >= 0:
            taken = shard.schema_by_id(wanted_id)
            if taken is not None and identity(taken) != new.identity():
                raise errors.id_does_not_match(
                    f"Schema already registered with id {wanted_id} instead of input id "
                    f"{existing_id if existing_id is not None else wanted_id}")
            if existing_id is not None and existing_id != wanted_id:
                raise errors.id_does_not_match(
                    f"Schema already registered with id {existing_id} instead of input id "
                    f"{wanted_id}")
            existing_id = wanted_id
        if not wanted_version:
            for entry in reversed(live):
                if existing_id is not None and entry.id == existing_id:
                    return CoordinatorResult([], {"id": entry.id})
        if not importing:
            level = shard.compatibility(subject)
            previous = [(e.version, parsed_of(shard, e)) for e in live]
            problems = compatibility.check(level, new.parsed, previous)
            if problems:
                raise errors.incompatible(subject, problems)
        next_version = (every[-1].version + 1) if every else 1
        version = next_version
        if wanted_version:
            if wanted_version != next_version and not importing:
                raise errors.invalid_schema("Version is not one more than previous version")
            version = wanted_version
        schema_id = existing_id if existing_id is not None else shard.max_id.get() + 1
        out = []
        for entry in every:  # Confluent tombstones soft-deleted older versions of the same id
            if entry.deleted and entry.id == schema_id and entry.version < version and \
                    not shard.referenced_by(subject, entry.version, deleted=True):
                out.append((Key(records.SCHEMA, subject, entry.version).encode(), None))
        value = SchemaValue(subject, version, schema_id, new.text, new.schema_type,
                            new.references)
        out.append((Key(records.SCHEMA, subject, version).encode(), value.encode()))
        shard.parsed_cache.setdefault(schema_id, new.parsed)
        return CoordinatorResult(out, {"id": schema_id})
    return op


def _check_writable(subject: str | None, mode: str) -> None:
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        raise errors.not_permitted(f"Subject {subject} in context {CONTEXT} is in read-only mode")


def _optional_int(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.bad_request(f"{name} must be an integer")
    return value


# --- lookups (no records) ---------------------------------------------------------------------

def lookup(shard: RegistryShard, subject: str, body: dict, normalize: bool,
           deleted: bool) -> SchemaValue:
    schema_type, text, refs = read_request(body)
    entries = shard.subject_entries(subject, deleted=deleted)
    if not entries and not shard.subject_entries(subject, deleted=True):
        raise errors.subject_not_found(subject)
    new = candidate(shard, schema_type, text, refs, normalize or shard.defaults.normalize)
    for entry in reversed(entries):
        if identity(entry) == new.identity():
            return entry
    raise errors.schema_not_found()


def find_version(shard: RegistryShard, subject: str, version_text: str,
                 deleted: bool = False) -> SchemaValue:
    """``subject``'s version named ``version_text`` ("latest", -1 or a number)."""
    version = parse_version(version_text)
    every = shard.subject_entries(subject, deleted=True)
    if not every:
        raise errors.subject_not_found(subject)
    if version == -1:
        live = shard.subject_entries(subject, deleted=deleted)
        if not live:
            raise errors.subject_not_found(subject)
        return live[-1]
    entry = shard.versions.get((subject, version))
    if entry is None or (entry.deleted and not deleted):
        raise errors.version_not_found(version)
    return entry


def parse_version(text: str) -> int:
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == -1:
        return -1
    if version < 1 or version > 2**31 - 1:
        raise errors.invalid_version(text)
    return version


def check_compatibility(shard: RegistryShard, subject: str, version_text: str | None, body,
                        normalize: bool) -> list[str]:
    schema_type, text, refs = read_request(body)
    new = candidate(shard, schema_type, text, refs, normalize or shard.defaults.normalize)
    level = shard.compatibility(subject)
    if version_text is None:
        previous = [(e.version, parsed_of(shard, e)) for e in shard.subject_entries(subject)]
        return compatibility.check(level, new.parsed, previous)
    try:
        old = find_version(shard, subject, version_text)
    except errors.RegistryError as exc:
        if exc.code == 40401 and version_text in ("latest", "-1"):
            return []  # nothing registered yet: anything is compatible
        raise
    pair = [(old.version, parsed_of(shard, old))]
    return compatibility.check(level.removesuffix("_TRANSITIVE"), new.parsed, pair)


# --- deletes ----------------------------------------------------------------------------------

def delete_version(subject: str, version_text: str, permanent: bool):
    def op(shard: RegistryShard) -> CoordinatorResult:
        _check_writable(subject, shard.mode(subject))
        # Confluent: "latest" is the latest version not soft-deleted; a number may name a
        # soft-deleted version (40406 for a second soft delete, the permanent delete's target).
        latest = parse_version(version_text) == -1
        entry = find_version(shard, subject, version_text, deleted=not latest)
        key = Key(records.SCHEMA, subject, entry.version)
        if shard.referenced_by(subject, entry.version, deleted=permanent):
            raise errors.reference_exists(_key_text(key))
        if permanent:
            if not entry.deleted:
                raise errors.version_not_soft_deleted(subject, entry.version)
            out = [(key.encode(), None)]
            if len(shard.subject_entries(subject, deleted=True)) == 1:
                out += _forget_subject_settings(shard, subject)
            return CoordinatorResult(out, entry.version)
        if entry.deleted:
            raise errors.version_soft_deleted(subject, entry.version)
        value = SchemaValue(entry.subject, entry.version, entry.id, entry.schema,
                            entry.schema_type, entry.references, True)
        return CoordinatorResult([(key.encode(), value.encode())], entry.version)
    return op


def delete_subject(subject: str, permanent: bool):
    def op(shard: RegistryShard) -> CoordinatorResult:
        _check_writable(subject, shard.mode(subject))
        every = shard.subject_entries(subject, deleted=True)
        live = shard.subject_entries(subject)
        if not every:
            raise errors.subject_not_found(subject)
        if not permanent and not live:
            raise errors.subject_soft_deleted(subject)
        if permanent and live:
            raise errors.subject_not_soft_deleted(subject)
        targets = every if permanent else live
        for entry in targets:
            users = {s for s, _ in _referrers(shard, subject, entry.version, permanent)}
            if users - {subject}:
                raise errors.reference_exists(_key_text(Key(records.SCHEMA, subject,
                                                            entry.version)))
        versions = [e.version for e in targets]
        if not permanent:
            out = [(Key(records.DELETE_SUBJECT, subject).encode(),
                    records.delete_subject_value(subject, versions[-1]))]
        else:
            out = [(Key(records.SCHEMA, subject, v).encode(), None) for v in reversed(versions)]
            out += _forget_subject_settings(shard, subject)
        return CoordinatorResult(out, versions)
    return op


def _referrers(shard, subject: str, version: int, deleted: bool) -> list[tuple[str, int]]:
    return [(e.subject, e.version) for e in shard.versions.values()
            if (deleted or not e.deleted)
            and any(r.subject == subject and r.version == version for r in e.references)]


def _forget_subject_settings(shard, subject: str) -> list:
    out = []
    if subject in shard.modes:
        out.append((Key(records.MODE, subject).encode(), None))
    if subject in shard.configs:
        out.append((Key(records.CONFIG, subject).encode(), None))
    return out


def _key_text(key: Key) -> str:
    return (f"{{magic=1,keytype={key.keytype},subject={key.subject},"
            f"version={key.version}}}")


# --- config and mode --------------------------------------------------------------------------

def set_config(subject: str | None, body):
    def op(shard: RegistryShard) -> CoordinatorResult:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in compatibility.LEVELS:
            raise errors.invalid_compatibility(level)
        level = level.upper()
        value = records.config_value(subject, level)
        return CoordinatorResult([(Key(records.CONFIG, subject).encode(), value)],
                                 {"compatibility": level})
    return op


def delete_config(subject: str | None):
    def op(shard: RegistryShard) -> CoordinatorResult:
        if subject is not None:
            if not shard.subject_entries(subject, deleted=True) and subject not in shard.configs:
                raise errors.subject_not_found(subject)
            if subject not in shard.configs:
                raise errors.subject_compatibility_not_configured(subject)
        old = shard.configs.get(subject) or shard.defaults.compatibility
        return CoordinatorResult([(Key(records.CONFIG, subject).encode(), None)],
                                 {"compatibilityLevel": old})
    return op


def set_mode(subject: str | None, body, force: bool):
    def op(shard: RegistryShard) -> CoordinatorResult:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has = shard.subject_entries(subject, True) if subject is not None \
                else shard.subjects(True)
            if has and shard.mode(subject) != "IMPORT":
                raise errors.not_permitted("Cannot import since found existing subjects")
        value = records.mode_value(subject, mode)
        return CoordinatorResult([(Key(records.MODE, subject).encode(), value)], {"mode": mode})
    return op


def delete_mode(subject: str):
    def op(shard: RegistryShard) -> CoordinatorResult:
        if subject not in shard.modes:
            if not shard.subject_entries(subject, deleted=True):
                raise errors.subject_not_found(subject)
            raise errors.subject_mode_not_configured(subject)
        old = shard.modes[subject]
        return CoordinatorResult([(Key(records.MODE, subject).encode(), None)], {"mode": old})
    return op
