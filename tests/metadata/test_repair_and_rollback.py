"""Over real sockets: a crash at any step of the metadata pipeline is repaired at start-up; a
creation that fails on disk leaves no metadata; internal topics are protected; fuzzed counts are
refused."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.metadata.local_store import LocalMetadataStore
from kbroker.protocol.errors import Errors
from tests.integration.clients import Wire, build_batch, now_ms
from tests.metadata.helpers import (alter_topic_config, create_partitions, create_topic,
                                    delete_topic, find_group_coordinator)


def partition_dirs(broker, topic: str) -> set[str]:
    return {p.name for p in broker.data_dir.iterdir() if p.is_dir()
            and p.name.rsplit("-", 1)[0] == topic}


def stored_topics(broker) -> set[str]:
    return set(asyncio.run(LocalMetadataStore(str(broker.data_dir)).load()).topics())


# The steps of the controller's pipeline a crash may interrupt (kbroker.metadata.controller):
# before the commit nothing is stored; from the commit on, start-up finishes the change.
CREATE_STEPS = ("decided", "committed", "published", "reconciling", "reconciled")
DELETE_STEPS = ("decided", "committed", "published", "reconciled")


def _crash_during(broker, step: str, write: str, request) -> None:
    """Restart ``broker`` so that it dies at ``step`` of ``write``, send ``request(wire)``, and
    see it die there (the client sees the connection drop)."""
    broker.stop()
    broker.crash_at = (step, write)
    broker.start()
    try:
        with Wire(broker.bootstrap) as wire:
            request(wire)
    except (OSError, EOFError, ConnectionError, AssertionError):
        pass
    assert broker.wait_dead() == 137, broker.log()[-2000:]
    broker.crash_at = None


@pytest.mark.parametrize("step", CREATE_STEPS)
def test_a_creation_interrupted_at_any_step_is_finished_or_absent_after_restart(broker, step):
    _crash_during(broker, step, "creating topic orders",
                  lambda wire: create_topic(wire, "orders", 3))
    broker.start()
    if step == "decided":  # before the commit: nothing was stored, nothing is left
        assert "orders" not in stored_topics(broker)
        assert partition_dirs(broker, "orders") == set()
        with Wire(broker.bootstrap) as wire:
            assert wire.metadata(["orders"]).topics[0].error_code == \
                Errors.UNKNOWN_TOPIC_OR_PARTITION.code
        return
    assert partition_dirs(broker, "orders") == {"orders-0", "orders-1", "orders-2"}
    with Wire(broker.bootstrap) as wire:
        described = wire.metadata(["orders"]).topics[0]
        assert described.error_code == 0 and len(described.partitions) == 3
        produced = wire.produce("orders", 2, build_batch([(b"k", b"v")],
                                                         base_timestamp=now_ms()))
        assert produced.error_code == 0


@pytest.mark.parametrize("step", DELETE_STEPS)
def test_a_deletion_interrupted_at_any_step_is_finished_or_undone_after_restart(broker, step):
    with Wire(broker.bootstrap) as wire:
        assert create_topic(wire, "doomed", 4).error_code == 0
    assert len(partition_dirs(broker, "doomed")) == 4
    _crash_during(broker, step, "deleting topic doomed",
                  lambda wire: delete_topic(wire, "doomed"))
    broker.start()
    if step == "decided":
        assert len(partition_dirs(broker, "doomed")) == 4
        assert "doomed" in stored_topics(broker)
        return
    assert partition_dirs(broker, "doomed") == set()
    with Wire(broker.bootstrap) as wire:
        assert wire.metadata(["doomed"]).topics[0].error_code == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION.code
        assert create_topic(wire, "doomed", 1).error_code == 0  # the name is free again


def test_a_creation_that_fails_on_disk_leaves_nothing(broker):
    # A plain file where partition 7's directory must go: creating it fails midway.
    (broker.data_dir / "blocked-7").write_text("in the way")
    with Wire(broker.bootstrap) as wire:
        result = create_topic(wire, "blocked", 12)
        assert result.error_code == Errors.KAFKA_STORAGE_ERROR.code
        assert "blocked-7" in result.error_message
        assert wire.metadata(["blocked"]).topics[0].error_code == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert partition_dirs(broker, "blocked") == set()
    assert "blocked" not in stored_topics(broker)
    broker.stop()
    broker.start()  # nothing left behind stops the broker from starting
    (broker.data_dir / "blocked-7").unlink()
    with Wire(broker.bootstrap) as wire:
        assert create_topic(wire, "blocked", 12).error_code == 0
    assert len(partition_dirs(broker, "blocked")) == 12


def test_internal_topics_are_protected(broker):
    with Wire(broker.bootstrap) as wire:
        find_group_coordinator(wire, "g")  # creates __consumer_offsets
        assert wire.metadata(["__consumer_offsets"]).topics[0].error_code == 0
        deleted = delete_topic(wire, "__consumer_offsets")
        assert deleted.error_code == Errors.TOPIC_DELETION_DISABLED.code
        assert "internal topic" in deleted.error_message
        old_client = delete_topic(wire, "__consumer_offsets", version=2)
        assert old_client.error_code == Errors.INVALID_REQUEST.code
        grown = create_partitions(wire, "__consumer_offsets", 200)
        assert grown.error_code == Errors.POLICY_VIOLATION.code
        altered = alter_topic_config(wire, "__consumer_offsets", {"cleanup.policy": "delete"})
        assert altered.error_code == Errors.INVALID_CONFIG.code
        assert wire.metadata(["__consumer_offsets"]).topics[0].error_code == 0
    assert "__consumer_offsets" in stored_topics(broker)


def test_fuzzed_partition_counts_are_refused(broker):
    with Wire(broker.bootstrap) as wire:
        huge = create_topic(wire, "huge", 15_000_000)
        assert huge.error_code == Errors.POLICY_VIOLATION.code, huge
        assert create_topic(wire, "small", 1).error_code == 0
        grown = create_partitions(wire, "small", 15_000_000)
        assert grown.error_code == Errors.POLICY_VIOLATION.code
        assert wire.metadata(["huge"]).topics[0].error_code == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert partition_dirs(broker, "huge") == set()
