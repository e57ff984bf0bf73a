"""The schema registry of a cluster behind https and basic authentication: a write that reaches a
broker which does not lead ``_schemas-0`` is forwarded over TLS (the broker's ssl keys on the
client side) with the caller's credentials, which the leader checks."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from kbroker.testing.certs import make_certificates
from tests.cluster.conftest import start_brokers, stop_brokers, wait_for


def _call(url: str, ca: str, method: str, path: str, body=None, user="ann",
          password="ann-secret"):
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json",
               "Authorization": "Basic " + base64.b64encode(
                   f"{user}:{password}".encode()).decode()}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=ca),
                                    timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_forwarding_over_tls_with_the_callers_credentials(connect_string, tmp_path):
    certs = make_certificates(tmp_path)
    settings = {"schema.registry.listeners": "https://127.0.0.1:0",
                "schema.registry.authentication": "basic",
                "schema.registry.topic.replication.factor": "2",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_file)}
    brokers = start_brokers(connect_string, lambda broker_id: settings, ids=(1, 2))
    try:
        admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap_servers})
        upsert = UserScramCredentialUpsertion(
            "ann", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"ann-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        urls = {i: b.schema_registry_url for i, b in brokers.items()}
        ca = str(certs.ca_file)
        wait_for(lambda: all(_call(u, ca, "GET", "/subjects")[0] == 200 for u in urls.values()),
                 "the SCRAM user on every broker", 30)
        schema = {"schema": json.dumps({"type": "record", "name": "T", "fields": []})}
        status, body = _call(urls[1], ca, "POST", "/subjects/t-value/versions", schema)
        assert (status, body) == (200, {"id": 1})
        leader = brokers[1]._inner.broker.schema_registry.leader()
        follower = 2 if leader == 1 else 1
        # through the follower: forwarded over TLS, checked by the leader
        other = {"schema": json.dumps({"type": "record", "name": "U", "fields": []})}
        assert _call(urls[follower], ca, "POST", "/subjects/u-value/versions", other) == (
            200, {"id": 2})
        status, body = _call(urls[follower], ca, "POST", "/subjects/v-value/versions", other,
                             password="wrong")
        assert (status, body["error_code"]) == (401, 40101)
        for url in urls.values():
            assert _call(url, ca, "GET", "/subjects")[1] == ["t-value", "u-value"]
    finally:
        stop_brokers(brokers)
