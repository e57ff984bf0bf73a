"""OAUTHBEARER with signed tokens (KIP-768): kbroker validates JWTs against an identity
provider's JWKS, as Kafka's OAuthBearerValidatorCallbackHandler does.

A local identity provider (kbroker.testing.oauth_idp: a client-credentials token endpoint and a
JWKS on 127.0.0.1) issues RS256 and ES256 tokens. The broker serves OAUTHBEARER on
SASL_PLAINTEXT and SASL_SSL with the JWKS validator, expected audience and issuer set:
- raw exchanges: a valid token authenticates as its subject, the session bounded by its exp;
  expired, wrongly signed, wrong-audience and unknown-issuer tokens each get Kafka's
  ``{"status":"invalid_token"}`` and the reason in the broker's log;
- key rotation: a token signed by a new key (new kid) makes the broker read the JWKS again;
- librdkafka (confluent-kafka, ``sasl.oauthbearer.method=oidc``) and the Java client
  (``OAuthBearerLoginCallbackHandler``, client credentials) log in through the identity
  provider over both listeners, and keep producing across token lifetimes: they fetch new
  tokens and re-authenticate (KIP-368) before the old ones expire;
- configuration refusals.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.listeners import JWKS_VALIDATOR
from kbroker.protocol.errors import Errors
from kbroker.security.sasl.jwt import BrokerJwtOptions, JwksKeys, validate
from kbroker.security.sasl.oauthbearer import IllegalToken
from kbroker.testing.oauth_idp import IdentityProvider, SigningKey
from tests.integration.clients import Wire
from tests.security.conftest import _broker_factory
from tests.security.test_denials import METADATA, authenticate, handshake, metadata_request
from tests.security.test_oauthbearer import initial_response

INVALID = '{"status":"invalid_token"}'
CALLBACK = "oauthbearer.sasl.server.callback.handler.class"


@pytest.fixture(scope="module")
def idp():
    provider = IdentityProvider(audience="kafka", issuer="https://idp.kbroker.test").start()
    provider.add_client("alice", "alice-secret")
    provider.add_client("bob", "bob-secret")
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def jwks_broker(tmp_path_factory, ca, idp):
    make, started = _broker_factory(tmp_path_factory.mktemp("jwks"))
    broker = make({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        f"listener.name.sasl_plaintext.{CALLBACK}": JWKS_VALIDATOR,
        f"listener.name.sasl_ssl.{CALLBACK}": JWKS_VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": idp.issuer,
        "connection.failed.authentication.delay.ms": "20"})
    yield broker
    for process in started:
        process.kill()


def exchange(bootstrap: str, token: str):
    """(error message or None, session lifetime ms) of one OAUTHBEARER exchange."""
    with Wire(bootstrap) as wire:
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        response = authenticate(wire, initial_response(token))
        assert response.error_code == 0
        if response.auth_bytes:
            assert response.auth_bytes == INVALID.encode()
            failed = authenticate(wire, b"\x01")
            assert failed.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
            assert wire.closed_by_broker()
            return failed.error_message, None
        assert wire.call(METADATA, 12, metadata_request()).brokers
        return None, response.session_lifetime_ms


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_signed_token_authenticates_as_its_subject(jwks_broker, idp, alg):
    key = idp.rotate(alg, keep_old=True)  # published before the broker reads: a restart-free
    try:                                  # way to have it in the JWKS is a refresh (below)
        _wait_for_key(jwks_broker, idp, key)
        error, lifetime = exchange(jwks_broker.endpoints["SASL_PLAINTEXT"], idp.token("alice"))
        assert error is None and 280_000 < lifetime <= 300_000
    finally:
        idp.keys = idp.keys[:1]


def _wait_for_key(broker, idp, key):
    """Until the broker verifies tokens of ``key`` (a first token of an unknown kid makes it
    read the JWKS again)."""
    deadline = time.monotonic() + 10
    while exchange(broker.endpoints["SASL_PLAINTEXT"], idp.token("alice", key=key))[0]:
        assert time.monotonic() < deadline, f"the broker never verified {key.kid}"
        time.sleep(0.2)


@pytest.mark.parametrize("case, reason", [
    ("expired", "is on or after the Expiration Time"),
    ("wrong signature", "JWS signature is invalid"),
    ("wrong audience", "Audience (aud) claim ['other'] doesn't contain an acceptable identifier"),
    ("wrong issuer", "Issuer (iss) claim value (https://evil.test) doesn't match"),
    ("no exp", "No Expiration Time (exp) claim present"),
    ("blank subject", "sub value must not contain only whitespace"),
    ("unsigned", "Malformed JWT provided; expected three sections"),
])
def test_refused_tokens_get_kafkas_message(jwks_broker, idp, case, reason):
    now = int(time.time())
    token = {
        "expired": lambda: idp.token("alice", iat=now - 600, exp=now - 300),
        "wrong signature": lambda: idp.token("alice", key=SigningKey(
            idp.signing_key.alg, kid=idp.signing_key.kid)),
        "wrong audience": lambda: idp.token("alice", aud="other"),
        "wrong issuer": lambda: idp.token("alice", iss="https://evil.test"),
        "no exp": lambda: idp.token("alice", exp=None),
        "blank subject": lambda: idp.token(" "),
        "unsigned": lambda: _unsigned(idp.claims("alice")),
    }[case]()
    error, _ = exchange(jwks_broker.endpoints["SASL_PLAINTEXT"], token)
    assert error == INVALID
    # The reason goes to the broker's log (the first failure per client address; later ones
    # are counted), and is what the validator says:
    keys = JwksKeys(idp.jwks_url)
    keys.update(json.dumps(idp.jwks()).encode())
    options = BrokerJwtOptions(idp.jwks_url, ["kafka"], idp.issuer)
    with pytest.raises(IllegalToken) as info:
        validate(token, options, keys, int(time.time() * 1000))
    assert reason in str(info.value)


def _unsigned(claims):
    from tests.security.clients import unsecured_jwt
    return unsecured_jwt(claims, {"alg": "none"})


def test_key_rotation_reads_the_jwks_again(jwks_broker, idp):
    bootstrap = jwks_broker.endpoints["SASL_PLAINTEXT"]
    reads = idp.jwks_reads
    idp.rotate("ES256")
    try:
        token = idp.token("bob")
        # The first token with the new kid fails and makes the broker read the JWKS at once.
        assert exchange(bootstrap, token)[0] == INVALID
        deadline = time.monotonic() + 10
        while idp.jwks_reads == reads and time.monotonic() < deadline:
            time.sleep(0.05)
        assert idp.jwks_reads > reads
        deadline = time.monotonic() + 10
        while exchange(bootstrap, token)[0] is not None:
            assert time.monotonic() < deadline, "the rotated key never verified"
            time.sleep(0.1)
        # A token of the retired key is refused now; asking again within a minute for the same
        # missing kid does not read the JWKS again.
        old = SigningKey("RS256")
        reads = idp.jwks_reads
        for _ in range(3):
            assert exchange(bootstrap, idp.token("bob", key=old))[0] == INVALID
        time.sleep(0.5)
        assert idp.jwks_reads <= reads + 1
    finally:
        idp.rotate("RS256")


# --- real clients --------------------------------------------------------------------------------

def librdkafka_settings(idp, protocol, ca, client="alice"):
    settings = {"security.protocol": protocol, "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": client,
                "sasl.oauthbearer.client.secret": f"{client}-secret",
                "sasl.oauthbearer.token.endpoint.url": idp.token_url,
                "sasl.oauthbearer.scope": "kafka"}
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = str(ca.ca_pem)
    return settings


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_librdkafka_oidc_round_trip(jwks_broker, idp, ca, protocol):
    from confluent_kafka import Consumer, Producer

    topic = f"oidc-{protocol.lower()}-{uuid.uuid4().hex[:6]}"
    bootstrap = jwks_broker.endpoints[protocol]
    settings = librdkafka_settings(idp, protocol, ca)
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, **settings,
                         "error_cb": errors.append, "message.timeout.ms": 20000})
    delivered = []
    for i in range(5):
        producer.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None] * 5, (delivered, errors)
    consumer = Consumer({"bootstrap.servers": bootstrap, **settings, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]


@pytest.fixture
def short_tokens(idp):
    lifetime = idp.lifetime_s
    idp.lifetime_s = 5
    yield idp
    idp.lifetime_s = lifetime


def expired_sessions(broker, since_line: int) -> list[str]:
    """The broker's "SASL session expired" closes logged after line ``since_line``."""
    return [line for line in broker.log().splitlines()[since_line:]
            if "SASL session" in line and "expired" in line]


