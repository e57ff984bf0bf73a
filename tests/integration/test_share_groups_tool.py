"""Kafka 4.4.0's own ``kafka-share-groups.sh`` (org.apache.kafka.tools.consumer.group
.ShareGroupCommand, from the reference jars) against kbroker: --list (with --state), --describe
(--members, --state, --offsets, --verbose), --reset-offsets (dry run and execute), --delete-offsets
and --delete, each output checked against what the tool prints for a real Kafka 4.4.0 broker in
the same situation. The live member heartbeats on raw frames.

The broker runs in this process so that the test can hand its group coordinator an in-memory
persister (tests/coordinator/share_persister_double.py) in place of the share coordinator.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kbroker.testing.inprocess import KafkaBroker
from tests.coordinator.share_persister_double import InMemoryPersister
from tests.integration.clients import Wire, ensure_topic, wait_until

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka's classes)

JAVA_JAR = ROOT / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
SHARE_JOIN = Path(__file__).resolve().parent / "share_java" / "ShareJoin.java"
TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")


def tool(bootstrap: str, *args: str) -> str:
    cmd = run_kafka.java_cmd(TOOL, ["--bootstrap-server", bootstrap, *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return "\n".join(line.rstrip() for line in done.stdout.splitlines()
                     if line.strip() and not line.startswith("SLF4J"))


def table(text: str) -> list:
    return [line.split() for line in text.splitlines()]


@pytest.fixture
def kafka():
    if not JAVA_JAR.exists():
        pytest.fail(f"{JAVA_JAR} is missing: build it with mvn -f compat_tests/java/pom.xml "
                    f"package (make test does)")
    with KafkaBroker({"group.share.heartbeat.interval.ms": 500,
                      "group.share.min.heartbeat.interval.ms": 100,
                      "offsets.topic.num.partitions": 1}) as broker:
        # built on the broker's loop (the coordinators are built on first use)
        broker.call(_on_loop(lambda: broker.broker.coordinators.ensure()))
        broker.broker.group_coordinator.share_persister = InMemoryPersister()
        yield broker


class RawMember:
    """A share-group member on raw frames that keeps heartbeating until stopped (the Java share
    consumer stops heartbeating while this branch has no ShareFetch, see the report)."""

    MEMBER_ID = "AAAAAAAAAAAAAAAAAAAAAA"

    def __init__(self, bootstrap: str, group: str, topic: str):
        self.wire = Wire(bootstrap, client_id="share-join")
        self.wire.api_versions()
        self.group, self.stop = group, threading.Event()
        r = self._hb(0, [topic])
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _hb(self, epoch, topics=None):
        from kbroker.protocol.messages.share_group_heartbeat import \
            ShareGroupHeartbeatRequest as Q
        return self.wire.call(76, 1, Q(group_id=self.group, member_id=self.MEMBER_ID,
                                       member_epoch=epoch, subscribed_topic_names=topics))

    def _run(self):
        while not self.stop.wait(0.3):
            self.epoch = self._hb(self.epoch).member_epoch

    def close(self):
        self.stop.set()
        self.thread.join()
        self._hb(-1)
        self.wire.close()


def test_list_and_describe_a_live_group(kafka):
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "ot1", 2)
    member = RawMember(bootstrap, "kg1", "ot1")
    try:
        def assigned():
            shard = kafka.broker.group_coordinator.shard_for("kg1")
            return any(m.assigned for m in shard.groups["kg1"].members.values())
        wait_until(assigned, timeout=30, message="the member gets its assignment")
        assert tool(bootstrap, "--list") == "kg1"
        assert table(tool(bootstrap, "--list", "--state")) == [["GROUP", "STATE"],
                                                               ["kg1", "Stable"]]
        offsets = [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                   ["kg1", "ot1", "0", "-", "-"], ["kg1", "ot1", "1", "-", "-"]]
        assert table(tool(bootstrap, "--describe", "--group", "kg1")) == offsets
        assert table(tool(bootstrap, "--describe", "--group", "kg1", "--offsets")) == offsets
        assert table(tool(bootstrap, "--describe", "--group", "kg1", "--members")) == [
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            ["kg1", RawMember.MEMBER_ID, "/127.0.0.1", "share-join", "2", "ot1:0,1"]]
        verbose = table(tool(bootstrap, "--describe", "--group", "kg1", "--members",
                             "--verbose"))
        assert verbose[0][5] == "MEMBER-EPOCH" and verbose[1][5] == "3"
        state = table(tool(bootstrap, "--describe", "--group", "kg1", "--state"))
        assert state == [["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"],
                         ["kg1", f"127.0.0.1:{kafka.port}", "(1)", "Stable", "1"]]
        state = table(tool(bootstrap, "--describe", "--group", "kg1", "--state", "--verbose"))
        assert state[0][4:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert state[1][3:] == ["Stable", "3", "3", "1"]
        assert table(tool(bootstrap, "--describe", "--group", "kg1", "--offsets",
                          "--verbose")) == [
            ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"],
            ["kg1", "ot1", "0", "-", "-", "-"], ["kg1", "ot1", "1", "-", "-", "-"]]
        missing = tool(bootstrap, "--describe", "--group", "nope")
        assert "GroupIdNotFoundException: Group nope not found." in missing
    finally:
        member.close()
    assert table(tool(bootstrap, "--list", "--state")) == [["GROUP", "STATE"], ["kg1", "Empty"]]


def test_reset_delete_offsets_and_delete(kafka):
    bootstrap = kafka.bootstrap_servers
    ensure_topic(bootstrap, "ot1", 2)
    new_offsets = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["kg2", "ot1", "0", "0"],
                   ["kg2", "ot1", "1", "0"]]
    assert table(tool(bootstrap, "--reset-offsets", "--group", "kg2", "--topic", "ot1",
                      "--to-earliest", "--dry-run")) == new_offsets
    assert table(tool(bootstrap, "--reset-offsets", "--group", "kg2", "--topic", "ot1",
                      "--to-offset", "0", "--execute")) == new_offsets
    assert table(tool(bootstrap, "--describe", "--group", "kg2", "--offsets")) == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], ["kg2", "ot1", "0", "0", "0"],
        ["kg2", "ot1", "1", "0", "0"]]
    assert table(tool(bootstrap, "--reset-offsets", "--group", "kg2", "--topic", "ot1:1",
                      "--to-latest", "--execute")) == [new_offsets[0], new_offsets[2]]
    assert table(tool(bootstrap, "--delete-offsets", "--group", "kg2", "--topic", "ot1")) == [
        ["TOPIC", "STATUS"], ["ot1", "Successful"]]
    assert tool(bootstrap, "--describe", "--group", "kg2") == \
        "Share group 'kg2' has no offset information."
    assert tool(bootstrap, "--delete", "--group", "kg2") == \
        "Deletion of requested share groups ('kg2') was successful."
    failed = tool(bootstrap, "--delete", "--group", "nope")
    assert "Error: Deletion of some share groups failed:" in failed
    assert "Group 'nope' is not a share group." in failed
    assert tool(bootstrap, "--list") == ""


async def _on_loop(work):
    return work()
