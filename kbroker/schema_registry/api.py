"""The REST API: Confluent Schema Registry's routes, each a small function over the shard.

A route is declared once with :func:`route` (method, path pattern, what it needs from ACLs); the
dispatcher in kbroker.schema_registry.service matches it, authenticates and authorizes the
caller, and runs it where the state is. Reads run on the shard at once; writes hand an operation
(kbroker.schema_registry.operations) to the coordinator runtime and answer once its records are
committed. Answers are Confluent's JSON entities; AVRO is the default ``schemaType`` and, as in
Confluent's entities, is left out of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Awaitable, Callable

from kbroker.schema_registry import errors, operations as ops
from kbroker.schema_registry.formats import FORMATS
from kbroker.schema_registry.http import Request, Response
from kbroker.schema_registry.records import ConfigValue, SchemaValue

ACCEPTED_BODY_TYPES = ("application/vnd.schemaregistry.v1+json",
                       "application/vnd.schemaregistry+json", "application/json",
                       "application/octet-stream")


@dataclass
class Call:
    request: Request
    params: dict[str, str]
    registry: object  # kbroker.schema_registry.service.SchemaRegistry
    principal: object = None  # who authenticated (kbroker.schema_registry.security)

    _shard: object = None

    @property
    def shard(self):
        """The registry's state where this request runs (NotHere: forward it)."""
        if self._shard is None:
            self._shard = self.registry.local_shard()
        return self._shard

    def flag(self, name: str) -> bool:
        return self.request.query.get(name, "false").lower() == "true"

    def body(self):
        raw = self.request.body
        content_type = self.request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type and content_type not in ACCEPTED_BODY_TYPES:
            raise errors.unsupported_media_type()
        try:
            return json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.bad_json(str(exc)) from None

    async def write(self, op):
        return await self.registry.write(op)


@dataclass(frozen=True)
class Route:
    method: str
    pattern: tuple[str, ...]
    run: Callable[[Call], Awaitable[object]]
    name: str  # the endpoint's name in metrics, e.g. "POST /subjects/{subject}/versions"
    # What ACLs decide: "subject:READ" / "subject:WRITE" (the topic the {subject} names),
    # "global:READ" / "global:WRITE" (cluster DESCRIBE_CONFIGS / ALTER_CONFIGS), or None.
    access: str | None
    writes: bool


ROUTES: list[Route] = []
# (segment count, first segment) -> the routes that may match: a request tries a handful
_BY_SHAPE: dict[tuple[int, str], list[Route]] = {}


def route(method: str, path: str, access: str | None = None, writes: bool = False):
    pattern = tuple(s for s in path.strip("/").split("/") if s)

    def add(fn):
        added = Route(method, pattern, fn, f"{method} {path}", access, writes)
        ROUTES.append(added)
        _BY_SHAPE.setdefault((len(pattern), pattern[0] if pattern else ""), []).append(added)
        return fn
    return add


def match(method: str, segments: list[str]) -> tuple[Route | None, dict, bool]:
    """(route, params, path known): a path known for another method is 405, not 404."""
    known = False
    shape = (len(segments), segments[0] if segments else "")
    for candidate in _BY_SHAPE.get(shape, ()):
        params = {}
        for part, seg in zip(candidate.pattern, segments):
            if part[0] == "{":
                params[part[1:-1]] = seg
            elif part != seg:
                break
        else:
            known = True
            if candidate.method == method or (method == "HEAD" and candidate.method == "GET"):
                return candidate, params, True
    return None, {}, known


def schema_json(entry: SchemaValue) -> dict:
    """Confluent's ``Schema`` entity."""
    out: dict = {"subject": entry.subject, "version": entry.version, "id": entry.id}
    if entry.schema_type != "AVRO":
        out["schemaType"] = entry.schema_type
    if entry.references:
        out["references"] = [r.as_json() for r in entry.references]
    out["schema"] = entry.schema
    return out


def _raw_schema(entry: SchemaValue) -> Response:
    return Response(200, entry.schema.encode(), "application/vnd.schemaregistry.v1+json")


# --- root and metadata ------------------------------------------------------------------------

@route("GET", "/")
async def root(call: Call):
    return {}


@route("GET", "/v1/metadata/id")
async def metadata_id(call: Call):
    return {"scope": {"path": [], "clusters": {
        "kafka-cluster": call.registry.cluster_id(),
        "schema-registry-cluster": call.registry.group_id}}}


@route("GET", "/v1/metadata/version")
async def metadata_version(call: Call):
    from kbroker import __version__
    return {"version": __version__, "commitId": ""}


@route("GET", "/contexts")
async def contexts(call: Call):
    return [ops.CONTEXT]


@route("GET", "/schemas/types")
async def schema_types(call: Call):
    return [name for name, module in FORMATS.items() if _available(module)]


