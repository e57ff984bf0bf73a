"""GSSAPI (Kerberos) with a real KDC: MIT Kerberos from Debian, a throwaway realm on 127.0.0.1
(kbroker.testing.kdc), keytabs for the broker (kafka/localhost) and the clients.

- raw exchanges with MIT's GSS-API (python-gssapi) as the client: a ticket for the broker
  authenticates, the principal maps through sasl.kerberos.principal.to.local.rules (checked by
  the authorizer: an ACL for the mapped name only); a malformed token and a ticket the broker's
  keytab cannot decrypt (the service key changed: a wrong keytab) get Kafka's
  SASL_AUTHENTICATION_FAILED message, the broker keeps serving;
- the Java client (JAAS Krb5LoginModule with a keytab) and librdkafka (kcat, Debian's librdkafka
  with Cyrus SASL's GSSAPI plugin) produce and consume over SASL_PLAINTEXT and SASL_SSL;
- Kafka's principal-to-local rules, unit by unit;
- configuration refusals.

confluent-kafka's wheels bundle a librdkafka built without Cyrus SASL ("No provider for SASL
mechanism GSSAPI"), so librdkafka's GSSAPI is exercised through kcat.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import uuid

import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.protocol.errors import Errors
from kbroker.config.kerberos_rules import KerberosName, NoMatchingRule, ShortNamer
from kbroker.testing.kdc import TestKdc
from tests.integration.clients import Wire
from tests.broker_process import BrokerProcess
from tests.security.conftest import SecureBroker
from tests.security.test_denials import METADATA, authenticate, handshake, metadata_request

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
FAILED = ("Authentication failed during authentication due to invalid credentials with SASL "
          "mechanism GSSAPI")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def kdc(tmp_path_factory):
    kdc = TestKdc(tmp_path_factory.mktemp("kdc")).start()
    saved = {k: os.environ.get(k) for k in kdc.env}
    os.environ.update(kdc.env)  # this process (python-gssapi) and the brokers it starts
    kdc.broker_keytab = kdc.keytab("kafka/localhost")
    kdc.alice_keytab = kdc.keytab("alice")
    kdc.bob_keytab = kdc.keytab("bob/tools.example")
    yield kdc
    kdc.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def broker_settings(kdc, keytab, ports, ca) -> dict:
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "advertised.listeners": ",".join(f"{n}://localhost:{p}" for n, p in ports.items()),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules":
            r"RULE:[2:$1@$0](bob@KBROKER\.TEST)s/bob@.*/robert/,DEFAULT",
        **{f"listener.name.{n.lower()}.gssapi.sasl.jaas.config":
           f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" '
           f'principal="kafka/localhost@{kdc.realm}";' for n in ports if n != "PLAINTEXT"},
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true", "super.users": "User:ANONYMOUS",
        "connection.failed.authentication.delay.ms": "20"}


def start_broker(directory, settings, ports) -> SecureBroker:
    process = BrokerProcess(directory, {
        **settings, "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in ports)})
    broker = SecureBroker(process.start())
    broker.ports = ports
    return broker


@pytest.fixture(scope="module")
def gssapi_broker(tmp_path_factory, ca, kdc):
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    broker = start_broker(tmp_path_factory.mktemp("gssapi") / "data",
                          broker_settings(kdc, kdc.broker_keytab, ports, ca), ports)
    yield broker
    broker.process.kill()


def client_context(principal: str, keytab, service_host="localhost", mutual=True):
    import gssapi

    creds = gssapi.Credentials(
        name=gssapi.Name(principal, gssapi.NameType.kerberos_principal), usage="initiate",
        store={"client_keytab": str(keytab), "ccache": f"MEMORY:{uuid.uuid4().hex}"})
    return gssapi.SecurityContext(
        name=gssapi.Name(f"kafka@{service_host}", gssapi.NameType.hostbased_service),
        creds=creds, usage="initiate",
        flags=[gssapi.RequirementFlag.mutual_authentication] if mutual else
        [gssapi.RequirementFlag.integrity, gssapi.RequirementFlag.confidentiality])


def gssapi_exchange(port: int, context, corrupt: bool = False, rounds: list | None = None):
    """SaslHandshake + SaslAuthenticate rounds of RFC 4752 with MIT's GSS-API as the client;
    returns (error code, error message) of the last SaslAuthenticate. ``rounds`` collects each
    SaslAuthenticate's (token sent, challenge received)."""
    rounds = [] if rounds is None else rounds
    with Wire(f"127.0.0.1:{port}") as wire:
        assert handshake(wire, "GSSAPI").error_code == 0
        token = context.step()
        if corrupt:
            token = token[:40] + bytes(b ^ 0x5A for b in token[40:80]) + token[80:]
        while True:
            response = authenticate(wire, token)
            rounds.append((token, response.auth_bytes))
            if response.error_code:
                assert wire.closed_by_broker()
                return response.error_code, response.error_message
            challenge = response.auth_bytes
            if not context.complete:
                token = context.step(challenge) or b""
                continue
            if not challenge:
                token = b""
                continue
            offer = context.unwrap(challenge).message
            assert offer[0] & 1, "no security layer offered"
            answer = context.wrap(b"\x01" + offer[1:4], False).message
            response = authenticate(wire, answer)
            rounds.append((answer, response.auth_bytes))
            if response.error_code == 0:
                assert wire.call(METADATA, 12, metadata_request()).brokers
                return 0, None
            return response.error_code, response.error_message