# Alone: with 5-second tokens a client re-authenticates just in time only if its token refresh
# runs on time. On a loaded machine a late refresh hands the broker a token with under a second
# left, the next re-authentication falls within Kafka's one-per-second limit and is refused (as
# Kafka refuses it), and the session expires.
@pytest.mark.alone
def test_librdkafka_refreshes_and_reauthenticates_before_expiry(jwks_broker, short_tokens, ca):
    """5-second tokens, 12 seconds of producing on one connection: librdkafka fetches new
    tokens (at 80% of their lifetime) and re-authenticates its open connections before the
    broker's session (the token's exp) ends; nothing fails."""
    from confluent_kafka import Producer

    idp = short_tokens
    logged = len(jwks_broker.log().splitlines())
    topic = f"oidc-reauth-{uuid.uuid4().hex[:6]}"
    issued = idp.tokens_issued
    errors, delivered = [], []
    producer = Producer({"bootstrap.servers": jwks_broker.endpoints["SASL_PLAINTEXT"],
                         **librdkafka_settings(idp, "SASL_PLAINTEXT", ca),
                         "error_cb": errors.append, "linger.ms": 0})
    deadline = time.monotonic() + 12
    i = 0
    while time.monotonic() < deadline:
        producer.produce(topic, b"r%d" % i, on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.25)
        i += 1
    producer.flush(20)
    assert delivered and set(delivered) == {None}, errors
    assert idp.tokens_issued - issued >= 3
    closes = expired_sessions(jwks_broker, logged)
    assert not closes, closes


