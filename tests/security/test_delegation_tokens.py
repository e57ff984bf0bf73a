"""Delegation tokens (KIP-48) against a real broker process, over real sockets.

Kafka's own ``kafka-delegation-tokens.sh`` (``org.apache.kafka.tools.DelegationTokenCommand`` of
Kafka 4.4.0, from tools/kafka_ref) creates, describes, renews and expires tokens, and the Java
client (Kafka's ProducerPerformance) produces with a token (SCRAM with ``tokenauth=true``) until
it is expired. The rules and Kafka's error codes are checked on the raw wire (our codecs, a
SCRAM client written here that sends the ``tokenauth`` extension): who may create, renew, expire
and describe, the token-authenticated connection that may not ask for tokens, the PLAINTEXT
listener, a broker without ``delegation.token.secret.key``, the periodic removal of expired
tokens, and a token kept across a restart.

librdkafka (confluent-kafka, kcat), kafka-python and aiokafka cannot send SCRAM extensions, so
they cannot authenticate with a token: their matrix cells are n/a
(compat_tests/drivers/registry.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, PatternType, Permission, ResourceType
from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire
from tests.security.conftest import SecureBroker
from tests.security.test_denials import authenticate, handshake

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka)

CREATE, RENEW, EXPIRE, DESCRIBE, CREATE_ACLS, METADATA = 38, 39, 40, 41, 30, 3
SECRET = "kbroker-token-secret"
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret",
         "admin": "admin-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
EXPIRY_MS, MAX_LIFETIME_MS = 600_000, 3_600_000


def start(directory: Path, **overrides) -> SecureBroker:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connection.failed.authentication.delay.ms": "20",
        **{k: str(v) for k, v in overrides.items()}}
    process = BrokerProcess(directory, settings)
    process.start()
    made = SecureBroker(process)
    # The log file is kept across restarts of a data dir: the newest start names the ports.
    line = [entry for entry in process.log().splitlines() if "kbroker ready" in entry][-1]
    made.endpoints = {name: f"127.0.0.1:{port}"
                      for name, port in re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", line)}
    return made


TOKEN_SETTINGS = {
    "delegation.token.secret.key": SECRET,
    "delegation.token.expiry.time.ms": EXPIRY_MS,
    "delegation.token.max.lifetime.ms": MAX_LIFETIME_MS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    made = start(tmp_path_factory.mktemp("tokens") / "data", **TOKEN_SETTINGS)
    yield made
    made.process.kill()


# --- a raw client ---------------------------------------------------------------------------

def login(broker, user: str) -> Wire:
    wire = Wire(broker.endpoints["SASL_PLAINTEXT"])
    assert handshake(wire, "PLAIN").error_code == 0
    assert authenticate(wire, f"\0{user}\0{USERS[user]}".encode()).error_code == 0
    return wire


def scram_token_login(wire: Wire, mechanism: str, token_id: str, password: str,
                      tokenauth: bool = True):
    """SCRAM as Kafka's client does it for a token: the extension ``tokenauth=true`` after the
    nonce in the client-first message; the password is the HMAC in base64. The last
    SaslAuthenticate response (error_code 0 when authenticated)."""
    digest = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
    assert handshake(wire, mechanism).error_code == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={token_id},r={nonce}" + (",tokenauth=true" if tokenauth else "")
    first = authenticate(wire, f"n,,{bare}".encode())
    if first.error_code:
        return first
    server_first = bytes(first.auth_bytes).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(digest(client_key).digest(), auth_message, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return authenticate(wire, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def req(api_key: int, **fields):
    return messages.request_class(api_key)(**fields)


def create(wire: Wire, renewers=(), owner: str | None = None, max_lifetime_ms: int = -1,
           version: int = 3):
    cls = messages.request_class(CREATE)
    kind, _, name = (owner or ":").partition(":")
    return wire.call(CREATE, version, cls(
        owner_principal_type=kind or (None if version >= 3 else ""),
        owner_principal_name=name or (None if version >= 3 else ""),
        renewers=[cls.CreatableRenewers(principal_type=r.partition(":")[0],
                                        principal_name=r.partition(":")[2]) for r in renewers],
        max_lifetime_ms=max_lifetime_ms))


def renew(wire: Wire, mac: bytes, period_ms: int):
    return wire.call(RENEW, 2, req(RENEW, hmac=mac, renew_period_ms=period_ms))


def expire(wire: Wire, mac: bytes, period_ms: int):
    return wire.call(EXPIRE, 2, req(EXPIRE, hmac=mac, expiry_time_period_ms=period_ms))


def describe(wire: Wire, owners=None) -> tuple[int, dict]:
    cls = messages.request_class(DESCRIBE)
    if owners is not None:
        owners = [cls.DescribeDelegationTokenOwner(principal_type=o.partition(":")[0],
                                                   principal_name=o.partition(":")[2])
                  for o in owners]
    response = wire.call(DESCRIBE, 3, cls(owners=owners))
    return response.error_code, {t.token_id: t for t in response.tokens}


def add_acl(broker, resource_type: int, name: str, principal: str, op: int) -> None:
    cls = messages.request_class(CREATE_ACLS)
    with login(broker, "admin") as wire:
        response = wire.call(CREATE_ACLS, 3, cls(creations=[cls.AclCreation(
            resource_type=resource_type, resource_name=name,
            resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
            operation=op, permission_type=Permission.ALLOW)]))
    assert [r.error_code for r in response.results] == [0]


def kafka_hmac(token_id: str) -> bytes:
    return hmac.digest(SECRET.encode(), token_id.encode(), hashlib.sha512)


def now_ms() -> int:
    return int(time.time() * 1000)


# --- the rules, on the wire -----------------------------------------------------------------

def test_create_gives_kafkas_token(broker):
    with login(broker, "alice") as wire:
        before = now_ms()
        made = create(wire, renewers=["User:bob"])
        assert made.error_code == 0
        assert (made.principal_type, made.principal_name) == ("User", "alice")
        assert (made.token_requester_principal_type,
                made.token_requester_principal_name) == ("User", "alice")
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", made.token_id)
        assert bytes(made.hmac) == kafka_hmac(made.token_id)
        assert before <= made.issue_timestamp_ms <= now_ms()
        assert made.expiry_timestamp_ms == made.issue_timestamp_ms + EXPIRY_MS
        assert made.max_timestamp_ms == made.issue_timestamp_ms + MAX_LIFETIME_MS
        short = create(wire, max_lifetime_ms=30_000)
        assert short.max_timestamp_ms == short.issue_timestamp_ms + 30_000
        assert short.expiry_timestamp_ms == short.max_timestamp_ms
        capped = create(wire, max_lifetime_ms=MAX_LIFETIME_MS * 10, version=1)
        assert capped.max_timestamp_ms == capped.issue_timestamp_ms + MAX_LIFETIME_MS
        wrong_type = create(wire, renewers=["Group:bob"])
        assert wrong_type.error_code == Errors.INVALID_PRINCIPAL_TYPE.code
        assert (wrong_type.token_id, bytes(wrong_type.hmac), wrong_type.issue_timestamp_ms) \
            == ("", b"", -1)


def test_plaintext_listener_may_not_ask_for_tokens(broker):
    with Wire(broker.endpoints["PLAINTEXT"]) as wire:
        refused = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.code
        made = create(wire)
        assert made.error_code == refused
        assert (made.principal_name, made.token_requester_principal_name) == ("ANONYMOUS",
                                                                              "ANONYMOUS")
        assert renew(wire, b"x", 1000).error_code == refused
        assert expire(wire, b"x", -1).error_code == refused
        assert describe(wire)[0] == refused
    assert "CreateDelegationToken from User:ANONYMOUS" in broker.log()


def test_renew_and_expire_only_by_owner_or_renewer(broker):
    with login(broker, "alice") as alice, login(broker, "bob") as bob, \
            login(broker, "carol") as carol:
        token = create(alice, renewers=["User:bob"])
        mac = bytes(token.hmac)
        mismatch = Errors.DELEGATION_TOKEN_OWNER_MISMATCH.code
        assert renew(carol, mac, 1000).error_code == mismatch
        assert expire(carol, mac, -1).error_code == mismatch
        assert renew(carol, mac, 1000).expiry_timestamp_ms == -1
        before = now_ms()
        renewed = renew(bob, mac, 120_000)
        assert renewed.error_code == 0
        assert before + 120_000 <= renewed.expiry_timestamp_ms <= now_ms() + 120_000
        # A negative period renews for delegation.token.expiry.time.ms; never past the end.
        assert renew(alice, mac, -1).expiry_timestamp_ms <= now_ms() + EXPIRY_MS
        assert renew(alice, mac, MAX_LIFETIME_MS * 2).expiry_timestamp_ms \
            == token.max_timestamp_ms
        assert describe(alice, ["User:alice"])[1][token.token_id].expiry_timestamp \
            == token.max_timestamp_ms
        # Expire in a second: then it cannot be renewed or expired, only removed.
        soon = expire(bob, mac, 1000)
        assert soon.error_code == 0 and soon.expiry_timestamp_ms <= now_ms() + 1000
        time.sleep(1.2)
        assert renew(alice, mac, 1000).error_code == Errors.DELEGATION_TOKEN_EXPIRED.code
        assert expire(alice, mac, 1000).error_code == Errors.DELEGATION_TOKEN_EXPIRED.code
        unknown = Errors.DELEGATION_TOKEN_NOT_FOUND.code
        assert renew(alice, kafka_hmac("no-such-token"), 1000).error_code == unknown
        assert expire(alice, b"\0" * 64, -1).error_code == unknown
        # Expire at once (a negative period) removes the token, expired or not.
        token2 = create(alice)
        gone = expire(alice, bytes(token2.hmac), -1)
        assert gone.error_code == 0 and abs(gone.expiry_timestamp_ms - now_ms()) < 5000
        assert renew(alice, bytes(token2.hmac), 1000).error_code == unknown
        assert token2.token_id not in describe(alice, None)[1]


def test_creating_for_another_owner_needs_create_tokens(broker):
    with login(broker, "alice") as alice:
        denied = create(alice, owner="User:bob")
        assert denied.error_code == Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED.code
        assert (denied.principal_name, denied.token_requester_principal_name) == ("bob", "alice")
        add_acl(broker, ResourceType.USER, "User:bob", "User:alice", Op.CREATE_TOKENS)
        made = create(alice, owner="User:bob")
        assert made.error_code == 0
        assert (made.principal_name, made.token_requester_principal_name) == ("bob", "alice")
        # The requester sees it (KIP-373), and so does its owner.
        assert made.token_id in describe(alice, None)[1]
        with login(broker, "bob") as bob:
            assert made.token_id in describe(bob, None)[1]


def test_describe_shows_what_the_requester_may_see(broker):
    with login(broker, "alice") as alice, login(broker, "carol") as carol, \
            login(broker, "bob") as bob:
        mine = create(alice)
        shared = create(alice, renewers=["User:bob"])
        error, seen = describe(alice, None)
        assert error == 0 and {mine.token_id, shared.token_id} <= set(seen)
        described = seen[shared.token_id]
        assert bytes(described.hmac) == bytes(shared.hmac)
        assert (described.principal_type, described.principal_name) == ("User", "alice")
        assert [(r.principal_type, r.principal_name) for r in described.renewers] \
            == [("User", "bob")]
        assert (described.issue_timestamp, described.max_timestamp) == (
            shared.issue_timestamp_ms, shared.max_timestamp_ms)
        # A renewer sees the token; someone else, nothing, until an ACL lets them.
        assert set(describe(bob, None)[1]) >= {shared.token_id}
        assert mine.token_id not in describe(bob, None)[1]
        assert mine.token_id not in describe(carol, None)[1]
        # An empty owner list asks for nothing (as Kafka, and as kafka-delegation-tokens.sh
        # --describe without --owner-principal sends); owners filter by owner or renewer.
        assert describe(alice, [])[1] == {}
        assert set(describe(alice, ["User:bob"])[1]) >= {shared.token_id}
        assert mine.token_id not in describe(alice, ["User:bob"])[1]
        add_acl(broker, ResourceType.DELEGATION_TOKEN, mine.token_id, "User:carol", Op.DESCRIBE)
        assert set(describe(carol, None)[1]) >= {mine.token_id}
        assert shared.token_id not in describe(carol, None)[1]
        add_acl(broker, ResourceType.USER, "User:alice", "User:carol", Op.DESCRIBE_TOKENS)
        assert {mine.token_id, shared.token_id} <= set(describe(carol, ["User:alice"])[1])


def test_one_way_tls_may_not_ask_for_tokens_a_client_certificate_may(tmp_path, ca):
    """Kafka's allowTokenRequests: SSL without a client certificate is refused, with one (the
    principal its subject maps to) a token can be made."""
    import ssl

    tls = start(tmp_path / "data", **{
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem),
        "listener.name.ssl.ssl.client.auth": "requested",
        "delegation.token.secret.key": SECRET})
    try:
        def connect(with_certificate: bool) -> Wire:
            wire = Wire(tls.endpoints["SSL"])
            context = ssl.create_default_context(cafile=str(ca.ca_pem))
            if with_certificate:
                context.load_cert_chain(str(ca.client.cert_pem), str(ca.client.key_pem))
            wire.sock = context.wrap_socket(wire.sock, server_hostname="127.0.0.1")
            return wire

        with connect(False) as wire:
            assert create(wire).error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.code
        with connect(True) as wire:
            made = create(wire)
            assert made.error_code == 0
            assert made.principal_name.startswith("CN=alice")
    finally:
        tls.process.kill()


# --- authenticating with a token ------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_token_authenticates_as_its_owner(broker, mechanism):
    with login(broker, "alice") as alice:
        token = create(alice)
    password = base64.b64encode(bytes(token.hmac)).decode()
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        done = scram_token_login(wire, mechanism, token.token_id, password)
        assert done.error_code == 0
        # The token's expiry bounds the session (KIP-368), as Kafka's tokenExpiryTimestamp does.
        assert 0 < done.session_lifetime_ms <= token.expiry_timestamp_ms - token.issue_timestamp_ms
        assert wire.call(METADATA, 12, req(METADATA, topics=None,
                                           allow_auto_topic_creation=False)).brokers
        # A token-authenticated connection may not ask for tokens, nor describe them.
        refused = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.code
        assert create(wire).error_code == refused
        assert describe(wire, None)[0] == refused
        assert renew(wire, bytes(token.hmac), 1000).error_code == refused
        assert expire(wire, bytes(token.hmac), -1).error_code == refused
    failed = Errors.SASL_AUTHENTICATION_FAILED.code
    # The HMAC of another id, an unknown id, and the token id as a plain SCRAM user all fail.
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        wrong = base64.b64encode(kafka_hmac("other")).decode()
        assert scram_token_login(wire, mechanism, token.token_id, wrong).error_code == failed
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert scram_token_login(wire, mechanism, "no-such-token", password).error_code == failed
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert scram_token_login(wire, mechanism, token.token_id, password,
                                 tokenauth=False).error_code == failed
    # Once expired, the token no longer authenticates.
    with login(broker, "alice") as alice:
        assert expire(alice, bytes(token.hmac), -1).error_code == 0
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert scram_token_login(wire, mechanism, token.token_id, password).error_code == failed


def test_expired_tokens_are_removed_and_refused(tmp_path):
    """With delegation.token.expiry.check.interval.ms 500, a token past its end goes soon; one
    past its expiry is refused at once."""
    broker = start(tmp_path / "data", **TOKEN_SETTINGS,
                   **{"delegation.token.expiry.check.interval.ms": 500})
    try:
        _removed_and_refused(broker)
    finally:
        broker.process.kill()


def _removed_and_refused(broker):
    with login(broker, "alice") as alice:
        token = create(alice, max_lifetime_ms=1000)
        password = base64.b64encode(bytes(token.hmac)).decode()
        with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
            assert scram_token_login(wire, "SCRAM-SHA-512", token.token_id,
                                     password).error_code == 0
        deadline = time.monotonic() + 15
        while token.token_id in describe(alice, None)[1]:
            assert time.monotonic() < deadline, "the expired token was not removed"
            time.sleep(0.2)
    with Wire(broker.endpoints["SASL_PLAINTEXT"]) as wire:
        assert scram_token_login(wire, "SCRAM-SHA-512", token.token_id,
                                 password).error_code == Errors.SASL_AUTHENTICATION_FAILED.code
    assert "removed expired delegation tokens" in broker.log()


def test_without_a_secret_key_tokens_are_disabled(tmp_path):
    plain = start(tmp_path / "data")
    try:
        disabled = Errors.DELEGATION_TOKEN_AUTH_DISABLED.code
        with login(plain, "alice") as wire:
            made = create(wire)
            assert made.error_code == disabled and made.token_id == ""
            assert renew(wire, b"x", 1000).error_code == disabled
            assert expire(wire, b"x", -1).error_code == disabled
            assert describe(wire, None)[0] == disabled
        with Wire(plain.endpoints["SASL_PLAINTEXT"]) as wire:
            assert scram_token_login(wire, "SCRAM-SHA-256", "any", "x").error_code \
                == Errors.SASL_AUTHENTICATION_FAILED.code
    finally:
        plain.process.kill()


def test_tokens_survive_a_restart(tmp_path):
    first = start(tmp_path / "data", **{"delegation.token.secret.key": SECRET})
    try:
        with login(first, "alice") as wire:
            token = create(wire, renewers=["User:bob"])
    finally:
        first.process.stop()
    again = start(tmp_path / "data", **{"delegation.token.secret.key": SECRET})
    try:
        with login(again, "alice") as wire:
            seen = describe(wire, None)[1]
        assert seen[token.token_id].expiry_timestamp == token.expiry_timestamp_ms
        assert [r.principal_name for r in seen[token.token_id].renewers] == ["bob"]
        password = base64.b64encode(bytes(token.hmac)).decode()
        with Wire(again.endpoints["SASL_PLAINTEXT"]) as wire:
            assert scram_token_login(wire, "SCRAM-SHA-256", token.token_id,
                                     password).error_code == 0
    finally:
        again.process.kill()


# --- Kafka's tool and the Java client -------------------------------------------------------

def java(main: str, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    cmd = run_kafka.java_cmd(main, list(args), run_kafka.DEFAULT_VERSION, None, heap="256M")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def tokens_tool(broker, config: Path, *args: str) -> subprocess.CompletedProcess:
    return java("org.apache.kafka.tools.DelegationTokenCommand", "--bootstrap-server",
                broker.endpoints["SASL_PLAINTEXT"], "--command-config", str(config), *args)


def plain_config(path: Path, user: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{USERS[user]}";\n')
    return path


def test_kafka_tool_and_java_client(broker, tmp_path):
    alice = plain_config(tmp_path / "alice.properties", "alice")
    bob = plain_config(tmp_path / "bob.properties", "bob")
    carol = plain_config(tmp_path / "carol.properties", "carol")
    made = tokens_tool(broker, alice, "--create", "--max-life-time-period", "-1",
                       "--renewer-principal", "User:bob")
    assert made.returncode == 0, made.stdout + made.stderr
    token_id = re.search(r"tokenId : (\S+)", made.stdout).group(1)
    mac = re.search(rf"^{re.escape(token_id)}\s+(\S+)\s+User:alice\s+User:alice\s+\[User:bob\]",
                    made.stdout, re.M).group(1)
    assert base64.b64decode(mac) == kafka_hmac(token_id)

    described = tokens_tool(broker, bob, "--describe", "--owner-principal", "User:alice")
    assert described.returncode == 0, described.stdout + described.stderr
    # bob renews it: he sees it (with the module's other tokens alice owns and he renews).
    assert re.search(rf"^{re.escape(token_id)}\s+{re.escape(mac)}\s+User:alice", described.stdout,
                     re.M), described.stdout

    renewed = tokens_tool(broker, bob, "--renew", "--hmac", mac, "--renew-time-period", "60000")
    assert renewed.returncode == 0 and "Completed renew operation" in renewed.stdout, \
        renewed.stdout + renewed.stderr
    refused = tokens_tool(broker, carol, "--renew", "--hmac", mac, "--renew-time-period", "1")
    assert "DelegationTokenOwnerMismatchException" in refused.stdout + refused.stderr

    # The Java client authenticates with the token (SCRAM-SHA-512, tokenauth=true) as alice.
    add_acl(broker, ResourceType.TOPIC, "dt-java", "User:alice", Op.ALL)
    add_acl(broker, ResourceType.CLUSTER, "kafka-cluster", "User:alice", Op.IDEMPOTENT_WRITE)
    add_acl(broker, ResourceType.TOPIC, "dt-java", "User:alice", Op.CREATE)
    token_config = tmp_path / "token.properties"
    token_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{token_id}" password="{mac}" tokenauth="true";\n')
    produced = producer_perf(broker, token_config)
    assert produced.returncode == 0 and "20 records sent" in produced.stdout, \
        produced.stdout + produced.stderr
    # ... and may not use it to ask for more tokens.
    again = tokens_tool(broker, token_config, "--create", "--max-life-time-period", "-1")
    assert "UnsupportedByAuthenticationException" in again.stdout + again.stderr, \
        again.stdout + again.stderr

    expired = tokens_tool(broker, alice, "--expire", "--hmac", mac, "--expiry-time-period", "-1")
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout, \
        expired.stdout + expired.stderr
    after = tokens_tool(broker, alice, "--describe", "--owner-principal", "User:alice")
    assert token_id not in after.stdout
    # one record: each send of a refused producer waits out a reconnect backoff (20 took 19 s)
    failed = producer_perf(broker, token_config, timeout_ms=8000, records=1)
    assert "SaslAuthenticationException" in failed.stdout + failed.stderr or \
        "Authentication failed" in failed.stdout + failed.stderr, failed.stdout + failed.stderr


def producer_perf(broker, config: Path, timeout_ms: int = 30000,
                  records: int = 20) -> subprocess.CompletedProcess:
    return java("org.apache.kafka.tools.ProducerPerformance", "--topic", "dt-java",
                "--num-records", str(records), "--record-size", "10", "--throughput", "-1",
                "--producer.config", str(config), "--producer-props",
                f"bootstrap.servers={broker.endpoints['SASL_PLAINTEXT']}",
                f"max.block.ms={timeout_ms}", "acks=all")