def test_a_kerberos_ticket_authenticates(gssapi_broker, kdc):
    assert gssapi_exchange(gssapi_broker.ports["SASL_PLAINTEXT"],
                           client_context(f"alice@{kdc.realm}", kdc.alice_keytab)) == (0, None)


def test_without_mutual_authentication_the_offer_answers_the_first_token(gssapi_broker, kdc):
    """A client that asks for no mutual authentication gets no AP-REP: Java's GssKrb5Server then
    answers its first token with the wrapped security layer offer at once (franz-go's
    sasl/kerberos expects exactly that), not with an empty challenge."""
    rounds = []
    context = client_context(f"alice@{kdc.realm}", kdc.alice_keytab, mutual=False)
    assert gssapi_exchange(gssapi_broker.ports["SASL_PLAINTEXT"], context,
                           rounds=rounds) == (0, None)
    # the first token -> the offer (unwrapped and checked by gssapi_exchange); the answer -> done
    assert len(rounds) == 2, [(len(sent), len(got)) for sent, got in rounds]
    assert rounds[0][1], "an empty challenge instead of the offer"


def test_principal_to_local_rules_reach_the_authorizer(gssapi_broker, kdc, tmp_path):
    """bob/tools.example@REALM maps to robert by the listener's rule: an ACL for User:robert
    lets kcat (as bob) produce; one for User:bob would not."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       NewTopic, ResourcePatternType, ResourceType)

    topic = f"krb-acl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{gssapi_broker.ports['PLAINTEXT']}"})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:robert",
                         "*", AclOperation.ALL, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(20)
    assert kcat_produce(gssapi_broker, kdc, tmp_path, "SASL_PLAINTEXT", topic,
                        f"bob/tools.example@{kdc.realm}", kdc.bob_keytab).returncode == 0
    denied = kcat_produce(gssapi_broker, kdc, tmp_path, "SASL_PLAINTEXT", topic,
                          f"alice@{kdc.realm}", kdc.alice_keytab)
    assert denied.returncode != 0 and b"authoriz" in denied.stderr.lower(), denied.stderr


def test_a_malformed_token_is_refused(gssapi_broker, kdc):
    code, message = gssapi_exchange(gssapi_broker.ports["SASL_PLAINTEXT"],
                                    client_context(f"alice@{kdc.realm}", kdc.alice_keytab),
                                    corrupt=True)
    assert (code, message) == (Errors.SASL_AUTHENTICATION_FAILED.code, FAILED)
    assert gssapi_broker.alive()


def test_a_wrong_keytab_is_refused(tmp_path_factory, ca, kdc):
    """The broker's keytab holds an old key of its principal (the KDC's changed since): tickets
    for it do not decrypt, each login gets Kafka's message and the reason is logged."""
    stale = kdc.keytab("kafka/localhost", path=kdc.dir / "stale.keytab")
    kdc.kadmin("cpw -randkey -keepold kafka/localhost")  # new key; the stale keytab lacks it
    fresh = kdc.keytab("kafka/localhost", path=kdc.dir / "fresh.keytab")
    directory = tmp_path_factory.mktemp("stale")
    ports = {"SASL_PLAINTEXT": free_port()}
    started = []
    try:
        broker = start_broker(directory / "d1", broker_settings(kdc, stale, ports, ca), ports)
        started.append(broker.process)
        code, message = gssapi_exchange(ports["SASL_PLAINTEXT"],
                                        client_context(f"alice@{kdc.realm}", kdc.alice_keytab))
        assert (code, message) == (Errors.SASL_AUTHENTICATION_FAILED.code, FAILED)
        assert "failed authentication" in broker.log() and "GSSAPI" in broker.log()
        broker.process.kill()
        broker = start_broker(directory / "d2", broker_settings(kdc, fresh, ports, ca), ports)
        started.append(broker.process)
        assert gssapi_exchange(ports["SASL_PLAINTEXT"], client_context(
            f"alice@{kdc.realm}", kdc.alice_keytab)) == (0, None)
    finally:
        for process in started:
            process.kill()
        # The module's broker reads its keytab file when it verifies a ticket: give it the new
        # key too.
        kdc.keytab("kafka/localhost", path=kdc.broker_keytab)


