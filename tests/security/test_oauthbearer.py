"""SASL/OAUTHBEARER with Kafka's unsecured JWS validator: the mechanism on its own (bytes in,
bytes out), the exchange over a raw socket (the JSON error challenge, the client's 0x01 ack, the
failure), and real clients — confluent-kafka (librdkafka's built-in unsecured JWT), kafka-python
and aiokafka (a token provider), Java (its unsecured login callback handler) — whose principal
reaches the ACL authorizer as ``User:<sub>``."""

from __future__ import annotations

import time
import uuid

import pytest

from kbroker.protocol.errors import Errors
from kbroker.security.sasl import AuthenticationFailed, InvalidCredentials
from kbroker.security.sasl.oauthbearer import OAuthBearerServer, ValidatorOptions
from tests.integration.clients import Wire
from tests.security.clients import CLIENTS, java_oauth_producer_perf, round_trip, unsecured_jwt
from tests.security.conftest import _broker_factory
from tests.security.test_denials import METADATA, authenticate, handshake, metadata_request

NOW = 1_800_000_000  # seconds; the unit tests' clock


def initial_response(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def claims(**more):
    return {"sub": "alice", "iat": NOW - 10, "exp": NOW + 60, **more}


def server(**options) -> OAuthBearerServer:
    return OAuthBearerServer(ValidatorOptions(options), clock=lambda: NOW)


# --- the mechanism ------------------------------------------------------------------------------

def test_valid_token_authenticates_as_its_subject():
    mech = server()
    token = unsecured_jwt(claims(scope=["read", "write"]))
    assert mech.evaluate(initial_response(token, extensions="\x01traceId=abc 1")) == b""
    assert mech.complete and mech.authorization_id == "alice"
    assert mech.credential_expiry_ms == (NOW + 60) * 1000


@pytest.mark.parametrize("token", [
    unsecured_jwt(claims(exp=NOW - 1)),  # expired
    unsecured_jwt(claims(exp=NOW)),  # "on or after" the expiry is expired
    unsecured_jwt({"sub": "alice", "iat": NOW}),  # no exp
    unsecured_jwt(claims(iat=NOW + 5)),  # issued in the future
    unsecured_jwt(claims(iat=NOW + 70)),  # exp not after iat (and iat in the future)
    unsecured_jwt({"iat": NOW, "exp": NOW + 60}),  # no sub
    unsecured_jwt(claims(sub="  ")),  # blank sub
    unsecured_jwt(claims(sub=7)),  # sub not a string
    unsecured_jwt(claims(exp="soon")),  # exp not a number
    unsecured_jwt(claims(), header={"alg": "HS256"}),  # signed algorithms are not unsecured
    unsecured_jwt(claims()) + "c2lnbmF0dXJl",  # a signature
    unsecured_jwt(claims())[:-1],  # two parts
    "e30.e30.e30.",  # four parts
    "bm90IGpzb24.e30.",  # not JSON
    "W10.e30.",  # JSON, not an object
])
def test_invalid_tokens_get_the_json_challenge_then_fail(token):
    mech = server()
    assert mech.evaluate(initial_response(token)) == b'{"status":"invalid_token"}'
    assert not mech.complete
    with pytest.raises(AuthenticationFailed) as info:
        mech.evaluate(b"\x01")  # the client's acknowledgement
    assert str(info.value) == '{"status":"invalid_token"}'
    assert info.value.detail  # the reason, for the broker's log


def test_validator_options_from_the_jaas_entry():
    token = unsecured_jwt({"user": "bob", "exp": NOW + 60, "roles": "kafka"})
    mech = server(unsecuredValidatorPrincipalClaimName="user",
                  unsecuredValidatorScopeClaimName="roles",
                  unsecuredValidatorRequiredScope="kafka")
    assert mech.evaluate(initial_response(token)) == b"" and mech.authorization_id == "bob"
    mech = server(unsecuredValidatorRequiredScope="kafka admin")
    challenge = mech.evaluate(initial_response(unsecured_jwt(claims(scope=["kafka"]))))
    assert challenge == b'{"status":"insufficient_scope", "scope":"[kafka, admin]"}'
    # Clock skew: a token expired 1 s ago passes with 2 s of allowed skew.
    mech = server(unsecuredValidatorAllowableClockSkewMs="2000")
    assert mech.evaluate(initial_response(unsecured_jwt(claims(exp=NOW - 1)))) == b""
    for bad in ("-1", "soon"):
        with pytest.raises(ValueError):
            ValidatorOptions({"unsecuredValidatorAllowableClockSkewMs": bad})


@pytest.mark.parametrize("message", [
    b"", b"\x01",  # an ack with no error outstanding is just a malformed message
    b"n,,auth=Bearer x.y.",  # no ^A separators
    b"n,,\x01auth=Bearer x.y.\x01",  # truncated: the final ^A is missing
    b"n,,\x01\x01",  # no auth
    b"n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01",  # another scheme
    b"n,,\x01auth=Bearer bad token\x01\x01",
    b"p=tls-unique,,\x01auth=Bearer a.b.\x01\x01",  # channel binding
    b"n,,\x01auth=Bearer a.b.\x011bad=x\x01\x01",  # extension key not letters
    b"\xff\xfe\x01auth=Bearer a.b.\x01\x01",
])
def test_malformed_initial_responses_fail_at_once(message):
    with pytest.raises(InvalidCredentials):
        server().evaluate(message)


def test_authorization_id_must_match_the_principal():
    token = unsecured_jwt(claims())
    assert server().evaluate(initial_response(token, authzid="alice")) == b""
    with pytest.raises(AuthenticationFailed) as info:
        server().evaluate(initial_response(token, authzid="bob"))
    assert "authorization id (bob)" in str(info.value)


# --- a broker -----------------------------------------------------------------------------------

SCOPED_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
               "unsecuredValidatorRequiredScope=\"kafka\";")
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret";')


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory, ca):
    """SASL_PLAINTEXT and SASL_SSL with OAUTHBEARER (and PLAIN for the admin), ACLs on; alice
    may do anything on topics and groups named oauth-*. SASL_SSL requires the scope "kafka"."""
    make, started = _broker_factory(tmp_path_factory.mktemp("oauth"))
    broker = make({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS_PLAIN,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            "unsecuredValidatorAllowableClockSkewMs=\"1000\";",
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": SCOPED_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "connection.failed.authentication.delay.ms": "20"})
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    admin = AdminClient({"bootstrap.servers": broker.endpoints["SASL_PLAINTEXT"],
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": "admin-secret"})
    bindings = [AclBinding(rtype, "oauth-", ResourcePatternType.PREFIXED, "User:alice", "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
                for rtype in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in admin.create_acls(bindings).values():
        future.result(20)
    broker.admin = admin
    yield broker
    for process in started:
        process.kill()


def test_raw_exchange(oauth_broker):
    now = int(time.time())
    with Wire(oauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        token = unsecured_jwt({"sub": "alice", "iat": now, "exp": now + 60})
        response = authenticate(wire, initial_response(token))
        assert response.error_code == 0 and response.auth_bytes == b""
        # The session is bounded by the token's expiry (KIP-368), even without
        # connections.max.reauth.ms.
        assert 50_000 < response.session_lifetime_ms <= 60_000
        assert wire.call(METADATA, 12, metadata_request()).brokers
    with Wire(oauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:  # expired token
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        token = unsecured_jwt({"sub": "alice", "iat": now - 120, "exp": now - 60})
        response = authenticate(wire, initial_response(token))
        assert response.error_code == 0 and response.auth_bytes == b'{"status":"invalid_token"}'
        response = authenticate(wire, b"\x01")
        assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert response.error_message == '{"status":"invalid_token"}'
        assert wire.closed_by_broker()
    with Wire(oauth_broker.endpoints["SASL_PLAINTEXT"]) as wire:  # malformed first message
        assert handshake(wire, "OAUTHBEARER").error_code == 0
        response = authenticate(wire, b"n,,\x01auth=Bearer a.b.")
        assert response.error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert response.error_message == ("Authentication failed during authentication due to "
                                          "invalid credentials with SASL mechanism OAUTHBEARER")
        assert wire.closed_by_broker()
    assert oauth_broker.alive()


def create_topic(broker, name):
    from confluent_kafka.admin import NewTopic

    broker.admin.create_topics([NewTopic(name, 1, 1)])[name].result(20)


def _oauth_settings(ca, protocol, principal="alice", scope=True):
    config = f"principal={principal}"
    if scope and protocol == "SASL_SSL":
        config += " scope=kafka,other"
    settings = {"security.protocol": protocol, "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.config": config, "enable.sasl.oauthbearer.unsecure.jwt": True}
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = str(ca.ca_pem)
    return settings


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("client", CLIENTS)
def test_clients(oauth_broker, ca, client, protocol):
    topic = f"oauth-{protocol.lower()}-{client}"
    create_topic(oauth_broker, topic)
    got = round_trip(client, oauth_broker.endpoints[protocol], topic,
                     _oauth_settings(ca, protocol))
    assert got == [f"{client}-{i}".encode() for i in range(5)]


def test_principal_reaches_the_authorizer(oauth_broker, ca):
    """alice's ACLs cover oauth-*; the token's subject is what the authorizer sees."""
    from confluent_kafka import KafkaError, Producer

    denied = f"other-{uuid.uuid4().hex[:8]}"
    create_topic(oauth_broker, denied)

    def produce(principal, topic):
        errors = []
        producer = Producer({"bootstrap.servers": oauth_broker.endpoints["SASL_PLAINTEXT"],
                             **_oauth_settings(ca, "SASL_PLAINTEXT", principal),
                             "message.timeout.ms": 10000, "retries": 0})
        producer.produce(topic, b"v", callback=lambda err, msg: errors.append(err))
        producer.flush(20)
        return None if errors[0] is None else errors[0].code()

    allowed = f"oauth-acl-{uuid.uuid4().hex[:8]}"
    create_topic(oauth_broker, allowed)
    assert produce("alice", allowed) is None
    assert produce("alice", denied) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce("mallory", allowed) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce("admin", denied) is None  # a super user, by token subject alone


def test_java_client(oauth_broker, ca, tmp_path):
    """kafka-clients' own OAUTHBEARER login (OAuthBearerUnsecuredLoginCallbackHandler, the
    default) against kbroker, through ProducerPerformance from the reference Kafka jars."""
    topic = f"oauth-java-{uuid.uuid4().hex[:6]}"
    create_topic(oauth_broker, topic)
    done = java_oauth_producer_perf(
        oauth_broker.endpoints["SASL_SSL"], ca.ca_pem, tmp_path,
        ["--topic", topic, "--num-records", "200", "--record-size", "100", "--throughput", "-1"],
        ["acks=all"], scope="kafka")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "200 records sent" in done.stdout, done.stdout + done.stderr


def test_rejected_token_reaches_real_clients(oauth_broker, ca, tmp_path):
    """A token without the listener's required scope: librdkafka and Java both send the 0x01
    acknowledgement to the broker's JSON challenge and report Kafka's failure."""
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": oauth_broker.endpoints["SASL_SSL"],
                         **_oauth_settings(ca, "SASL_SSL", scope=False),
                         "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and "insufficient_scope" in errors[0].str(), errors
    assert '"scope":"[kafka]"' in errors[0].str()

    done = java_oauth_producer_perf(
        oauth_broker.endpoints["SASL_SSL"], ca.ca_pem, tmp_path,
        ["--topic", "oauth-denied", "--num-records", "1", "--record-size", "10",
         "--throughput", "-1"], ["max.block.ms=10000"])
    output = done.stdout + done.stderr
    assert "SaslAuthenticationException" in output and "insufficient_scope" in output, output
