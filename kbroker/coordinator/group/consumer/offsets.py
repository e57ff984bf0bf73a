"""Committed offsets of consumer groups: who may commit and fetch (Kafka's
ConsumerGroup.validateOffsetCommit / validateOffsetFetch).

A commit without a member epoch (-1) is accepted only while the group has no members (admin
tools, reset-offsets). Otherwise the member must exist (UNKNOWN_MEMBER_ID) and use OffsetCommit
v9+ unless it is a classic-protocol member (UNSUPPORTED_VERSION). Its epoch must be its current
one, or an older epoch not older than the epoch at which it got each partition it commits
(KIP-1251: a commit in flight across a rebalance is kept; one for a partition it no longer owns is
not): STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a classic-protocol member). A transactional commit
without member, epoch and instance is accepted whatever the group's state.
"""

from __future__ import annotations

from kbroker.protocol.errors import Errors, KafkaError

CONSUMER_PROTOCOL_COMMIT_VERSION = 9


def _stale(classic: bool, message: str) -> KafkaError:
    return KafkaError(Errors.ILLEGAL_GENERATION if classic else Errors.STALE_MEMBER_EPOCH,
                      message)


def validate_commit(group, member_id: str, instance_id: str | None, epoch: int,
                    transactional: bool, api_version: int):
    """None (accept every partition) or a validator ``(topic, topic_id, partition)`` that
    raises KafkaError. Raises KafkaError for the whole request."""
    if epoch < 0 and group.is_empty:
        return None
    if transactional and epoch == -1 and member_id == "" and instance_id is None:
        return None
    member = group.member(member_id)
    classic = member.uses_classic_protocol
    if not transactional and not classic and api_version < CONSUMER_PROTOCOL_COMMIT_VERSION:
        raise KafkaError(Errors.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be "
                         "used by members using the consumer group protocol")
    if epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        raise _stale(classic, f"Received {'generation id' if classic else 'member epoch'} "
                              f"{epoch} is newer than current member epoch "
                              f"{member.member_epoch}.")

    def validate(topic: str, topic_id, partition: int) -> None:
        assigned_at = member.assignment_epoch(topic_id, partition)
        if assigned_at is None:
            raise _stale(classic, f"Partition {topic}-{partition} is not assigned or pending "
                                  f"revocation for member.")
        if epoch < assigned_at:
            raise _stale(classic, f"Received {'generation id' if classic else 'member epoch'} "
                                  f"{epoch} is older than assignment epoch {assigned_at} for "
                                  f"partition {topic}-{partition}.")

    return validate


def validate_fetch(group, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return
    member = group.member(member_id)
    if epoch != member.member_epoch:
        if member.uses_classic_protocol:
            raise KafkaError(Errors.ILLEGAL_GENERATION,
                             f"The received generation id {epoch} does not match the expected "
                             f"member epoch {member.member_epoch}.")
        raise KafkaError(Errors.STALE_MEMBER_EPOCH,
                         f"The received member epoch {epoch} does not match the expected member "
                         f"epoch {member.member_epoch}.")
