"""A damaged ``__consumer_offsets`` partition (issue 11 item 5).

The load of the partition fails; its groups then get COORDINATOR_NOT_AVAILABLE (retriable: a
client looks the coordinator up again) with one log line, instead of COORDINATOR_LOAD_IN_PROGRESS
for ever or a timeout. The load is retried with a backoff, so once the segment is readable again
the committed offsets come back without a restart.
"""

from __future__ import annotations

from tests.broker_process import BrokerProcess
from tests.integration.clients import Wire, ensure_topic, wait_until

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
NOT_AVAILABLE = 15  # COORDINATOR_NOT_AVAILABLE
# The first record's length (a zigzag varint right after the 61-byte batch header): the batch
# still looks whole to the log (no CRC check on a clean start) but its records cannot be decoded.
RECORD_LENGTH_POSITION = 61


def commit(wire: Wire, group: str, topic: str, offset: int) -> None:
    from kbroker.protocol.messages.offset_commit import OffsetCommitRequest as R

    response = wire.call(OFFSET_COMMIT, 7, R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            R.OffsetCommitRequestTopic(name=topic, partitions=[
                R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]))
    assert response.topics[0].partitions[0].error_code == 0


def fetch(wire: Wire, group: str, topic: str) -> tuple[int, int]:
    """(group-level error, committed offset of partition 0)."""
    from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest as R

    response = wire.call(OFFSET_FETCH, 7, R(group_id=group, topics=[
        R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    partitions = response.topics[0].partitions if response.topics else []
    return response.error_code, partitions[0].committed_offset if partitions else -1


def test_damaged_offsets_partition_answers_not_available_then_recovers(tmp_path):
    broker = BrokerProcess(tmp_path / "data", {"offsets.topic.num.partitions": 1}).start()
    try:
        ensure_topic(broker.bootstrap, "orders", 1)
        with Wire(broker.bootstrap) as wire:
            commit(wire, "g1", "orders", 5)
            commit(wire, "g1", "orders", 7)  # a second batch: the first is not the log's tail
        broker.stop()

        segment = tmp_path / "data" / "__consumer_offsets-0" / f"{0:020d}.log"
        original = segment.read_bytes()
        with open(segment, "r+b") as f:
            f.seek(RECORD_LENGTH_POSITION)
            f.write(b"\x01")  # length -1

        broker.start()
        with Wire(broker.bootstrap) as wire:
            error, _ = fetch(wire, "g1", "orders")
            assert error == NOT_AVAILABLE
            assert fetch(wire, "g1", "orders")[0] == NOT_AVAILABLE
        failures = [line for line in broker.log().splitlines()
                    if "cannot load __consumer_offsets-0" in line]
        assert len(failures) == 1, failures
        assert "Traceback" not in broker.log()

        # The partition becomes readable again: a retry loads it, no restart needed.
        with open(segment, "r+b") as f:
            f.write(original[:RECORD_LENGTH_POSITION + 1])
        with Wire(broker.bootstrap) as wire:
            wait_until(lambda: fetch(wire, "g1", "orders") == (0, 7), timeout=20,
                       message="the shard did not load after the segment was repaired")
        assert "loaded __consumer_offsets-0 after" in broker.log()
    finally:
        broker.stop()