def _available(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


# --- schemas by id ----------------------------------------------------------------------------

def _by_id(call: Call) -> SchemaValue:
    try:
        schema_id = int(call.params["id"])
    except ValueError:
        raise errors.schema_not_found(call.params["id"]) from None
    entry = call.shard.schema_by_id(schema_id)
    if entry is None:
        raise errors.schema_not_found(schema_id)
    # ?subject= names the context Confluent looks the id up in; kbroker serves the default
    # context only, where every id is found whatever the subject (as Confluent finds it there).
    return entry


@route("GET", "/schemas/ids/{id}", access="id:READ")
async def schema_by_id(call: Call):
    entry = _by_id(call)
    if not call.request.query:  # the serializers' cold-cache lookup: rendered once per id
        cached = call.shard.rendered.get(entry.id)
        if cached is None or cached[0] is not entry:
            cached = (entry, Response.json(_schema_string(call, entry)).body)
            call.shard.rendered[entry.id] = cached
        return Response(200, cached[1])
    return _schema_string(call, entry)


def _schema_string(call: Call, entry: SchemaValue) -> dict:
    """Confluent's ``SchemaString`` entity of an id."""
    out: dict = {}
    if entry.schema_type != "AVRO":
        out["schemaType"] = entry.schema_type
    out["schema"] = _formatted_text(call, entry)
    if entry.references:
        out["references"] = [r.as_json() for r in entry.references]
    if call.flag("fetchMaxId"):
        out["maxId"] = call.shard.max_id.get()
    return out


def _formatted_text(call: Call, entry: SchemaValue) -> str:
    """The schema in the ``?format=`` asked for (Protobuf's "serialized": the base64 descriptor
    confluent-kafka's deserializers ask for); the stored text when the format does not know it."""
    fmt = call.request.query.get("format")
    if fmt:
        formatted = ops.parsed_of(call.shard, entry).formatted(fmt)
        if formatted is not None:
            return formatted
    return entry.schema


@route("GET", "/schemas/ids/{id}/schema", access="id:READ")
async def schema_text_by_id(call: Call):
    return _raw_schema(_by_id(call))


@route("GET", "/schemas/ids/{id}/subjects", access="id:READ")
async def subjects_by_id(call: Call):
    entry = _by_id(call)
    deleted = call.flag("deleted")
    users = call.shard.id_users.get(entry.id, ())
    return sorted({s for s, v in users if deleted or not call.shard.versions[(s, v)].deleted})


@route("GET", "/schemas/ids/{id}/versions", access="id:READ")
async def versions_by_id(call: Call):
    entry = _by_id(call)
    deleted = call.flag("deleted")
    users = sorted(call.shard.id_users.get(entry.id, ()))
    return [{"subject": s, "version": v} for s, v in users
            if deleted or not call.shard.versions[(s, v)].deleted]


@route("GET", "/schemas", access="list")
async def list_schemas(call: Call):
    query = call.request.query
    prefix = query.get("subjectPrefix", "")
    deleted = call.flag("deleted")
    latest_only = call.flag("latestOnly")
    out = []
    for subject in call.shard.subjects(deleted=True):
        if not subject.startswith(prefix) or not call.registry.may_read(call, subject):
            continue
        entries = call.shard.subject_entries(subject, deleted=deleted)
        if latest_only:
            entries = entries[-1:]
        out += [schema_json(e) for e in entries]
    return _page(out, query)


def _page(items: list, query: dict) -> list:
    try:
        offset = int(query.get("offset", 0))
        limit = int(query.get("limit", -1))
    except ValueError:
        raise errors.bad_request("offset and limit must be integers") from None
    items = items[max(offset, 0):]
    return items[:limit] if limit >= 0 else items


# --- subjects ---------------------------------------------------------------------------------

@route("GET", "/subjects", access="list")
async def list_subjects(call: Call):
    prefix = call.request.query.get("subjectPrefix", "")
    shard = call.shard
    if call.flag("deletedOnly"):  # subjects with a soft-deleted version
        names = [s for s in shard.subjects(deleted=True)
                 if any(e.deleted for e in shard.subject_entries(s, deleted=True))]
    else:
        names = shard.subjects(deleted=call.flag("deleted"))
    names = [s for s in names if s.startswith(prefix) and call.registry.may_read(call, s)]
    return _page(names, call.request.query)


@route("POST", "/subjects/{subject}", access="subject:READ")
async def lookup(call: Call):
    entry = ops.lookup(call.shard, call.params["subject"], call.body(), call.flag("normalize"),
                       call.flag("deleted"))
    return schema_json(entry)


@route("DELETE", "/subjects/{subject}", access="subject:WRITE", writes=True)
async def delete_subject(call: Call):
    return await call.write(ops.delete_subject(call.params["subject"], call.flag("permanent")))


@route("GET", "/subjects/{subject}/versions", access="subject:READ")
async def list_versions(call: Call):
    subject = call.params["subject"]
    every = call.shard.subject_entries(subject, deleted=True)
    if call.flag("deletedOnly"):
        entries = [e for e in every if e.deleted]
    elif call.flag("deleted"):
        entries = every
    else:
        entries = [e for e in every if not e.deleted]
    if not every or (not entries and not call.flag("deletedOnly")):
        raise errors.subject_not_found(subject)
    return _page([e.version for e in entries], call.request.query)


@route("POST", "/subjects/{subject}/versions", access="subject:WRITE", writes=True)
async def register(call: Call):
    body = call.body()
    return await call.write(ops.register(call.params["subject"], body, call.flag("normalize")))


@route("GET", "/subjects/{subject}/versions/{version}", access="subject:READ")
async def get_version(call: Call):
    entry = ops.find_version(call.shard, call.params["subject"], call.params["version"],
                             call.flag("deleted"))
    # confluent-kafka's Protobuf serdes fetch references and the latest version ?format=serialized
    return {**schema_json(entry), "schema": _formatted_text(call, entry)}


@route("GET", "/subjects/{subject}/versions/{version}/schema", access="subject:READ")
async def get_version_schema(call: Call):
    return _raw_schema(ops.find_version(call.shard, call.params["subject"],
                                        call.params["version"], call.flag("deleted")))


@route("GET", "/subjects/{subject}/versions/{version}/referencedby", access="subject:READ")
async def referenced_by(call: Call):
    entry = ops.find_version(call.shard, call.params["subject"], call.params["version"],
                             call.flag("deleted"))
    return call.shard.referenced_by(entry.subject, entry.version)


@route("DELETE", "/subjects/{subject}/versions/{version}", access="subject:WRITE", writes=True)
async def delete_version(call: Call):
    return await call.write(ops.delete_version(call.params["subject"], call.params["version"],
                                               call.flag("permanent")))


# --- compatibility ----------------------------------------------------------------------------

async def _compatibility(call: Call, version: str | None):
    try:
        problems = ops.check_compatibility(call.shard, call.params["subject"], version,
                                           call.body(), call.flag("normalize"))
    except errors.RegistryError as exc:
        if exc.code != 42201 or not call.flag("verbose"):
            raise
        problems = [exc.message]  # Confluent: a verbose check reports an invalid schema
    out: dict = {"is_compatible": not problems}
    if call.flag("verbose"):
        out["messages"] = problems
    return out


@route("POST", "/compatibility/subjects/{subject}/versions/{version}", access="subject:READ")
async def compatibility_with_version(call: Call):
    return await _compatibility(call, call.params["version"])


@route("POST", "/compatibility/subjects/{subject}/versions", access="subject:READ")
async def compatibility_with_all(call: Call):
    return await _compatibility(call, None)


# --- config -----------------------------------------------------------------------------------

@route("GET", "/config", access="global:READ")
async def get_global_config(call: Call):
    config = call.shard.configs.get(None) or ConfigValue()
    return ops.config_json(config, call.shard.defaults.compatibility)


@route("PUT", "/config", access="global:WRITE", writes=True)
async def put_global_config(call: Call):
    return await call.write(ops.set_config(None, call.body()))


@route("DELETE", "/config", access="global:WRITE", writes=True)
async def delete_global_config(call: Call):
    return await call.write(ops.delete_config(None))


@route("GET", "/config/{subject}", access="subject:READ")
async def get_subject_config(call: Call):
    subject = call.params["subject"]
    config = call.shard.configs.get(subject)
    if not call.flag("defaultToGlobal"):
        if config is None:
            raise errors.subject_compatibility_not_configured(subject)
        return ops.config_json(config, call.shard.defaults.compatibility)
    return ops.config_json(call.shard.config_in_scope(subject),
                           call.shard.defaults.compatibility)


@route("PUT", "/config/{subject}", access="subject:WRITE", writes=True)
async def put_subject_config(call: Call):
    return await call.write(ops.set_config(call.params["subject"], call.body()))


@route("DELETE", "/config/{subject}", access="subject:WRITE", writes=True)
async def delete_subject_config(call: Call):
    return await call.write(ops.delete_config(call.params["subject"]))


# --- mode -------------------------------------------------------------------------------------

@route("GET", "/mode", access="global:READ")
async def get_global_mode(call: Call):
    return {"mode": call.shard.mode(None)}


@route("PUT", "/mode", access="global:WRITE", writes=True)
async def put_global_mode(call: Call):
    return await call.write(ops.set_mode(None, call.body(), call.flag("force")))


@route("GET", "/mode/{subject}", access="subject:READ")
async def get_subject_mode(call: Call):
    subject = call.params["subject"]
    mode = call.shard.modes.get(subject)
    if mode is None:
        if not call.flag("defaultToGlobal"):
            raise errors.subject_mode_not_configured(subject)
        mode = call.shard.mode(None)
    return {"mode": mode}


@route("PUT", "/mode/{subject}", access="subject:WRITE", writes=True)
async def put_subject_mode(call: Call):
    return await call.write(ops.set_mode(call.params["subject"], call.body(), call.flag("force")))


@route("DELETE", "/mode/{subject}", access="subject:WRITE", writes=True)
async def delete_subject_mode(call: Call):
    return await call.write(ops.delete_mode(call.params["subject"]))