def java_producer(bootstrap, idp, ca, workdir: Path, records: int, throughput: int,
                  protocol="SASL_PLAINTEXT", client="alice", extra=()):
    """Kafka's ProducerPerformance (the reference jars) logging in with kafka-clients'
    OAuthBearerLoginCallbackHandler (client credentials) through the identity provider."""
    from tools.kafka_ref import run_kafka

    topic = f"oidc-java-{uuid.uuid4().hex[:6]}"
    config = workdir / f"java-{uuid.uuid4().hex[:6]}.properties"
    lines = [f"security.protocol={protocol}", "sasl.mechanism=OAUTHBEARER",
             "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
             "OAuthBearerLoginCallbackHandler",
             f"sasl.oauthbearer.token.endpoint.url={idp.token_url}",
             "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
             f' required clientId="{client}" clientSecret="{client}-secret" scope="kafka";',
             # refresh short-lived tokens at 80% of their lifetime (defaults assume an hour)
             "sasl.login.refresh.min.period.seconds=1", "sasl.login.refresh.buffer.seconds=1",
             *extra]
    if protocol == "SASL_SSL":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={ca.ca_pem}"]
    config.write_text("\n".join(lines) + "\n")
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", "100",
        "--throughput", str(throughput), "--producer.config", str(config),
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
        run_kafka.DEFAULT_VERSION, None, heap="256M",
        # Kafka 4 clients fetch tokens only from URLs this JVM property allows.
        extra=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.token_url}"])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_java_client_credentials(jwks_broker, idp, ca, tmp_path, protocol):
    done = java_producer(jwks_broker.endpoints[protocol], idp, ca, tmp_path, 200, -1, protocol)
    assert done.returncode == 0 and "200 records sent" in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]


@pytest.mark.alone  # as the librdkafka test above
def test_java_client_reauthenticates_before_expiry(jwks_broker, short_tokens, ca, tmp_path):
    idp = short_tokens
    issued = idp.tokens_issued
    logged = len(jwks_broker.log().splitlines())
    # 12 s at 20 records/s: past two refreshes of 5-second tokens
    done = java_producer(jwks_broker.endpoints["SASL_PLAINTEXT"], idp, ca, tmp_path, 240, 20)
    assert done.returncode == 0 and "240 records sent" in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]
    assert idp.tokens_issued - issued >= 3
    closes = expired_sessions(jwks_broker, logged)
    assert not closes, closes


def test_java_client_with_a_refused_token(jwks_broker, idp, ca, tmp_path):
    """An identity provider whose tokens carry another audience: the Java client reports
    Kafka's SaslAuthenticationException with the broker's JSON."""
    audience = idp.audience
    idp.audience = "not-kafka"
    try:
        done = java_producer(jwks_broker.endpoints["SASL_PLAINTEXT"], idp, ca, tmp_path, 1, -1,
                             extra=["max.block.ms=10000"])
    finally:
        idp.audience = audience
    output = done.stdout + done.stderr
    assert "SaslAuthenticationException" in output and "invalid_token" in output, output[-3000:]


# --- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize("props, words", [
    ({"sasl.oauthbearer.jwks.endpoint.url": "http://x/jwks"}, "would not be used"),
    ({f"listener.name.sasl_plaintext.{CALLBACK}": JWKS_VALIDATOR},
     'requires "sasl.oauthbearer.jwks.endpoint.url"'),
])
def test_jwks_settings_without_their_other_half_stop_start_up(tmp_path, props, words):
    from tests.broker_process import BrokerProcess

    settings = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "OAUTHBEARER", **props}
    process = BrokerProcess(tmp_path / "data", settings)
    with pytest.raises(Exception):
        process.start()
    assert words in process.log()


@pytest.mark.parametrize("key, value, words", [
    (f"listener.name.sasl_ssl.{CALLBACK}", "com.example.Handler", "callback handler classes"),
    ("listener.name.sasl_ssl.plain.sasl.server.callback.handler.class", JWKS_VALIDATOR,
     "callback handler classes"),
    ("sasl.oauthbearer.jwt.validator.class", "com.example.V", "plugin"),
    ("sasl.oauthbearer.token.endpoint.url", "http://x", "between brokers"),
])
def test_what_is_refused(key, value, words):
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"listeners": "SASL_SSL://:9093", key: value})
    assert words in str(info.value)


def test_per_listener_and_per_mechanism_settings():
    config = BrokerConfig({
        "listeners": "A://:1,B://:2",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.expected.issuer": "broker-wide",
        "listener.name.a.sasl.oauthbearer.expected.issuer": "listener-a",
        "listener.name.b.oauthbearer.sasl.oauthbearer.expected.issuer": "mechanism-b",
        "listener.name.b.sasl.oauthbearer.expected.issuer": "listener-b"})
    get = lambda listener: config.mechanism_get(  # noqa: E731
        listener, "OAUTHBEARER", "sasl.oauthbearer.expected.issuer")
    assert (get("A"), get("B")) == ("listener-a", "mechanism-b")
    assert config.get("sasl.oauthbearer.clock.skew.seconds") == 30
