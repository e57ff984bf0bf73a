"""Delegation tokens in a cluster (ZooKeeper, Kafka 3.x's layout): a token created through one
broker authenticates on another, a renewal or an expiry made on one is seen by the others
through ``/delegation_token/token_changes``, and the znodes are Kafka's."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest

from kbroker.protocol.errors import Errors
from tests.cluster.conftest import SESSION_TIMEOUT_MS, start_brokers, stop_brokers, wait_for
from tests.integration.clients import Wire
from tests.security.test_delegation_tokens import (PLAIN_JAAS, SECRET, create, describe, expire,
                                                   kafka_hmac, login, renew, scram_token_login)


def _settings(broker_id: int) -> dict:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connection.failed.authentication.delay.ms": "20",
            "delegation.token.secret.key": SECRET,
            "delegation.token.expiry.check.interval.ms": 500}


@pytest.fixture
def cluster(connect_string):
    brokers = start_brokers(connect_string, _settings, SESSION_TIMEOUT_MS, ids=(1, 2))
    yield brokers
    stop_brokers(brokers)


def _view(broker) -> SimpleNamespace:
    return SimpleNamespace(endpoints={name: f"{host}:{port}" for name, (host, port)
                                      in broker._inner.listeners.items()})


def _authenticates(broker, token_id: str, password: str) -> bool:
    with Wire(_view(broker).endpoints["SASL_PLAINTEXT"]) as wire:
        return scram_token_login(wire, "SCRAM-SHA-256", token_id, password).error_code == 0


def test_a_token_made_on_one_broker_works_on_another(cluster, clients):
    one, two = _view(cluster[1]), _view(cluster[2])
    with login(one, "alice") as wire:
        token = create(wire, renewers=["User:bob"])
    assert token.error_code == 0
    password = base64.b64encode(bytes(token.hmac)).decode()
    wait_for(lambda: _authenticates(cluster[2], token.token_id, password),
             "broker 2 to accept the token", 30)

    # Kafka's znodes: the token (no HMAC) and a notification naming it.
    zk = clients()
    data, _ = zk.get(f"/delegation_token/tokens/{token.token_id}")
    assert json.loads(data) == {
        "version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice",
        "renewers": ["User%3Abob"], "issueTimestamp": token.issue_timestamp_ms,
        "maxTimestamp": token.max_timestamp_ms, "expiryTimestamp": token.expiry_timestamp_ms,
        "tokenId": token.token_id}
    notes = zk.get_children("/delegation_token/token_changes")
    assert any(n.startswith("token_change_") and
               zk.get(f"/delegation_token/token_changes/{n}")[0] == token.token_id.encode()
               for n in notes)

    # Renewed on broker 2, seen on broker 1.
    with login(two, "bob") as wire:
        renewed = renew(wire, kafka_hmac(token.token_id), 60_000)
    assert renewed.error_code == 0

    def described_on_one():
        with login(one, "alice") as wire:
            seen = describe(wire, None)[1].get(token.token_id)
        return seen is not None and seen.expiry_timestamp == renewed.expiry_timestamp_ms
    wait_for(described_on_one, "broker 1 to see the renewal", 30)

    # Expired at once on broker 1: broker 2 refuses the token from then on.
    with login(one, "alice") as wire:
        assert expire(wire, bytes(token.hmac), -1).error_code == 0
    wait_for(lambda: not _authenticates(cluster[2], token.token_id, password),
             "broker 2 to refuse the expired token", 30)
    assert not zk.exists(f"/delegation_token/tokens/{token.token_id}")
    with login(two, "alice") as wire:
        assert renew(wire, bytes(token.hmac), 1000).error_code \
            == Errors.DELEGATION_TOKEN_NOT_FOUND.code


def test_a_token_written_by_kafka_is_read(cluster, clients):
    """A token znode as a Kafka 3.x broker writes it (version 3), announced by a notification,
    authenticates on every kbroker broker."""
    zk = clients()
    token_id = "kafkaWrittenToken00001"
    zk.create(f"/delegation_token/tokens/{token_id}", json.dumps({
        "version": 3, "owner": "User%3Acarol", "tokenRequester": "User%3Aadmin",
        "renewers": [], "issueTimestamp": 1, "maxTimestamp": 4_000_000_000_000,
        "expiryTimestamp": 4_000_000_000_000, "tokenId": token_id}).encode())
    zk.create("/delegation_token/token_changes/token_change_", token_id.encode(), sequence=True)
    password = base64.b64encode(kafka_hmac(token_id)).decode()
    for broker in cluster.values():
        wait_for(lambda b=broker: _authenticates(b, token_id, password),
                 "the token written by Kafka to authenticate", 30)
    with login(_view(cluster[1]), "carol") as wire:
        seen = describe(wire, ["User:carol"])[1][token_id]
    assert (seen.principal_name, seen.token_requester_principal_name) == ("carol", "admin")


def test_the_controller_removes_expired_tokens(cluster, clients):
    zk = clients()
    with login(_view(cluster[2]), "alice") as wire:
        token = create(wire, max_lifetime_ms=1500)
    path = f"/delegation_token/tokens/{token.token_id}"
    assert zk.exists(path)
    wait_for(lambda: not zk.exists(path), "the expired token's znode to go", 30)
    password = base64.b64encode(bytes(token.hmac)).decode()
    for broker in cluster.values():
        assert not _authenticates(broker, token.token_id, password)
        wait_for(lambda b=broker: token.token_id not in describe_as_alice(b),
                 "every broker to forget the token", 30)


def describe_as_alice(broker) -> dict:
    with login(_view(broker), "alice") as wire:
        return describe(wire, None)[1]
