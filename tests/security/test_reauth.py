"""KIP-368 re-authentication (``connections.max.reauth.ms``): the session lifetime a client is
told, the broker closing a connection that did not re-authenticate in time, re-authentication on
the open connection (same mechanism and principal only, at most once a second), clients without
KIP-368 (v0), and real clients producing without interruption across several re-authentications
(librdkafka, Java and kafka-python)."""

from __future__ import annotations

import json
import re
import struct
import time
import uuid

import pytest

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from tests.integration.clients import Wire, wait_until
from tests.security.clients import java_oauth_producer_perf, unsecured_jwt
from tests.security.conftest import PLAIN_JAAS, _broker_factory
from tests.security.test_denials import (METADATA, SASL_AUTHENTICATE, authenticate, handshake,
                                         metadata_request)

PLAIN_LIFETIME_MS = 1500  # listener.name.sasl_plaintext.plain.connections.max.reauth.ms
LIFETIME_MS = 3000  # connections.max.reauth.ms (every other listener and mechanism)


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory, ca):
    make, started = _broker_factory(tmp_path_factory.mktemp("reauth"))
    yield make({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": str(LIFETIME_MS),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(PLAIN_LIFETIME_MS),
        "connection.failed.authentication.delay.ms": "20"})
    for process in started:
        process.kill()


def plain(wire, user="alice", handshake_version=1, authenticate_version=2):
    assert handshake(wire, "PLAIN", handshake_version).error_code == 0
    return authenticate(wire, f"\0{user}\0{user}-secret".encode(), authenticate_version)


def sleep_past(start: float, seconds: float) -> None:
    time.sleep(max(0.0, start + seconds - time.monotonic()))


def test_expired_session_is_closed_at_the_next_request(reauth_broker):
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        start = time.monotonic()
        response = plain(wire)
        assert response.error_code == 0
        assert response.session_lifetime_ms == PLAIN_LIFETIME_MS
        assert wire.call(METADATA, 12, metadata_request()).brokers
        sleep_past(start, PLAIN_LIFETIME_MS / 1000 + 0.3)
        wire.send(METADATA, 12, metadata_request())
        assert wire.closed_by_broker()
    wait_until(lambda: "expired" in reauth_broker.log() and "without re-authentication"
               in reauth_broker.log(), message="no log line for the expired session")


def test_reauthentication_keeps_the_connection(reauth_broker):
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        start = time.monotonic()
        assert plain(wire).error_code == 0
        sleep_past(start, 1.2)  # late in the first session, so the second one reaches far past it
        again = time.monotonic()
        response = plain(wire)  # SaslHandshake + SaslAuthenticate on the open connection
        assert response.error_code == 0
        assert response.session_lifetime_ms == PLAIN_LIFETIME_MS
        # Past the first session's end, inside the second one's (the guard keeps the test honest
        # on a machine slow enough to oversleep).
        sleep_past(start, PLAIN_LIFETIME_MS / 1000 + 0.2)
        assert time.monotonic() < again + PLAIN_LIFETIME_MS / 1000, "overslept: inconclusive"
        assert wire.call(METADATA, 12, metadata_request()).brokers
        # A second re-authentication within a second of the last one is not one: KafkaApis
        # answers the handshake with ILLEGAL_SASL_STATE and the session goes on.
        assert handshake(wire, "PLAIN").error_code == Errors.ILLEGAL_SASL_STATE.code
        assert wire.call(METADATA, 12, metadata_request()).brokers


def test_reauthentication_frames_are_capped_as_before_authentication(reauth_broker):
    """sasl.server.max.receive.size applies again from the re-authentication's handshake on."""
    oversized = struct.pack(">i", 524289) + b"\0" * 1000
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert plain(wire).error_code == 0
        wire.send_raw(oversized)  # an authenticated session may send large requests
        assert not wire.closed_by_broker(timeout=0.5)
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert plain(wire).error_code == 0
        assert handshake(wire, "PLAIN").error_code == 0
        wire.send_raw(oversized)
        assert wire.closed_by_broker()


def test_reauthentication_cannot_change_the_principal(reauth_broker):
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert plain(wire, "alice").error_code == 0
        response = plain(wire, "bob")
        assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert response.error_message == ("Cannot change principals during re-authentication "
                                          "from User.alice: User.bob")
        assert wire.closed_by_broker()


def test_reauthentication_cannot_change_the_mechanism(reauth_broker):
    """Kafka answers the handshake, then fails the next message without a response."""
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert plain(wire).error_code == 0
        assert handshake(wire, "SCRAM-SHA-512").error_code == 0
        wire.send(SASL_AUTHENTICATE, 2, messages.request_class(SASL_AUTHENTICATE)(
            auth_bytes=b"n,,n=alice,r=abc"))
        assert wire.closed_by_broker()  # no SaslAuthenticate response: closed


@pytest.mark.parametrize("form", ["SaslAuthenticate v0", "SaslHandshake v0 (raw tokens)"])
def test_clients_without_kip_368_are_closed_after_the_lifetime(reauth_broker, form):
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        start = time.monotonic()
        if form == "SaslAuthenticate v0":
            assert plain(wire, authenticate_version=0).error_code == 0
        else:
            assert handshake(wire, "PLAIN", 0).error_code == 0
            wire.send_frame(b"\0bob\0bob-secret")
            assert wire.recv_frame() == b""
        assert wire.call(METADATA, 12, metadata_request()).brokers
        sleep_past(start, PLAIN_LIFETIME_MS / 1000 + 0.3)
        wire.send(METADATA, 12, metadata_request())
        assert wire.closed_by_broker()


