"""The records of the ``_schemas`` topic, in Confluent Schema Registry's format.

Keys and values are JSON (Confluent's Jackson serializer), keys compacted on. Each key carries
``keytype`` and ``magic`` (1 for SCHEMA keys, 0 for the others); ``subject`` is absent for the
global CONFIG and MODE keys::

    {"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}
        -> {"subject":"orders-value","version":1,"id":1,"schemaType":"AVRO",
            "references":[{"name":..,"subject":..,"version":..}],   (only when there are some)
            "schema":"<canonical text>","deleted":false}
           ``deleted: true`` is a soft-deleted version; a tombstone (null) a hard-deleted one.
    {"keytype":"CONFIG","subject":"orders-value","magic":0} -> {"subject":..,"compatibilityLevel":"FULL"}
    {"keytype":"MODE","magic":0}                             -> {"mode":"READONLY"}
           a tombstone removes a subject's config or mode.
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0} -> {"subject":"s","version":3}
           soft-deletes every version of ``s`` up to 3 (Confluent writes no per-version record).
    {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}  -> {"subject":"s"}
    {"keytype":"NOOP","magic":0}                          -> null   (a leader's first write)

Records a newer Confluent writes that kbroker does not serve (CONTEXT, ASSOC) are skipped on replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


SCHEMA, CONFIG, MODE = "SCHEMA", "CONFIG", "MODE"
DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP"


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        out: dict = {"keytype": self.keytype}
        if self.subject is not None:
            out["subject"] = self.subject
        if self.keytype == SCHEMA:
            out["version"] = self.version
        out["magic"] = 1 if self.keytype == SCHEMA else 0
        return _dump(out)


def decode_key(raw: bytes) -> Key | None:
    """The key, or None for a key type kbroker does not serve (or not JSON at all)."""
    try:
        data = json.loads(raw)
        keytype = data["keytype"]
    except (ValueError, KeyError, TypeError):
        return None
    if keytype not in (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP):
        return None
    version = data.get("version") if keytype == SCHEMA else None
    return Key(keytype, data.get("subject"), version)


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def encode(self) -> bytes:
        out: dict = {"subject": self.subject, "version": self.version, "id": self.id,
                     "schemaType": self.schema_type}
        if self.references:
            out["references"] = [ref.as_json() for ref in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return _dump(out)

    @classmethod
    def decode(cls, raw: bytes) -> "SchemaValue":
        data = json.loads(raw)
        refs = tuple(Reference(r["name"], r["subject"], int(r["version"]))
                     for r in data.get("references") or ())
        return cls(data["subject"], int(data["version"]), int(data["id"]), data["schema"],
                   data.get("schemaType") or "AVRO", refs, bool(data.get("deleted", False)))


def config_value(subject: str | None, level: str) -> bytes:
    out = {"subject": subject} if subject is not None else {}
    out["compatibilityLevel"] = level
    return _dump(out)


def mode_value(subject: str | None, mode: str) -> bytes:
    out = {"subject": subject} if subject is not None else {}
    out["mode"] = mode
    return _dump(out)


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def clear_subject_value(subject: str) -> bytes:
    return _dump({"subject": subject})


def decode_json(raw: bytes) -> dict:
    return json.loads(raw)


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
