"""Online migration between the classic and the consumer protocol
(``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or disabled).

Upgrade: the first consumer-protocol member (ConsumerGroupHeartbeat, epoch 0) of a non-empty
classic group that uses the consumer embedded protocol turns it into a consumer group, in the same
batch: the classic group's tombstone, then the consumer group written whole (Kafka's
ConsumerGroup.fromClassicGroup): group and assignment epoch = the classic generation, every member
Stable at that epoch with the partitions of its last classic assignment, and its classic session
timeout and protocols kept. Classic members parked in JoinGroup/SyncGroup are told
REBALANCE_IN_PROGRESS and rejoin - into the consumer group.

Classic members inside a consumer group (a rolling upgrade in progress) are served by
:mod:`classic_members`; the downgrade, when the last consumer-protocol member leaves, is part of
leaving (:func:`membership.fence`).
"""

from __future__ import annotations

import logging

from kbroker.coordinator.group.consumer import membership
from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import settings
from kbroker.coordinator.group.consumer.classic_protocol import (CONSUMER, by_topic_id,
                                                                 decode_assignment,
                                                                 decode_subscription)
from kbroker.coordinator.group.consumer.group import ConsumerGroup
from kbroker.coordinator.group.consumer.member import (ClassicMetadata, ConsumerGroupMember,
                                                       MemberState, with_epoch)
from kbroker.coordinator.group.parked import answer_parked
from kbroker.coordinator.group.records import group_metadata_tombstone
from kbroker.coordinator.group.state import ClassicGroup
from kbroker.protocol.errors import Errors, KafkaError

log = logging.getLogger("kbroker.coordinator.group")


def upgrade(shard, classic: ClassicGroup, records: list, committed: list) -> ConsumerGroup:
    """Convert a non-empty classic group for its first consumer-protocol member; raises
    GROUP_ID_NOT_FOUND (Kafka's messages) when it may not."""
    gid = classic.group_id
    if not settings.upgrade_enabled(shard):
        log.info("cannot upgrade classic group %s to a consumer group: online upgrade is "
                 "disabled", gid)
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because online "
                         f"upgrade is disabled.")
    if classic.protocol_type != CONSUMER:
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because the group "
                         f"does not use the consumer embedded protocol.")
    if len(classic.members) > shard.config.get("group.consumer.max.size"):
        raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                         f"Cannot upgrade classic group {gid} to consumer group because the group "
                         f"size exceeds the consumer group maximum size.")
    group = from_classic(shard, classic)
    records.append(group_metadata_tombstone(gid))
    records += rec.group_records(group)
    # The classic members waiting in JoinGroup/SyncGroup rejoin the consumer group.
    for member in classic.members.values():
        answer_parked(member, Errors.REBALANCE_IN_PROGRESS)

    def converted():
        shard.forget_classic_group(classic)
        for m in group.members.values():
            membership.schedule_session(shard, gid, m.member_id, m.classic.session_timeout_ms)
    committed.append(converted)
    log.info("group %s: converted the classic group (generation %d, %d member(s)) to a consumer "
             "group", gid, classic.generation, len(classic.members))
    return group


def from_classic(shard, classic: ClassicGroup) -> ConsumerGroup:
    image = shard.image
    gid = classic.group_id
    group = ConsumerGroup(gid)
    group.group_epoch = classic.generation
    group.assignment_epoch, group.assignment_timestamp = classic.generation, 0
    for m in classic.members.values():
        try:
            subscription = decode_subscription(m.metadata(classic.protocol_name))
            assigned: dict = {}
            if m.assignment:
                assignment = decode_assignment(m.assignment)
                if assignment.user_data:
                    raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                                     f"Cannot upgrade classic group {gid} to consumer group "
                                     f"because an unsupported custom assignor is in use. Please "
                                     f"refer to the documentation or switch to a default "
                                     f"assignor before re-attempting the upgrade.")
                assigned = by_topic_id(assignment.assigned_partitions, image)
        except KafkaError:
            raise
        except Exception as exc:
            log.warning("cannot upgrade classic group %s: malformed consumer protocol: %s", gid,
                        exc)
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because the "
                             f"embedded consumer protocol is malformed.") from None
        member = ConsumerGroupMember(
            m.member_id, member_epoch=classic.generation,
            previous_member_epoch=classic.generation, state=MemberState.STABLE,
            instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=frozenset(subscription.topics),
            assigned=with_epoch(assigned, classic.generation),
            classic=ClassicMetadata(m.session_timeout_ms,
                                    tuple((n, bytes(md)) for n, md in m.protocols)))
        group.update_target(m.member_id, assigned)
        group.update_member(member)
    group.metadata_hash = shard.metadata_hash(group.subscribed)
    return group
