"""The client drivers of the compatibility matrix: one line each.

A driver is a command line that speaks the contract of ``compat_tests/README.md`` (the Java
driver's CLI and JSON-lines events). Every scenario runs against every driver listed in
``DRIVERS``; to add a client, build its driver in ``scripts/install-test-deps.sh`` and add one
``Driver(...)`` line below.

What a driver cannot do is declared, never guessed:

- ``lacks``: the *client* has no such feature (kcat has no CreateTopics). The matrix reports the
  cell as "n/a" with the reason.
- ``todo``: the client has the feature but the *driver* does not implement that part of the
  contract yet. The matrix reports the cell as a "gap" (not passing) with the reason, so the gap is
  visible until someone closes it.

Feature names are the keys of ``FEATURES``. Commands are relative to the repository root.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

FEATURES = {
    "timestamps": "produce --timestamp MS (explicit CreateTime per record)",
    "value-size": "produce --value-size N (values padded to N bytes)",
    "produce-timeout": "produce --timeout-ms MS (give up delivering after MS)",
    "groups": "consume --group G (subscribe, commit at the end)",
    "groups.consumer-protocol": "consume --group G --property group.protocol=consumer (KIP-848)",
    "groups.consumer-protocol-static": "a static member (group.instance.id) on the consumer "
                                       "protocol leaves with member epoch -2 and its instance id",
    "transactions": "produce --transactional-id ID --transaction commit|abort",
    "admin.create-topic": "admin create-topic",
    "admin.delete-topic": "admin delete-topic",
    "admin.create-partitions": "admin create-partitions --topic T --partitions N",
    "admin.describe-configs": "admin describe-configs --topic T",
    "admin.alter-configs": "admin alter-configs --topic T --config k=v",
    "admin.list-offsets": "admin list-offsets --topic T [--timestamp MS]",
    "admin.delete-records": "admin delete-records --topic T --partition P --offset O",
    "admin.move-log-dir": "admin move-log-dir --topic T --partition P --broker B --log-dir D "
                          "(AlterReplicaLogDirs)",
    "security.ssl": "produce/consume over SSL (the broker's CA trusted)",
    "security.sasl-plain": "produce/consume over SASL_SSL with PLAIN",
    "security.sasl-scram-sha-512": "produce/consume over SASL_SSL with SCRAM-SHA-512",
    "security.mtls": "produce/consume over SSL with a client certificate",
    "security.gssapi": "produce/consume over SASL_PLAINTEXT with GSSAPI (Kerberos, a keytab)",
    "security.oauthbearer-jwks": "produce/consume over SASL_PLAINTEXT with OAUTHBEARER, a signed "
                                 "token from an identity provider (client credentials)",
    "security.delegation-token": "produce/consume with a delegation token (SCRAM, tokenauth)",
    "groups.share": "share-consume --group G [--ack implicit|accept|release|reject|hold] "
                    "(a share group member, KIP-932)",
    "telemetry": "the client pushes its own metrics to the broker (KIP-714)",
    "schema-registry.avro": "sr-produce/sr-consume/sr-register --registry URL: Avro values in "
                            "Confluent's wire format through the client's schema-registry "
                            "serializers (compat_tests/test_schema_registry.py)",
    "schema-registry.json": "the same with --format json: JSON Schema, values as JSON text",
    "schema-registry.protobuf": "the same with --format protobuf: a .proto schema, values in "
                                "Protobuf's canonical JSON mapping",
}
NO_LOG_DIR_MOVES = "{client}'s admin client has no AlterReplicaLogDirs (alterReplicaLogDirs)"
NO_KIP_714 = "the client does not implement KIP-714 (GetTelemetrySubscriptions/PushTelemetry)"
NO_TOKENAUTH = ("{client}'s SCRAM client sends no extensions: it cannot send tokenauth=true, so it "
                "cannot authenticate with a delegation token (KIP-48)")
REGISTRY_FEATURES = ("schema-registry.avro", "schema-registry.json", "schema-registry.protobuf")


def no_registry(client: str) -> dict[str, str]:
    why = (f"{client} has no schema-registry client or serializers; applications pair it with "
           "another library's")
    return dict.fromkeys(REGISTRY_FEATURES, why)


NO_CYRUS = ("confluent-kafka's wheels bundle a librdkafka built without Cyrus SASL (\"No provider "
            "for SASL mechanism GSSAPI\"); librdkafka's GSSAPI is the kcat column")



@dataclass(frozen=True)
class Driver:
    name: str                      # short id used in test ids and the report
    client: str                    # the client library under test, as users know it
    command: tuple[str, ...]       # argv prefix; the subcommand and its options follow
    lacks: dict[str, str] = field(default_factory=dict)
    todo: dict[str, str] = field(default_factory=dict)
    client_header: str | None = None   # the h-client header value it writes (default: name)
    # Why the driver cannot run at all here (e.g. not built), or None when it can.
    unavailable: Callable[[], str | None] = lambda: None
    # Options that make `produce` give up after ms (drivers without --timeout-ms use properties).
    timeout_args: Callable[[int], list[str]] = lambda ms: ["--timeout-ms", str(ms)]
    # Options after the command's program, worked out when a process starts (the Java driver's
    # class-data archive, made on first use).
    launch_options: Callable[[], list[str]] = lambda: []
    # The names its --property settings use for security (compat_tests/security.py): Kafka's
    # Java ones, librdkafka's, or the Python clients' keyword arguments.
    config_style: str = "java"

    @property
    def header_value(self) -> str:
        return self.client_header or self.name

    def argv(self, args: list[str]) -> list[str]:
        """The whole command line of ``driver args...``."""
        return [self.command[0], *self.launch_options(), *self.command[1:], *args]

    def why_not(self, feature: str) -> tuple[str, str] | None:
        """("n/a" | "gap", reason) when this driver cannot run ``feature``, else None."""
        if feature in self.lacks:
            return "n/a", self.lacks[feature]
        if feature in self.todo:
            return "gap", self.todo[feature]
        return None


def _needs_file(path: str, how: str) -> Callable[[], str | None]:
    return lambda: None if (ROOT / path).exists() else f"{path} is missing: {how}"


def _needs_program(program: str, how: str) -> Callable[[], str | None]:
    return lambda: None if shutil.which(program) else f"{program} is not installed: {how}"


def _kcat_librdkafka() -> tuple[int, ...] | None:
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    return None if found is None else tuple(map(int, found.groups()))


def _kcat_telemetry_lack() -> dict[str, str]:
    """librdkafka pushes its metrics (KIP-714) from 2.5.0 on."""
    version = _kcat_librdkafka() if shutil.which("kcat") else None
    if version is None or version >= (2, 5, 0):
        return {}
    return {"telemetry": f"kcat links librdkafka {'.'.join(map(str, version))}; librdkafka "
                         "pushes its metrics (KIP-714) from 2.5.0 on"}


def _kcat_scram_lack() -> dict[str, str]:
    """librdkafka before 2.6.1 sends the client nonce twice in SCRAM's client-final message
    (librdkafka#4895); Kafka checks the nonce strictly, as RFC 5802 says, and so does kbroker.
    Debian's kcat links the system librdkafka, so whether kcat can do SCRAM depends on it."""
    if not shutil.which("kcat"):
        return {}
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    if found is None or tuple(map(int, found.groups())) >= (2, 6, 1):
        return {}
    return {"security.sasl-scram-sha-512":
            f"kcat links librdkafka {'.'.join(found.groups())}, whose SCRAM client-final "
            "message repeats the client nonce (fixed in 2.6.1, librdkafka#4895); Apache Kafka "
            "4.3.1 rejects it too (checked: SASL authentication error)"}


NO_SHARE = "{client} has no share consumer (KIP-932 ShareGroupHeartbeat/ShareFetch)"
NO_KIP848 = "{client} has no KIP-848 consumer group protocol (group.protocol=consumer)"
PYTHON = (sys.executable, str(HERE / "python_driver.py"), "--client")
JAVA_JAR = "compat_tests/java/target/kbroker-java-driver.jar"
# Short-lived JVMs: C1 only and the serial collector start fastest.
JAVA = ("java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", JAVA_JAR)


def _java_archive() -> list[str]:
    """A class-data archive of the Java driver's classes (about half its JVMs' start-up), made by
    tools/kafka_ref/run_kafka.py's class_archive on first use next to the jar: the same switch
    (KBROKER_QUICK_TOOL_JVMS=1, set by conftest.py) as Kafka's tools in the tests."""
    if os.environ.get("KBROKER_QUICK_TOOL_JVMS") != "1" or not (ROOT / JAVA_JAR).exists():
        return []
    if str(ROOT / "tools" / "kafka_ref") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
    import run_kafka
    # the training run: a consumer in a group against a port nobody listens on, for 2 s
    archive = run_kafka.class_archive(
        shutil.which("java") or "java", ["-jar", JAVA_JAR], (ROOT / JAVA_JAR).parent, "driver",
        ["consume", "--bootstrap", f"127.0.0.1:{run_kafka.free_port()}", "--topic", "training",
         "--group", "training", "--count", "1", "--timeout-ms", "2000"], ["version"], cwd=str(ROOT))
    return [f"-XX:SharedArchiveFile={archive}", *run_kafka.CDS_QUIET] if archive else []
GO_BIN = "compat_tests/go/bin/kbroker-go-driver"
KCAT_NO_ADMIN = "kcat has no admin API: only metadata (-L) and offset queries (-Q)"
INSTALL = "run scripts/install-test-deps.sh"

DRIVERS: list[Driver] = [
    Driver("confluent", "confluent-kafka (librdkafka)", (*PYTHON, "confluent"),
           lacks={"security.gssapi": NO_CYRUS,
                  "security.delegation-token": NO_TOKENAUTH.format(client="librdkafka"),
                  "admin.move-log-dir": NO_LOG_DIR_MOVES.format(client="confluent-kafka 2.16")},
           config_style="librdkafka"),
    Driver("aiokafka", "aiokafka", (*PYTHON, "aiokafka"), config_style="python",
           lacks={"groups.consumer-protocol": NO_KIP848.format(client="aiokafka 0.14.0") +
                  ": its consumer speaks the classic JoinGroup/SyncGroup protocol only",
                  "telemetry": NO_KIP_714,
                  "groups.share": NO_SHARE.format(client="aiokafka 0.14.0"),
                  **no_registry("aiokafka"),
                  "admin.move-log-dir": NO_LOG_DIR_MOVES.format(client="aiokafka 0.14.0"),
                  "security.delegation-token": NO_TOKENAUTH.format(client="aiokafka 0.14.0")}),
    Driver("kafka-python", "kafka-python", (*PYTHON, "kafka-python"), config_style="python",
           lacks={"groups.consumer-protocol": NO_KIP848.format(client="kafka-python 3.0.12") +
                  ": its KafkaConsumer has no group.protocol setting",
                  "telemetry": NO_KIP_714,
                  "groups.share": NO_SHARE.format(client="kafka-python 3.0.12"),
                  **no_registry("kafka-python"),
                  "security.delegation-token": NO_TOKENAUTH.format(
                      client="kafka-python 3.0.12")}),
    Driver("kcat", "kcat (librdkafka)", (sys.executable, str(HERE / "kcat_driver.py")),
           lacks={"timestamps": "kcat -P cannot set per-message timestamps",
                  "transactions": "kcat has no transactional producer",
                  **{f"admin.{op}": KCAT_NO_ADMIN for op in (
                      "create-topic", "delete-topic", "create-partitions", "describe-configs",
                      "alter-configs", "delete-records", "move-log-dir")},
                  "security.oauthbearer-jwks": "Debian's librdkafka (which kcat links) is "
                                               "built without libcurl: no "
                                               "sasl.oauthbearer.method=oidc",
                  "groups.consumer-protocol": "kcat links the system librdkafka (2.0.2 on "
                  "Debian), which predates KIP-848 support (librdkafka 2.12)",
                  "security.delegation-token": NO_TOKENAUTH.format(client="librdkafka"),
                  "groups.share": "kcat has no share consumer mode, and the system librdkafka "
                  "it links (2.0.2 on Debian) predates librdkafka's ShareConsumer",
                  **dict.fromkeys(REGISTRY_FEATURES, "kcat only deserializes Avro (-s "
                                  "value=avro, through libserdes), never serializes or "
                                  "registers, and Debian's kcat is built without libserdes (no "
                                  "Avro in kcat -V)"),
                  **_kcat_scram_lack(), **_kcat_telemetry_lack()},
           unavailable=_needs_program("kcat", INSTALL), config_style="librdkafka"),
    Driver("java", "Apache Kafka kafka-clients", JAVA,
           unavailable=_needs_file(JAVA_JAR, INSTALL), launch_options=_java_archive,
           lacks=dict.fromkeys(("schema-registry.json", "schema-registry.protobuf"),
                               "the Java driver's registry client (Spring Cloud Stream's "
                               "ConfluentSchemaRegistryClient, the one on Maven Central) "
                               "registers Avro only (\"Only Avro is supported\"); Confluent's "
                               "JSON Schema and Protobuf serializers are not on Maven Central"),
           timeout_args=lambda ms: ["--property", f"max.block.ms={ms}",
                                    "--property", f"request.timeout.ms={ms // 2}",
                                    "--property", f"delivery.timeout.ms={ms}"]),
    Driver("go", "franz-go (kgo + kadm)", (GO_BIN,), unavailable=_needs_file(GO_BIN, INSTALL),
           lacks={"groups.consumer-protocol-static": "franz-go 1.22.2 sends a static member's "
                  "leave (member epoch -2) without its instance id; Kafka 4.4.0 refuses it with "
                  "INVALID_REQUEST as kbroker does, so the restarted member gets "
                  "UNRELEASED_INSTANCE_ID on both"}),
    Driver("kafkajs", "KafkaJS", ("node", "compat_tests/js/driver.js"),
           lacks={"security.gssapi": "KafkaJS has no GSSAPI mechanism (plain, scram, aws, "
                                     "oauthbearer only)",
                  "groups.consumer-protocol": NO_KIP848.format(client="KafkaJS 2.2") +
                  " (classic JoinGroup/SyncGroup only)",
                  "telemetry": NO_KIP_714,
                  "groups.share": NO_SHARE.format(client="KafkaJS 2.2.4"),
                  "admin.move-log-dir": NO_LOG_DIR_MOVES.format(client="KafkaJS 2.2.4"),
                  "security.delegation-token": NO_TOKENAUTH.format(client="KafkaJS 2.2.4"),
                  "schema-registry.protobuf": "@kafkajs/confluent-schema-registry 3.9.0 writes "
                  "Protobuf values without Confluent's message indexes (magic byte, id, then "
                  "the message: wireEncoder.js), and its decoder skips leading zero bytes "
                  "instead of reading them, so Confluent's deserializers cannot read its records "
                  "(checked: the wire-format check of this scenario fails)"},
           unavailable=_needs_file("compat_tests/js/node_modules/kafkajs/package.json", INSTALL)),
    # Spark registers here the same way.
]

BY_NAME = {d.name: d for d in DRIVERS}
assert len(BY_NAME) == len(DRIVERS), "duplicate driver names"
