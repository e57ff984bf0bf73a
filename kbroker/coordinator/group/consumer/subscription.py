"""Subscription changes of a consumer group: regex resolution and the group epoch.

The group epoch moves (a new target assignment is due) when a member's subscribed topic names
change, when it moves to a regex already resolved, when a regex resolves to other topics, or when
the subscribed topics' metadata hash (KIP-1101: ids, partition counts, racks) changes — the
latter is checked when a member's subscription changed or the group's metadata refresh is due
(topics it subscribes to were created, changed or deleted).

Regexes are resolved off the heartbeat path, as Kafka's GroupMetadataManager resolves them: a
heartbeat that brings a new regex (or finds a refresh due) schedules one resolution of the
group's regexes as a shard operation of its own (:func:`schedule_refresh`, one at a time), which
writes the regex records and bumps the group epoch when what they match changed; the target
follows at a member's next heartbeat. Until then the member is assigned its literal topics only:
a subscription to a regex and a literal topic gets the literal topic's partitions first, as on
Kafka. The refresh rules are Kafka's: a group's regexes are re-resolved together when one is
unresolved, when topics were created since they were resolved, and at least every
``group.consumer.regex.refresh.interval.ms``, never twice within 10 s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kbroker.coordinator.group.consumer import records as rec
from kbroker.coordinator.group.consumer import regex as regexes
from kbroker.coordinator.group.consumer.group import (ConsumerGroup, ResolvedRegex, _count,
                                                      subscription_type)

log = logging.getLogger("kbroker.coordinator.group")

METADATA_REFRESH_INTERVAL_MS = 2**31 - 1  # Kafka's: only an explicit refresh request


@dataclass
class SubscriptionUpdate:
    """What a member's change does to the group's subscriptions (computed, not applied)."""
    changed: bool              # the member's subscription (names or regex) changed
    bump: bool                 # the group epoch must move
    resolved: dict             # regex -> ResolvedRegex as the group will have them
    counts: dict               # topic -> [by name, by regex] as the group will have them
    epoch: int                 # the group epoch after this change
    subscription: object       # SubscriptionType after this change


REFRESH = "consumer-regex"


def schedule_refresh(shard, group_id: str, delay_ms: int = 0) -> None:
    """Resolve the group's regexes in a shard operation of its own, in ``delay_ms`` (one at a
    time: one already scheduled stays)."""
    from kbroker.coordinator.runtime import CoordinatorResult, now_ms
    key = (REFRESH, group_id)
    if not shard.runtime.has_timer(shard.partition_index, key):
        shard.schedule(key, max(delay_ms, 0), lambda s: CoordinatorResult(
            refresh_regexes(s, group_id, now_ms())))


def refresh_due(shard, group: ConsumerGroup, regex_set: dict, now: int) -> bool:
    if not regex_set:
        return False
    last_timestamp, last_version = group.last_regex_refresh()
    if now <= last_timestamp + regexes.REFRESH_MIN_INTERVAL_MS:
        return False
    return (len(regex_set) != len(group.resolved)
            or last_version < shard.topic_changes.created_version
            or now > last_timestamp + shard.config.get("group.consumer.regex.refresh.interval.ms"))


def resolve_all(shard, group: ConsumerGroup, patterns, now: int, records: list) -> tuple[dict, bool]:
    """Resolve ``patterns`` against the current topics: (new resolved map, topics changed),
    appending a record per regex."""
    image = shard.image
    version = shard.topic_changes.version
    found = regexes.resolve(patterns, image.topics().keys())
    resolved = dict(group.resolved)
    changed = False
    for pattern, topics in found.items():
        old = resolved.get(pattern)
        if old is None or old.topics != topics:
            changed = True
        resolved[pattern] = ResolvedRegex(topics, version, now)
        records.append(rec.regex(group.group_id, pattern, topics, version, now))
    log.info("group %s: resolved %d regular expression(s) over %d topics", group.group_id,
             len(found), len(image.topics()))
    return resolved, changed


def update(shard, group: ConsumerGroup, old, new, now: int, records: list,
           is_new_member: bool) -> SubscriptionUpdate:
    """Records for ``old`` becoming ``new`` (old None for a new member): regex tombstones and
    resolutions, the group epoch and metadata hash."""
    if old is new and not is_new_member and not group.regex_subscribers and \
            now < group.metadata_refresh[0] and group.group_epoch >= group.metadata_refresh[1]:
        # A plain heartbeat: nothing to resolve, nothing to re-check (the steady state).
        return SubscriptionUpdate(False, False, group.resolved, group.subscribed,
                                  group.group_epoch, None)
    names_changed = old is None or old.subscribed_topic_names != new.subscribed_topic_names
    old_regex = old.regex if old is not None else None
    new_regex = new.regex
    resolved = dict(group.resolved)
    regex_changed = old_regex != new_regex
    regex_resolved_already = False
    if regex_changed:
        if old_regex and group.regex_subscribers.get(old_regex) == 1:
            records.append(rec.regex_tombstone(group.group_id, old_regex))
            resolved.pop(old_regex, None)
        if new_regex:
            if group.regex_subscribers.get(new_regex, 0) == 0:
                regexes.compile_regex(new_regex)  # INVALID_REGULAR_EXPRESSION
            elif new_regex in resolved:
                regex_resolved_already = True
        elif old_regex:
            regex_resolved_already = True
    regex_set = group.regex_subscribers_with(old, new)
    if refresh_due(shard, group, regex_set, now):
        schedule_refresh(shard, group.group_id)  # a new regex is assigned once resolved
    counts = group.subscribed_names_with(old, new)
    # Regexes the change (or the refresh) resolved differently count their new topics.
    for pattern, found in resolved.items():
        before = group.resolved.get(pattern)
        if before is not None and before.topics == found.topics:
            continue
        if before is not None and not (old_regex == pattern and pattern not in regex_set):
            for topic in before.topics:
                _count(counts, topic, 1, -1)
        for topic in found.topics:
            _count(counts, topic, 1, +1)
    bump = names_changed or regex_resolved_already
    members = len(group.members) + (1 if is_new_member else 0)
    subscription = subscription_type(regex_set, counts, members)
    epoch = group.group_epoch
    refresh_requested = now >= group.metadata_refresh[0] or epoch < group.metadata_refresh[1]
    if bump or refresh_requested:
        metadata_hash = shard.metadata_hash(counts)
        if metadata_hash != group.metadata_hash:
            bump = True
        if bump:
            epoch += 1
            records.append(rec.group_epoch(group.group_id, epoch, metadata_hash))
            log.info("group %s: bumped the group epoch to %d", group.group_id, epoch)
        group.metadata_refresh = (now + METADATA_REFRESH_INTERVAL_MS, epoch)
        if group.has_partition_metadata_record:
            records.append(rec.partition_metadata_tombstone(group.group_id))
    return SubscriptionUpdate(names_changed or regex_changed, bump, resolved, counts, epoch,
                              subscription)


def refresh_regexes(shard, group_id: str, now: int) -> list:
    """The scheduled resolution (a heartbeat found it due, or topics were created): regex
    records, and an epoch bump when what they match changed (the target follows at the members'
    next heartbeat)."""
    group = shard.find_group(group_id, "consumer")
    if group is None or not group.regex_subscribers:
        return []
    if not refresh_due(shard, group, group.regex_subscribers, now):
        return []
    records: list = []
    resolved, changed = resolve_all(shard, group, list(group.regex_subscribers), now, records)
    counts = {t: list(c) for t, c in group.subscribed.items()}
    for pattern, found in resolved.items():
        before = group.resolved.get(pattern)
        if before is not None:
            for topic in before.topics:
                _count(counts, topic, 1, -1)
        for topic in found.topics:
            _count(counts, topic, 1, +1)
    metadata_hash = shard.metadata_hash(counts)
    if changed or metadata_hash != group.metadata_hash:
        epoch = group.group_epoch + 1
        records.append(rec.group_epoch(group_id, epoch, metadata_hash))
        log.info("group %s: regexes match other topics now; bumped the group epoch to %d",
                 group_id, epoch)
        group.metadata_refresh = (now + METADATA_REFRESH_INTERVAL_MS, epoch)
    return records
