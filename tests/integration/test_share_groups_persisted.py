"""Share groups with the broker's own share coordinator (``__share_group_state``) as the
persister, in a real broker process: a member joins, the group coordinator initializes the share
partitions through the share coordinator and then assigns them; the offsets admin APIs read and
write the share coordinator's state; DeleteGroups deletes it; and after ``kill -9`` the group,
its assignment and its initialized partitions come back from ``__consumer_offsets``."""

from __future__ import annotations


from kbroker.protocol import messages
from tests import java_source
from tests.integration.clients import Wire, ensure_topic, wait_until

BROKER = {"group.share.heartbeat.interval.ms": 200,
          "group.share.min.heartbeat.interval.ms": 100,
          "group.share.assignment.interval.ms": 0,
          "offsets.topic.num.partitions": 2,
          "share.coordinator.state.topic.num.partitions": 2}


def hb(wire, group, member, epoch, topics=None):
    Q = messages.request_class(76)
    return wire.call(76, 1, Q(group_id=group, member_id=member, member_epoch=epoch,
                              subscribed_topic_names=topics))


def assigned(r) -> dict:
    if r.assignment is None:
        return {}
    return {t.topic_id: sorted(t.partitions) for t in r.assignment.topic_partitions}


def describe_offsets(wire, group):
    DO = messages.request_class(90)
    g = wire.call(90, 1, DO(groups=[DO.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None)])).groups[0]
    return g.error_code, sorted((t.topic_name, p.partition_index, p.start_offset, p.lag)
                                for t in g.topics for p in t.partitions)


def test_share_group_over_the_share_coordinator(broker_factory, tmp_path):
    broker = broker_factory(BROKER, data_dir=tmp_path / "data")
    ensure_topic(broker.bootstrap, "pq", 2)
    with Wire(broker.bootstrap, timeout=30) as wire:
        wire.api_versions()
        r = wait_until(lambda: _joined(wire), timeout=30, message="the coordinator loads")
        epoch = r.member_epoch

        def gets_partitions():
            nonlocal epoch
            r = hb(wire, "pg", "m1", epoch)
            epoch = r.member_epoch
            return assigned(r) or None
        got = wait_until(gets_partitions, timeout=30,
                         message="the share partitions are initialized, then assigned")
        assert list(got.values()) == [[0, 1]]
        topic_id = next(iter(got))
        assert describe_offsets(wire, "pg") == (0, [("pq", 0, -1, -1), ("pq", 1, -1, -1)])
        assert hb(wire, "pg", "m1", -1).member_epoch == -1
        AO = messages.request_class(91)
        r = wire.call(91, 0, AO(group_id="pg", topics=[AO.AlterShareGroupOffsetsRequestTopic(
            topic_name="pq", partitions=[AO.AlterShareGroupOffsetsRequestPartition(
                partition_index=1, start_offset=0)])]))
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        assert describe_offsets(wire, "pg") == (0, [("pq", 0, -1, -1), ("pq", 1, 0, 0)])
    broker.kill()
    broker = broker_factory(BROKER, data_dir=tmp_path / "data")
    with Wire(broker.bootstrap, timeout=30) as wire:
        wire.api_versions()

        def described():
            code, rows = describe_offsets(wire, "pg")
            return rows if code == 0 and rows else None
        rows = wait_until(described, timeout=30, message="both coordinators reload")
        assert rows == [("pq", 0, -1, -1), ("pq", 1, 0, 0)]       # kept across kill -9
        r = hb(wire, "pg", "m2", 0, ["pq"])
        assert r.error_code == 0 and assigned(r) == {topic_id: [0, 1]}  # initialized: at once
        assert hb(wire, "pg", "m2", -1).error_code == 0
        DG = messages.request_class(42)
        r = wire.call(42, 2, DG(groups_names=["pg"]))
        assert [(x.group_id, x.error_code) for x in r.results] == [("pg", 0)]
        assert describe_offsets(wire, "pg") == (0, [])


def _joined(wire):
    r = hb(wire, "pg", "m1", 0, ["pq"])
    return r if r.error_code == 0 else None


def test_java_share_consumer_over_the_share_coordinator(broker_factory, tmp_path):
    """A Java KafkaShareConsumer joins a broker process whose share partitions are initialized
    by its own share coordinator, and is described with its assignment."""
    import shutil
    import subprocess
    from pathlib import Path

    import pytest
    root = Path(__file__).resolve().parents[2]
    jar = root / "compat_tests" / "java" / "target" / "kbroker-java-driver.jar"
    if shutil.which("java") is None:
        pytest.skip("needs a JDK")
    if not jar.exists():
        pytest.fail(f"{jar} is missing: build it with mvn -f compat_tests/java/pom.xml package")
    broker = broker_factory(BROKER, data_dir=tmp_path / "data")
    ensure_topic(broker.bootstrap, "jq", 3)
    process = subprocess.Popen(
        [*java_source.command(Path(__file__).parent / "share_java" / "ShareJoin.java", str(jar)),
         broker.bootstrap, "jg", "jq", "15"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        SD = messages.request_class(77)
        with Wire(broker.bootstrap, timeout=30) as wire:
            wire.api_versions()

            def member():
                g = wire.call(77, 1, SD(group_ids=["jg"])).groups[0]
                if g.error_code or not g.members:
                    return None
                m = g.members[0]
                parts = [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions]
                return (m.client_id, parts) if parts else None
            assert wait_until(member, timeout=60) == ("share-join", [("jq", [0, 1, 2])])
        out, _ = process.communicate(timeout=60)
        assert "polling" in out and "closed" in out, out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
