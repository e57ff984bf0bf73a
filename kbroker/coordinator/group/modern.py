"""What the heartbeat protocols share (KIP-848 consumer groups, KIP-1071 streams groups): the
framing of their ``__consumer_offsets`` records, the session timer of a member, the rate limit
on target assignments (KIP-1263) and where a group's settings come from.

Everything protocol-specific (members, assignments, reconciliation) stays in ``consumer/`` and
``streams/``; this module holds only what reads the same for both.
"""

from __future__ import annotations

import hashlib
import struct
import time

from kbroker.coordinator.group.group_configs import GROUP_CONFIGS, default_value, stored_value
from kbroker.coordinator.runtime import CoordinatorResult

_INT16 = struct.Struct(">h")


# --- records ---------------------------------------------------------------------------------------

def record_key(record_type: int, key) -> bytes:
    """A record key: the int16 record type, then the key struct (version 0)."""
    return _INT16.pack(record_type) + key.to_bytes(0)


def record_value(value, version: int = 0) -> bytes:
    """A record value: the int16 version, then the value struct."""
    return _INT16.pack(version) + value.to_bytes(version)


def decode_record_value(cls, value: bytes):
    """A value written by this or a newer Kafka: read at the highest version we know (newer
    versions only add tagged fields)."""
    view = memoryview(value)
    (version,) = _INT16.unpack_from(view, 0)
    return cls.decode(view[2:], min(version, cls.VALID_VERSIONS[1]))


# --- metadata hash (KIP-1101) --------------------------------------------------------------------

def topic_hash(image, name: str) -> int:
    """A hash of a topic's id, name, partition count and partition racks (0 when it does not
    exist); a group's epoch moves when the hash of its subscribed topics changes."""
    topic = image.topic(name)
    if topic is None:
        return 0
    h = hashlib.blake2b(digest_size=8)
    h.update(b"\x00" + topic.topic_id.bytes + name.encode() + struct.pack(">i", topic.num_partitions))
    brokers = image.brokers
    for index, replicas in enumerate(topic.assignments):
        racks = sorted({brokers[r].rack for r in replicas if r in brokers and brokers[r].rack})
        h.update(struct.pack(">i", index))
        for rack in racks:
            h.update(struct.pack(">i", len(rack)) + rack.encode())
    return int.from_bytes(h.digest(), "big", signed=True)


def group_hash(image, subscribed) -> int:
    """The hash of the topics named by ``subscribed`` (an iterable of names) that exist."""
    hashes = [topic_hash(image, name) for name in sorted(subscribed) if image.topic(name)]
    if not hashes:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for value in hashes:
        h.update(struct.pack(">q", value))
    return int.from_bytes(h.digest(), "big", signed=True)


# --- target assignments ----------------------------------------------------------------------------

def can_compute_assignment(assignment_timestamp: int, interval_ms: int, now: int) -> bool:
    """KIP-1263: at most one new target assignment per assignment interval (always when there
    is none yet, or the interval is 0)."""
    return assignment_timestamp == 0 or interval_ms == 0 or now >= assignment_timestamp + \
        interval_ms


# --- settings --------------------------------------------------------------------------------------

def group_setting(shard, group_id: str, name: str):
    """A group config's value for ``group_id``: its override (IncrementalAlterConfigs on the
    GROUP resource, as the metadata image stores it), or else the broker config it defaults to."""
    overrides = shard.group_configs(group_id)
    if name in overrides:
        value = stored_value(shard.config, name, overrides[name])
        if value is not None:
            return value
    return default_value(shard.config, GROUP_CONFIGS[name])


# --- session timers --------------------------------------------------------------------------------

def schedule_session(shard, key: tuple, timeout_ms: int, expire) -> None:
    """(Re)start a member's session, timer ``key`` of the shard; ``expire(shard)`` fences the
    member when it runs out. Heartbeats only move the deadline: the one timer of a session
    re-arms itself for what is left when it fires early, so a heartbeat costs no timer churn."""
    deadline = _monotonic_ms() + timeout_ms
    armed = shard.session_deadlines.get(key)
    if armed is not None and armed[1] <= deadline and \
            shard.runtime.has_timer(shard.partition_index, key):
        shard.session_deadlines[key] = (deadline, armed[1])
        return
    _arm_session(shard, key, deadline, timeout_ms, expire)


def cancel_session(shard, key: tuple) -> None:
    shard.cancel(key)
    shard.session_deadlines.pop(key, None)


def _arm_session(shard, key: tuple, deadline: float, delay_ms: float, expire) -> None:
    shard.session_deadlines[key] = (deadline, _monotonic_ms() + delay_ms)

    def check(s):
        entry = s.session_deadlines.get(key)
        if entry is None:
            return CoordinatorResult()
        left = entry[0] - _monotonic_ms()
        if left > 0:
            _arm_session(s, key, entry[0], left, expire)
            return CoordinatorResult()
        del s.session_deadlines[key]
        return expire(s)

    shard.schedule(key, int(delay_ms) + 1, check)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000