def test_token_expiry_bounds_the_session(reauth_broker):
    """OAUTHBEARER: the smaller of connections.max.reauth.ms and the token's remaining life."""
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        now = time.time()
        exp = now + 1.0
        token = unsecured_jwt({"sub": "alice", "iat": int(now), "exp": exp})
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        response = authenticate(wire, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert response.error_code == 0
        # Kafka counts in whole milliseconds: exp rounded (OAuthBearerUnsecuredJws), the clock
        # truncated; read within the same millisecond as `now`, that is 1001 ms, not 1000.
        assert 0 < response.session_lifetime_ms <= round(exp * 1000) - int(now * 1000)
    with Wire(reauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        token = unsecured_jwt({"sub": "alice", "exp": int(time.time()) + 3600})
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        response = authenticate(wire, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        assert response.session_lifetime_ms == LIFETIME_MS


# --- real clients -------------------------------------------------------------------------------

PRODUCE_SECONDS = 8  # several lifetimes of LIFETIME_MS


def _create_topic(broker, protocol, settings, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.endpoints[protocol], **settings})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_librdkafka_produces_across_reauthentications(reauth_broker, ca, mechanism):
    """librdkafka (KIP-368 since 2.2) re-authenticates on its one connection to the broker: every
    record is delivered and the broker connection is never re-made."""
    from confluent_kafka import Producer

    settings = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.ca_pem),
                "sasl.mechanism": mechanism}
    if mechanism == "PLAIN":
        settings.update({"sasl.username": "alice", "sasl.password": "alice-secret"})
    else:
        settings.update({"sasl.oauthbearer.config": "principal=alice",
                         "enable.sasl.oauthbearer.unsecure.jwt": True})
    topic = f"reauth-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    _create_topic(reauth_broker, "SASL_SSL", settings, topic)
    stats, errors, delivered = [], [], []
    producer = Producer({"bootstrap.servers": reauth_broker.endpoints["SASL_SSL"], **settings,
                         "statistics.interval.ms": 500, "stats_cb": stats.append,
                         "error_cb": errors.append, "linger.ms": 5})
    on_delivery = lambda err, msg: (errors if err else delivered).append(err or msg)  # noqa
    sent, end = 0, time.monotonic() + PRODUCE_SECONDS
    while time.monotonic() < end:
        producer.produce(topic, f"r{sent}".encode(), on_delivery=on_delivery)
        sent += 1
        producer.poll(0.02)
    assert producer.flush(20) == 0
    producer.poll(0.6)  # one more statistics report
    assert errors == [] and len(delivered) == sent
    brokers = json.loads(stats[-1])["brokers"]
    (node,) = [b for b in brokers.values() if b["nodeid"] >= 0]
    assert node["connects"] == 1, node  # re-authenticated, never reconnected


def test_kafka_python_produces_across_reauthentications(reauth_broker):
    """kafka-python 3 re-authenticates too: a principal of its own, so the broker's log shows
    whether any of its sessions expired."""
    from kafka import KafkaProducer

    from tests.security.clients import _python_kwargs

    principal = f"kp-{uuid.uuid4().hex[:6]}"
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.config": f"principal={principal}"}
    topic = f"reauth-kafka-python-{uuid.uuid4().hex[:6]}"
    _create_topic(reauth_broker, "SASL_PLAINTEXT", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"}, topic)
    producer = KafkaProducer(bootstrap_servers=reauth_broker.endpoints["SASL_PLAINTEXT"],
                             **_python_kwargs(settings, "kafka-python"))
    futures, end = [], time.monotonic() + PRODUCE_SECONDS
    while time.monotonic() < end:
        futures.append(producer.send(topic, b"v"))
        time.sleep(0.02)
    for future in futures:
        future.get(timeout=20)
    producer.close()
    assert f"(User:{principal}) expired" not in reauth_broker.log()


def test_java_client_reauthenticates(reauth_broker, ca, tmp_path):
    """kafka-clients re-authenticates (successful-reauthentication-total) while producing, and
    the broker never closes one of its sessions as expired."""
    topic = f"reauth-java-{uuid.uuid4().hex[:6]}"
    _create_topic(reauth_broker, "SASL_SSL", {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.ca_pem),
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
        topic)
    expired = "on listener SASL_SSL: its SASL session (User:alice) expired"
    expired_before = reauth_broker.log().count(expired)
    rate = 100
    # Transactional, for its initTransactions(): ProducerPerformance calls it before starting
    # its throughput clock, so the connection to the broker (coordinator and leader) is made
    # first. Otherwise a slow start (a loaded machine: seconds of JVM TLS and SASL before the
    # first record) counts against the clock, the backlog goes out in one burst, and the
    # connection lives less than the two sessions this test needs.
    done = java_oauth_producer_perf(
        reauth_broker.endpoints["SASL_SSL"], ca.ca_pem, tmp_path,
        ["--topic", topic, "--num-records", str(rate * PRODUCE_SECONDS), "--record-size", "100",
         "--throughput", str(rate), "--transactional-id", f"{topic}-txn", "--print-metrics"],
        ["acks=all"])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"{rate * PRODUCE_SECONDS} records sent" in output, output

    def metric(name):
        match = re.search(rf"^producer-metrics:{name}:\{{[^}}]*\}}\s*:\s*([\d.]+)", done.stdout,
                          re.M)
        assert match, f"no {name} in the metrics:\n{done.stdout[-3000:]}"
        return float(match.group(1))

    assert metric("successful-reauthentication-total") >= 2
    assert metric("failed-reauthentication-total") == 0
    assert reauth_broker.log().count(expired) == expired_before, reauth_broker.log()[-3000:]