# --- real clients ---------------------------------------------------------------------------------

def kcat_env(tmp_path, name):
    return {**os.environ, "KRB5CCNAME": f"FILE:{tmp_path}/{name}.ccache"}


def kcat_security(broker, kdc, protocol, principal, keytab, ca):
    out = ["-X", f"security.protocol={protocol}", "-X", "sasl.mechanisms=GSSAPI",
           "-X", "sasl.kerberos.service.name=kafka", "-X", f"sasl.kerberos.keytab={keytab}",
           "-X", f"sasl.kerberos.principal={principal}"]
    if protocol == "SASL_SSL":
        out += ["-X", f"ssl.ca.location={ca.ca_pem}"]
    return out


def kcat_produce(broker, kdc, tmp_path, protocol, topic, principal, keytab, ca=None):
    return subprocess.run(
        ["kcat", "-P", "-b", f"localhost:{broker.ports[protocol]}", "-t", topic,
         "-X", "message.timeout.ms=15000",
         *kcat_security(broker, kdc, protocol, principal, keytab, ca)],
        input=b"k1\nk2\nk3\n", capture_output=True, env=kcat_env(tmp_path, "kcat"), timeout=60)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_librdkafka_through_kcat(gssapi_broker, kdc, ca, tmp_path, protocol):
    assert shutil.which("kcat"), "kcat is installed by scripts/install-test-deps.sh"
    topic = f"krb-kcat-{protocol.lower()}-{uuid.uuid4().hex[:6]}"
    done = kcat_produce(gssapi_broker, kdc, tmp_path, protocol, topic, f"alice@{kdc.realm}",
                        kdc.alice_keytab, ca)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    got = subprocess.run(
        ["kcat", "-C", "-b", f"localhost:{gssapi_broker.ports[protocol]}", "-t", topic, "-o",
         "beginning", "-e", "-q",
         *kcat_security(gssapi_broker, kdc, protocol, f"alice@{kdc.realm}", kdc.alice_keytab,
                        ca)],
        capture_output=True, env=kcat_env(tmp_path, "kcat"), timeout=60)
    assert got.stdout.split() == [b"k1", b"k2", b"k3"], got.stderr.decode()[-2000:]


