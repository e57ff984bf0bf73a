"""Reconciliation: moving one member from what it owns toward its target assignment (Kafka's
CurrentAssignmentBuilder), one heartbeat at a time.

The member's state machine (the one table of its transitions)::

    STABLE ──target epoch moved──> UNREVOKED_PARTITIONS   (it must give partitions up first; it
       ^                                  │                stays at its epoch until its heartbeat
       │                                  │                no longer reports them as owned)
       │        revoked ──────────────────┘
       │           v
       ├──── all its partitions free ─── UNRELEASED_PARTITIONS  (at the target epoch; waits for
       │                                                        partitions others still own)
    UNKNOWN (a newer broker's state): fenced unless it reports no partitions, then reconciled.

A member is given a partition only when no other member owns it (``current_partition_epoch`` is
-1) — the invariant that no partition is consumed by two members at once. Revocation comes before
assignment: while a member has partitions to revoke it stays at its epoch and gets nothing new.
Partitions are given at the target epoch, which becomes their assignment epoch (KIP-1251).
"""

from __future__ import annotations

from dataclasses import replace

from kbroker.coordinator.group.consumer.member import (EMPTY, ConsumerGroupMember, MemberState,
                                                       freeze)
from kbroker.protocol.errors import Errors, KafkaError

S = MemberState
TRANSITIONS = {
    S.STABLE: {S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS},
    S.UNREVOKED_PARTITIONS: {S.UNREVOKED_PARTITIONS, S.STABLE, S.UNRELEASED_PARTITIONS},
    S.UNRELEASED_PARTITIONS: {S.UNRELEASED_PARTITIONS, S.STABLE, S.UNREVOKED_PARTITIONS},
    S.UNKNOWN: {S.STABLE, S.UNRELEASED_PARTITIONS, S.UNREVOKED_PARTITIONS},
}


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: dict,
              subscribed_topic_ids: frozenset, current_partition_epoch,
              owned: list | None, subscription_changed: bool) -> ConsumerGroupMember:
    """The member's next state. ``target``: {topic id: partitions}; ``subscribed_topic_ids``:
    what it subscribes to now (a topic outside it is revoked whatever the target says);
    ``owned``: [(topic id, [partitions])] from the heartbeat, or None when not sent;
    ``current_partition_epoch(topic, partition)``: the owner's epoch, -1 when free."""
    builder = _Builder(member, target_epoch, target, subscribed_topic_ids,
                       current_partition_epoch, owned)
    state = member.state
    if state is S.STABLE:
        if member.member_epoch != target_epoch:
            new = builder.next_assignment()
        elif subscription_changed:
            new = builder.drop_unsubscribed()
        else:
            return member
    elif state is S.UNREVOKED_PARTITIONS:
        if builder.owns_any(member.pending_revocation):
            new = builder.drop_unsubscribed() if subscription_changed else member
        else:
            new = builder.next_assignment()
    elif state is S.UNRELEASED_PARTITIONS:
        new = builder.next_assignment()
    else:
        if owned is None or owned:
            raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                             "The consumer group member is in a unknown state. The member must "
                             "abandon all its partitions and rejoin.")
        new = builder.next_assignment(epoch=target_epoch)
    assert new.state in TRANSITIONS[state], (state, new.state)
    return new


class _Builder:
    def __init__(self, member, target_epoch, target, subscribed, current_epoch, owned):
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.subscribed = subscribed
        self.current_epoch = current_epoch
        self.owned = owned

    def owns_any(self, assignment) -> bool:
        """Whether the heartbeat still reports any of ``assignment`` as owned (not sent: yes)."""
        if self.owned is None:
            return True
        for topic_id, partitions in self.owned:
            pending = assignment.get(topic_id)
            if pending and any(p in pending for p in partitions):
                return True
        return False

    def drop_unsubscribed(self) -> ConsumerGroupMember:
        """Only take away the partitions of topics the member no longer subscribes to (cheaper
        than a full reconciliation, which the next target epoch brings anyway)."""
        m = self.member
        gone = {t: p for t, p in m.assigned.items() if t not in self.subscribed}
        if not gone:
            return m
        assigned = {t: p for t, p in m.assigned.items() if t in self.subscribed}
        pending = {t: dict(p) for t, p in m.pending_revocation.items()}
        for topic_id, partitions in gone.items():
            pending.setdefault(topic_id, {}).update(partitions)
        if pending and self.owns_any(pending):
            return m.with_epoch(m.member_epoch, state=S.UNREVOKED_PARTITIONS,
                                assigned=freeze(assigned), pending_revocation=freeze(pending))
        return m.with_epoch(m.member_epoch, assigned=freeze(assigned))

    def next_assignment(self, epoch: int | None = None) -> ConsumerGroupMember:
        m = self.member
        epoch = m.member_epoch if epoch is None else epoch
        kept, revoke, to_assign = {}, {}, {}
        unreleased = False
        for topic_id in set(self.target) | set(m.assigned):
            target = self.target.get(topic_id, frozenset()) \
                if topic_id in self.subscribed else frozenset()
            current = m.assigned.get(topic_id, {})
            keep = {p: e for p, e in current.items() if p in target}
            drop = {p: e for p, e in current.items() if p not in target}
            releasing = m.pending_revocation.get(topic_id, {})
            wanted = set()
            for partition in target:
                if partition in keep:
                    continue
                # Free, or owned by this very member while it revokes it (only one owner ever).
                if self.current_epoch(topic_id, partition) != -1 and partition not in releasing:
                    unreleased = True
                else:
                    wanted.add(partition)
            if keep:
                kept[topic_id] = keep
            if drop:
                revoke[topic_id] = drop
            if wanted:
                to_assign[topic_id] = wanted
        if revoke and self.owns_any(revoke):
            # Revoke first: the member stays at its epoch until it reports them released.
            return m.with_epoch(epoch, state=S.UNREVOKED_PARTITIONS, assigned=freeze(kept),
                                pending_revocation=freeze(revoke))
        for topic_id, partitions in to_assign.items():
            topic = kept.setdefault(topic_id, {})
            for partition in partitions:
                topic[partition] = self.target_epoch
        state = S.UNRELEASED_PARTITIONS if unreleased else S.STABLE
        return m.with_epoch(self.target_epoch, state=state, assigned=freeze(kept),
                            pending_revocation=EMPTY)
