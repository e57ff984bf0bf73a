"""Committed offsets of streams groups: who may commit and fetch (Kafka's
StreamsGroup.validateOffsetCommit / validateOffsetFetch).

A commit without a member epoch is accepted only while the group has no members; a
transactional one without member, epoch and instance always (an EOS producer's
sendOffsetsToTransaction). Otherwise the member must exist (UNKNOWN_MEMBER_ID) and use
OffsetCommit v9+ (UNSUPPORTED_VERSION); an epoch newer than its own is STALE_MEMBER_EPOCH; an
older one is accepted per partition when the partition's task (its subtopology by source or
repartition source topic) is the member's active task since that epoch or before.
"""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError


def _stale(message: str) -> KafkaError:
    return KafkaError(Errors.STALE_MEMBER_EPOCH, message)


def validate_commit(group, member_id: str, instance_id: str | None, epoch: int,
                    transactional: bool, api_version: int):
    if epoch < 0 and group.is_empty:
        return None
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return None
    member = group.member(member_id)
    if not transactional and api_version < 9:
        raise KafkaError(Errors.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be "
                         "used by members using the streams group protocol")
    if epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        raise _stale(f"Received member epoch {epoch} is newer than current member epoch "
                     f"{member.member_epoch}.")
    if group.topology is None:
        raise _stale("Topology is not available for offset commit validation.")
    subtopology_of = group.topology.source_topic_subtopologies()

    def validate(topic: str, topic_id, partition: int) -> None:
        s = subtopology_of.get(topic)
        if s is None:
            raise _stale(f"Topic {topic} is not in the topology.")
        assigned_at = group.active_task_epoch(s, partition, member_id)
        if assigned_at is None:
            raise _stale(f"Task {s}-{partition} is not assigned or pending revocation for "
                         f"member.")
        if epoch < assigned_at:
            raise _stale(f"Received member epoch {epoch} is older than assignment epoch "
                         f"{assigned_at} for task {s}-{partition}.")

    return validate


def validate_fetch(group, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return
    member = group.member(member_id)
    if epoch != member.member_epoch:
        raise _stale(f"The received member epoch {epoch} does not match the expected member "
                     f"epoch {member.member_epoch}.")
