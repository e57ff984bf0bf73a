"""Confluent's REST API over raw HTTP: every endpoint, its answers and its error codes, and bad
input (malformed schemas, unknown references, incompatible versions, oversized bodies, wrong
content types) answered as Confluent does with nothing stored changed."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

REC = {"type": "record", "name": "R", "namespace": "t",
       "fields": [{"name": "a", "type": "int"}]}
REC_B = {"type": "record", "name": "R", "namespace": "t",
         "fields": [{"name": "a", "type": "int"},
                    {"name": "b", "type": "string", "default": "x"}]}
REC_REQUIRED = {"type": "record", "name": "R", "namespace": "t",
                "fields": [{"name": "a", "type": "int"}, {"name": "c", "type": "long"}]}


def schema(value) -> dict:
    return {"schema": json.dumps(value)}


def _schemas_end(registry) -> int:
    """The log end offset of _schemas (0 before it exists): what a refused request must not
    move."""
    consumer = Consumer({"bootstrap.servers": registry.broker.bootstrap, "group.id": "probe"})
    try:
        topics = consumer.list_topics(timeout=10).topics
        if "_schemas" not in topics:
            return 0
        return consumer.get_watermark_offsets(TopicPartition("_schemas", 0), timeout=10)[1]
    finally:
        consumer.close()


def test_register_lookup_and_get(shared_registry):
    r = shared_registry
    assert r.call("POST", "/subjects/basic-value/versions", schema(REC)) == (200, {"id": 1})
    assert r.call("POST", "/subjects/basic-value/versions", schema(REC)) == (200, {"id": 1})
    status, found = r.call("POST", "/subjects/basic-value", schema(REC))
    assert status == 200
    assert found == {"subject": "basic-value", "version": 1, "id": 1,
                     "schema": json.dumps(REC, separators=(",", ":"))}
    for version in ("1", "latest", "-1"):
        assert r.call("GET", f"/subjects/basic-value/versions/{version}")[1] == found
    status, text = r.call("GET", "/subjects/basic-value/versions/1/schema")
    assert status == 200 and text == REC
    assert r.call("GET", "/schemas/ids/1") == (200, {"schema": found["schema"]})
    assert r.call("GET", "/schemas/ids/1?fetchMaxId=true")[1]["maxId"] >= 1
    assert r.call("GET", "/schemas/ids/1/schema") == (200, REC)
    assert r.call("GET", "/schemas/ids/1/subjects")[1] == ["basic-value"]
    assert r.call("GET", "/schemas/ids/1/versions")[1] == [{"subject": "basic-value",
                                                            "version": 1}]
    assert "basic-value" in r.call("GET", "/subjects")[1]
    assert r.call("GET", "/subjects?subjectPrefix=basic")[1] == ["basic-value"]
    assert r.call("GET", "/subjects/basic-value/versions") == (200, [1])
    assert r.call("GET", "/schemas?subjectPrefix=basic")[1] == [found]
    types = r.call("GET", "/schemas/types")[1]
    assert "AVRO" in types
    assert r.call("GET", "/contexts") == (200, ["."])
    assert r.call("GET", "/") == (200, {})
    status, meta = r.call("GET", "/v1/metadata/id")
    assert status == 200 and meta["scope"]["clusters"]["kafka-cluster"]


def test_not_found_codes(shared_registry):
    r = shared_registry
    r.call("POST", "/subjects/nf-value/versions", schema(REC))
    assert r.call("GET", "/subjects/missing/versions") == (
        404, {"error_code": 40401, "message": "Subject 'missing' not found."})
    assert r.call("GET", "/subjects/missing/versions/1")[1]["error_code"] == 40401
    assert r.call("GET", "/subjects/nf-value/versions/7") == (
        404, {"error_code": 40402, "message": "Version 7 not found."})
    assert r.call("GET", "/schemas/ids/999") == (
        404, {"error_code": 40403, "message": "Schema 999 not found"})
    assert r.call("POST", "/subjects/nf-value", schema(REC_REQUIRED))[1]["error_code"] == 40403
    assert r.call("POST", "/subjects/missing", schema(REC))[1]["error_code"] == 40401
    for bad in ("0", "abc", "2147483648"):
        status, body = r.call("GET", f"/subjects/nf-value/versions/{bad}")
        assert (status, body["error_code"]) == (422, 42202)
    assert r.call("GET", "/nowhere")[0] == 404
    assert r.call("PATCH", "/subjects")[0] == 405


def test_compatibility_levels_and_check_endpoint(shared_registry):
    r = shared_registry
    subject = "compat-value"
    assert r.call("POST", f"/subjects/{subject}/versions", schema(REC))[0] == 200
    status, body = r.call("POST", f"/subjects/{subject}/versions", schema(REC_REQUIRED))
    assert status == 409 and body["error_code"] == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"]
    check = f"/compatibility/subjects/{subject}/versions/latest"
    assert r.call("POST", check, schema(REC_B)) == (200, {"is_compatible": True})
    assert r.call("POST", check, schema(REC_REQUIRED)) == (200, {"is_compatible": False})
    status, verbose = r.call("POST", check + "?verbose=true", schema(REC_REQUIRED))
    assert verbose["is_compatible"] is False and verbose["messages"]
    assert r.call("POST", f"/compatibility/subjects/{subject}/versions",
                  schema(REC_B))[1] == {"is_compatible": True}
    assert r.call("POST", f"/subjects/{subject}/versions", schema(REC_B)) == (200,
                                                                              {"id": 2})
    # FORWARD: old readers must read new data; a new field without default is fine, removing
    # a field without default is not.
    assert r.call("PUT", f"/config/{subject}", {"compatibility": "FORWARD"}) == (
        200, {"compatibility": "FORWARD"})
    assert r.call("GET", f"/config/{subject}") == (200, {"compatibilityLevel": "FORWARD"})
    removed_a = {"type": "record", "name": "R", "namespace": "t",
                 "fields": [{"name": "b", "type": "string", "default": "x"}]}
    assert r.call("POST", check, schema(removed_a))[1] == {"is_compatible": False}
    # transitive: REC_REQUIRED is forward compatible with v2 (and with v1)
    assert r.call("PUT", f"/config/{subject}", {"compatibility": "full_transitive"})[0] == 200
    assert r.call("GET", f"/config/{subject}")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert r.call("PUT", f"/config/{subject}", {"compatibility": "SOMETIMES"}) == (
        422, {"error_code": 42203, "message": "Invalid compatibility level. Valid values are "
              "none, backward, forward, full, backward_transitive, forward_transitive, and "
              "full_transitive"})
    assert r.call("DELETE", f"/config/{subject}") == (200, {"compatibilityLevel":
                                                            "FULL_TRANSITIVE"})
    assert r.call("GET", f"/config/{subject}")[1]["error_code"] == 40408
    assert r.call("GET", f"/config/{subject}?defaultToGlobal=true") == (
        200, {"compatibilityLevel": "BACKWARD"})
    assert r.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})


def test_transitive_checks_every_version(registry):
    r = registry
    subject = "trans-value"
    v1 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int", "default": 0}]}
    v3 = {"type": "record", "name": "T", "fields": [{"name": "b", "type": "int",
                                                      "default": 0}]}
    r.call("PUT", f"/config/{subject}", {"compatibility": "FORWARD"})
    assert r.call("POST", f"/subjects/{subject}/versions", schema(v1))[0] == 200
    assert r.call("POST", f"/subjects/{subject}/versions", schema(v2))[0] == 200
    # v3 drops "a": v2's readers have a default for it (FORWARD against the latest holds),
    # v1's do not (FORWARD_TRANSITIVE fails)
    r.call("PUT", f"/config/{subject}", {"compatibility": "FORWARD_TRANSITIVE"})
    assert r.call("POST", f"/subjects/{subject}/versions", schema(v3))[0] == 409
    r.call("PUT", f"/config/{subject}", {"compatibility": "FORWARD"})
    assert r.call("POST", f"/subjects/{subject}/versions", schema(v3)) == (200, {"id": 3})


def test_soft_and_hard_deletes(registry):
    r = registry
    r.call("PUT", "/config", {"compatibility": "NONE"})
    r.call("POST", "/subjects/del-value/versions", schema(REC))
    r.call("POST", "/subjects/del-value/versions", schema(REC_REQUIRED))
    # a hard delete needs a soft delete first
    assert r.call("DELETE", "/subjects/del-value/versions/1?permanent=true")[1][
        "error_code"] == 40407
    assert r.call("DELETE", "/subjects/del-value/versions/1") == (200, 1)
    assert r.call("DELETE", "/subjects/del-value/versions/1")[1]["error_code"] == 40406
    assert r.call("GET", "/subjects/del-value/versions") == (200, [2])
    assert r.call("GET", "/subjects/del-value/versions?deleted=true") == (200, [1, 2])
    assert r.call("GET", "/subjects/del-value/versions/1")[1]["error_code"] == 40402
    assert r.call("GET", "/subjects/del-value/versions/1?deleted=true")[1]["version"] == 1
    assert r.call("POST", "/subjects/del-value", schema(REC))[1]["error_code"] == 40403
    assert r.call("POST", "/subjects/del-value?deleted=true", schema(REC))[1]["version"] == 1
    assert r.call("DELETE", "/subjects/del-value/versions/1?permanent=true") == (200, 1)
    assert r.call("GET", "/subjects/del-value/versions?deleted=true") == (200, [2])
    assert r.call("GET", "/schemas/ids/1")[1]["error_code"] == 40403
    # the subject
    assert r.call("DELETE", "/subjects/del-value?permanent=true")[1]["error_code"] == 40405
    assert r.call("DELETE", "/subjects/del-value") == (200, [2])
    assert r.call("DELETE", "/subjects/del-value")[1]["error_code"] == 40404
    assert r.call("GET", "/subjects")[1] == []
    assert r.call("GET", "/subjects?deleted=true")[1] == ["del-value"]
    assert r.call("GET", "/subjects/del-value/versions")[1]["error_code"] == 40401
    # registering again continues the version numbers; the soft-deleted id is reused
    assert r.call("POST", "/subjects/del-value/versions", schema(REC_REQUIRED)) == (200,
                                                                                    {"id": 2})
    assert r.call("GET", "/subjects/del-value/versions")[1] == [3]
    assert r.call("DELETE", "/subjects/del-value")[0] == 200
    assert r.call("DELETE", "/subjects/del-value?permanent=true") == (200, [3])
    assert r.call("GET", "/subjects?deleted=true")[1] == []
    # ids never repeat, even once every user of an id is gone
    assert r.call("POST", "/subjects/new-value/versions", schema(REC)) == (200, {"id": 3})


def test_references(registry):
    r = registry
    address = {"type": "record", "name": "Address", "namespace": "com.acme",
               "fields": [{"name": "street", "type": "string"}]}
    person = {"type": "record", "name": "Person", "namespace": "com.acme",
              "fields": [{"name": "home", "type": "com.acme.Address"}]}
    assert r.call("POST", "/subjects/address/versions", schema(address)) == (200, {"id": 1})
    ref = [{"name": "com.acme.Address", "subject": "address", "version": 1}]
    body = {"schema": json.dumps(person), "references": ref}
    assert r.call("POST", "/subjects/person-value/versions", body) == (200, {"id": 2})
    status, got = r.call("GET", "/subjects/person-value/versions/1")
    assert got["references"] == ref
    assert r.call("GET", "/schemas/ids/2")[1]["references"] == ref
    assert r.call("GET", "/subjects/address/versions/1/referencedby") == (200, [2])
    assert r.call("POST", "/subjects/person-value", body)[1]["id"] == 2
    # a referenced version cannot be deleted
    status, body_err = r.call("DELETE", "/subjects/address/versions/1")
    assert (status, body_err["error_code"]) == (422, 42206)
    assert r.call("DELETE", "/subjects/address")[1]["error_code"] == 42206
    # without the reference the type is unknown; an unknown reference is refused
    assert r.call("POST", "/subjects/p2/versions", schema(person))[1]["error_code"] == 42201
    missing = {"schema": json.dumps(person),
               "references": [{"name": "com.acme.Address", "subject": "nope", "version": 1}]}
    assert r.call("POST", "/subjects/p2/versions", missing)[1]["error_code"] == 42201


def test_modes(registry):
    r = registry
    assert r.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    r.call("POST", "/subjects/m-value/versions", schema(REC))
    assert r.call("PUT", "/mode/m-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert r.call("GET", "/mode/m-value") == (200, {"mode": "READONLY"})
    status, body = r.call("POST", "/subjects/m-value/versions", schema(REC_B))
    assert (status, body["error_code"]) == (422, 42205)
    assert r.call("DELETE", "/subjects/m-value")[1]["error_code"] == 42205
    assert r.call("PUT", "/mode/m-value", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert r.call("DELETE", "/mode/m-value") == (200, {"mode": "READONLY"})
    assert r.call("GET", "/mode/m-value")[1]["error_code"] == 40409
    assert r.call("GET", "/mode/m-value?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
    # IMPORT: only into an empty registry (or with force); registrations carry id and version
    assert r.call("PUT", "/mode", {"mode": "IMPORT"})[1]["error_code"] == 42205
    assert r.call("PUT", "/mode?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    body = {"schema": json.dumps(REC_REQUIRED), "id": 100, "version": 5}
    assert r.call("POST", "/subjects/imported/versions", body) == (200, {"id": 100})
    assert r.call("GET", "/subjects/imported/versions/5")[1]["id"] == 100
    # an id taken by another schema is refused
    clash = {"schema": json.dumps(REC_B), "id": 100, "version": 6}
    assert r.call("POST", "/subjects/imported/versions", clash)[1]["error_code"] == 42207
    assert r.call("PUT", "/mode", {"mode": "READWRITE"})[0] == 200
    # ids continue after the highest imported one
    assert r.call("POST", "/subjects/after/versions", schema(REC_B)) == (200, {"id": 101})


@pytest.mark.parametrize("request_args, status, code", [
    (dict(raw=b'{"schema": "{\\"type\\": \\"recrd\\"}"}'), 422, 42201),
    (dict(raw=b'{"schema": "not json"}'), 422, 42201),
    (dict(raw=b'{"schema": ""}'), 422, 42201),
    (dict(raw=b'{"schema": "\\"int\\"", "schemaType": "XML"}'), 422, 42201),
    (dict(raw=b'{"schema": '), 400, 400),
    (dict(raw=b'{"schema": "\\"int\\""}', content_type="text/plain"), 415, 415),
    (dict(raw=b'{"schema": "' + b"x" * 2_000_000 + b'"}'), 413, 413),
])
def test_bad_input_changes_nothing(tmp_path, request_args, status, code):
    from tests.schema_registry.conftest import start_registry
    r = start_registry(tmp_path, overrides={"schema.registry.max.request.bytes": 1_000_000})
    try:
        r.call("POST", "/subjects/bad-value/versions", schema(REC))
        before = (_schemas_end(r), r.call("GET", "/schemas")[1])
        got_status, body = r.call("POST", "/subjects/bad-value/versions", **request_args)
        assert (got_status, body["error_code"]) == (status, code)
        assert isinstance(body["message"], str) and body["message"]
        assert (_schemas_end(r), r.call("GET", "/schemas")[1]) == before
        # the connection-level refusals leave the server serving
        assert r.call("GET", "/subjects")[1] == ["bad-value"]
    finally:
        r.broker.kill()


def test_incompatible_and_unknown_reference_change_nothing(registry):
    r = registry
    r.call("POST", "/subjects/keep-value/versions", schema(REC))
    before = (_schemas_end(r), r.call("GET", "/schemas")[1])
    assert r.call("POST", "/subjects/keep-value/versions", schema(REC_REQUIRED))[0] == 409
    missing = {"schema": json.dumps(REC), "references": [{"name": "x", "subject": "nope",
                                                          "version": 3}]}
    assert r.call("POST", "/subjects/keep-value/versions", missing)[1]["error_code"] == 42201
    assert (_schemas_end(r), r.call("GET", "/schemas")[1]) == before


def test_normalize(registry):
    r = registry
    spaced = '{"fields": [{"type": "int", "name": "a"}], "name": "R", "type": "record"}'
    assert r.call("POST", "/subjects/n-value/versions?normalize=true",
                  {"schema": spaced}) == (200, {"id": 1})
    stored = r.call("GET", "/subjects/n-value/versions/1")[1]["schema"]
    assert stored == '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    # the canonical form makes key order and spacing irrelevant
    assert r.call("POST", "/subjects/n-value", {"schema": spaced})[1]["id"] == 1
