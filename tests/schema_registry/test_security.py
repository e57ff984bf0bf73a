"""The registry listener's security: TLS (https://), HTTP basic authentication against kbroker's
PLAIN and SCRAM users (40101 without valid credentials), and the broker's ACLs (40301): a
subject by its topic's READ/WRITE, the global config by the cluster's DESCRIBE_/ALTER_CONFIGS,
listings filtered. confluent-kafka's SchemaRegistryClient over https with basic auth, too."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from kbroker.testing import KafkaBroker
from tests.schema_registry.conftest import free_port

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "n",
                                                                    "type": "int"}]})
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def secured():
    port = free_port()
    with KafkaBroker({"schema.registry.listeners": f"https://127.0.0.1:{port}",
                      "schema.registry.authentication": "basic",
                      "authorizer.class.name": AUTHORIZER,
                      # the test's admin calls go over the PLAINTEXT listener, as ANONYMOUS
                      "super.users": "User:ANONYMOUS;User:root"},
                     security={"users": {"alice": "alice-secret", "bob": "bob-secret",
                                         "root": "root-secret"}}) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})  # PLAINTEXT
        upsert = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        acls = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                           "User:alice", "*", op, AclPermissionType.ALLOW)
                for op in (AclOperation.READ, AclOperation.WRITE)]
        acls += [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                            "User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW),
                 AclBinding(ResourceType.TOPIC, "carol", ResourcePatternType.PREFIXED,
                            "User:carol", "*", AclOperation.WRITE, AclPermissionType.ALLOW)]
        for future in admin.create_acls(acls).values():
            future.result(30)
        yield f"https://127.0.0.1:{port}", kafka.security.ca_file


def _call(secured, method, path, user=None, password=None, body=None):
    url, ca = secured
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    context = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_authentication(secured):
    status, body = _call(secured, "GET", "/subjects")
    assert (status, body["error_code"]) == (401, 40101)
    assert _call(secured, "GET", "/subjects", "alice", "wrong")[1]["error_code"] == 40101
    assert _call(secured, "GET", "/subjects", "nobody", "x")[1]["error_code"] == 40101
    assert _call(secured, "GET", "/subjects", "alice", "alice-secret")[0] == 200  # PLAIN user
    assert _call(secured, "GET", "/subjects", "carol", "carol-secret")[0] == 200  # SCRAM only
    assert _call(secured, "GET", "/subjects", "carol", "carol-wrong")[0] == 401


def test_acls_decide_per_subject_topic(secured):
    body = {"schema": SCHEMA}
    assert _call(secured, "POST", "/subjects/orders-value/versions", "alice", "alice-secret",
                 body)[0] == 200
    status, denied = _call(secured, "POST", "/subjects/orders-value/versions", "bob",
                           "bob-secret", body)
    assert (status, denied["error_code"]) == (403, 40301)
    assert _call(secured, "GET", "/subjects/orders-value/versions", "bob",
                 "bob-secret") == (200, [1])
    assert _call(secured, "POST", "/subjects/payments-value/versions", "alice",
                 "alice-secret", body)[1]["error_code"] == 40301
    # WRITE without READ: carol registers but cannot read back
    assert _call(secured, "POST", "/subjects/carol-data/versions", "carol", "carol-secret",
                 body)[0] == 200
    assert _call(secured, "GET", "/subjects/carol-data/versions", "carol",
                 "carol-secret")[1]["error_code"] == 40301
    # the global config needs the cluster's DESCRIBE_CONFIGS / ALTER_CONFIGS; super users pass
    assert _call(secured, "GET", "/config", "alice", "alice-secret")[1]["error_code"] == 40301
    assert _call(secured, "PUT", "/config", "root", "root-secret",
                 {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    # listings show what the principal may read
    assert _call(secured, "GET", "/subjects", "bob", "bob-secret")[1] == ["orders-value"]
    assert _call(secured, "GET", "/subjects", "root", "root-secret")[1] == [
        "carol-data", "orders-value"]
    # a schema by id: READ on a subject that uses it
    assert _call(secured, "GET", "/schemas/ids/1", "bob", "bob-secret")[0] == 200


def test_confluent_client_over_https_with_basic_auth(secured):
    url, ca = secured
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": ca,
                                   "basic.auth.user.info": "alice:alice-secret"})
    assert client.register_schema("orders-value", Schema(SCHEMA, "AVRO")) == 1
    assert client.get_latest_version("orders-value").schema_id == 1
    denied = SchemaRegistryClient({"url": url, "ssl.ca.location": ca,
                                   "basic.auth.user.info": "bob:bob-secret"})
    with pytest.raises(SchemaRegistryError) as caught:
        denied.register_schema("orders-value", Schema(SCHEMA.replace("Order", "Other"),
                                                      "AVRO"))
    assert caught.value.error_code == 40301