def java_producer(broker, kdc, ca, workdir, protocol, principal, keytab, records=100):
    from tools.kafka_ref import run_kafka

    topic = f"krb-java-{uuid.uuid4().hex[:6]}"
    config = workdir / f"java-{uuid.uuid4().hex[:6]}.properties"
    lines = [f"security.protocol={protocol}", "sasl.mechanism=GSSAPI",
             "sasl.kerberos.service.name=kafka",
             f'sasl.jaas.config={KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" '
             f'principal="{principal}";']
    if protocol == "SASL_SSL":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={ca.ca_pem}"]
    config.write_text("\n".join(lines) + "\n")
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(records), "--record-size", "100",
        "--throughput", "-1", "--producer.config", str(config),
        "--producer-props", f"bootstrap.servers=localhost:{broker.ports[protocol]}", "acks=all",
        "max.block.ms=20000"],
        run_kafka.DEFAULT_VERSION, None, heap="256M",
        extra=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_java_client_with_a_keytab(gssapi_broker, kdc, ca, tmp_path, protocol):
    done = java_producer(gssapi_broker, kdc, ca, tmp_path, protocol, f"alice@{kdc.realm}",
                         kdc.alice_keytab)
    assert done.returncode == 0 and "100 records sent" in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]


# --- units ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("principal, rules, short", [
    ("alice@EXAMPLE.COM", ["DEFAULT"], "alice"),
    ("kafka/broker1.example.com@EXAMPLE.COM", ["DEFAULT"], "kafka"),
    ("alice@OTHER.COM", ["RULE:[1:$1@$0](.*@OTHER\\.COM)s/@.*//", "DEFAULT"], "alice"),
    ("App.Service@EXAMPLE.COM", ["RULE:[1:$1]/L"], "app.service"),
    ("kafka/host@EXAMPLE.COM", ["RULE:[2:$1-$2](kafka-.*)s/-/_/g/U"], "KAFKA_HOST"),
    ("alice", ["DEFAULT"], "alice"),
])
def test_principal_to_local_rules(principal, rules, short):
    assert ShortNamer(rules, "EXAMPLE.COM").short_name(KerberosName.parse(principal)) == short


@pytest.mark.parametrize("principal, rules, words", [
    ("alice@OTHER.COM", ["DEFAULT"], "No rules apply to alice@OTHER.COM"),
    ("kafka/host@EXAMPLE.COM", ["RULE:[2:$1/$2]"], "Non-simple name kafka/host"),
])
def test_principal_to_local_rule_failures(principal, rules, words):
    with pytest.raises(NoMatchingRule) as info:
        ShortNamer(rules, "EXAMPLE.COM").short_name(KerberosName.parse(principal))
    assert words in str(info.value)


@pytest.mark.parametrize("props, words", [
    ({"sasl.kerberos.principal.to.local.rules": "RULE:[1:$1"}, "Invalid rule"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI",
      "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": f'{KRB5} required useKeyTab=true '
      'keyTab="/k";'}, "No serviceName defined"),
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI",
      "sasl.kerberos.service.name": "kafka"}, "has no Kerberos login"),
])
def test_configuration_refusals(props, words):
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert words in str(info.value)


def test_mechanism_prefixed_kerberos_settings():
    config = BrokerConfig({
        "listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI",
        "listener.name.sasl_plaintext.gssapi.sasl.kerberos.service.name": "kafka",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
            f'{KRB5} required useKeyTab=true keyTab="/k" principal="kafka/h@R";'})
    assert config.mechanism_get("SASL_PLAINTEXT", "GSSAPI", "sasl.kerberos.service.name") == \
        "kafka"
