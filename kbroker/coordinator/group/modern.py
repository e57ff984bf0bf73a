"""What the heartbeat protocols share (KIP-848 consumer groups, KIP-1071 streams groups): the
framing of their ``__consumer_offsets`` records, the session timer of a member, the rate limit
on target assignments (KIP-1263) and where a group's settings come from.

Everything protocol-specific (members, assignments, reconciliation) stays in ``consumer/`` and
``streams/``; this module holds only what reads the same for both.
"""

from __future__ import annotations

import struct
import time
import weakref

import xxhash

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


def group_to_replay(shard, cls, group_id: str, value: bytes | None):
    """The group of type ``cls`` a record changes, ready to be changed in place (journaled first:
    the map is a timeline map): the one in the shard's map, else a new one, which a group of
    another type of the id makes way for (a classic group in a migration). None for the
    tombstone of a group that is not there, which changes nothing."""
    groups = shard.groups
    group = groups.get(group_id)
    if isinstance(group, cls):
        groups.touch(group_id)
        return group
    if value is None:
        return None
    group = groups[group_id] = cls(group_id)
    return group


def decode_record_value(cls, value: bytes):
    """A value written by this or a newer Kafka: read at the highest version we know (newer
    versions only add tagged fields)."""
    view = memoryview(value)
    (version,) = _INT16.unpack_from(view, 0)
    return cls.decode(view[2:], min(version, cls.VALID_VERSIONS[1]))


# --- metadata hash (KIP-1101) --------------------------------------------------------------------
# Bit for bit Kafka's (``Utils.computeTopicHash`` / ``computeGroupHash``): the hash is stored in
# the *GroupMetadataValue records, so a Kafka broker loading our ``__consumer_offsets`` compares
# it with its own and would bump every group's epoch if they differed. Kafka streams its fields
# through hash4j's XXH3-64 (seed 0), which writes every value little-endian and a string as its
# UTF-16 code units followed by an int32 count of them; the hash of a stream is XXH3-64 of those
# bytes, so we build the same bytes and hash them in one call.

_TOPIC_HASH_MAGIC = b"\x00"  # Kafka's version byte of the topic hash
_INT32_LE = struct.Struct("<i")
_INT64_LE = struct.Struct("<q")
_UUID_LE = struct.Struct("<QQ")  # the id's most, then least significant 64 bits


def _java_string(value: str) -> bytes:
    """hash4j's putString: the UTF-16 code units (little-endian), then their count as int32."""
    units = value.encode("utf-16-le", "surrogatepass")
    return units + _INT32_LE.pack(len(units) // 2)


def _java_order(value: str) -> bytes:
    """A sort key ordering as Java's String.compareTo (by UTF-16 code unit, not code point)."""
    return value.encode("utf-16-be", "surrogatepass")


# topic -> (the racks it was hashed with, its hash). Streams groups hash their topics at every
# heartbeat (Kafka keeps a cache for the same reason); an image's TopicMetadata never changes and
# is replaced whenever what it holds does, so it is the key, and the racks must be equal.
_TOPIC_HASHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def topic_hash(image, name: str, racks=None) -> int:
    """A hash of a topic's id, name, partition count and partition racks (0 when it does not
    exist); a group's epoch moves when the hash of its subscribed topics changes. ``racks``
    maps each known broker to its rack (or None): the shard's ``broker_racks()``, which knows a
    single node's own rack; by default the image's broker list (empty on a single node)."""
    topic = image.topic(name)
    if topic is None:
        return 0
    if racks is None:
        racks = {b.node_id: b.rack for b in image.brokers.values()}
    cached = _TOPIC_HASHES.get(topic)
    if cached is not None and cached[0] == racks:
        return cached[1]
    value = _topic_hash(topic, racks)
    _TOPIC_HASHES[topic] = (dict(racks), value)
    return value


def _topic_hash(topic, racks) -> int:
    topic_id = topic.topic_id.int
    parts = [_TOPIC_HASH_MAGIC, _UUID_LE.pack(topic_id >> 64, topic_id & 0xFFFFFFFFFFFFFFFF),
             _java_string(topic.name), _INT32_LE.pack(topic.num_partitions)]
    for index, replicas in enumerate(topic.assignments):
        parts.append(_INT32_LE.pack(index))
        # One rack per replica whose broker is known and has one: Kafka keeps duplicates.
        replica_racks = [racks[r] for r in replicas if racks.get(r) is not None]
        for rack in sorted(replica_racks, key=_java_order):
            # The length first (Kafka's guard against separator ambiguity), then the string,
            # which hash4j follows with its length again.
            encoded = _java_string(rack)
            parts.append(_INT32_LE.pack((len(encoded) - 4) // 2))
            parts.append(encoded)
    return _signed(xxhash.xxh3_64_intdigest(b"".join(parts)))


def group_hash(image, subscribed, racks=None) -> int:
    """The hash of the topics named by ``subscribed`` (an iterable of names) that exist: XXH3
    over their topic hashes in name order; 0 when none exists. ``racks`` as for topic_hash."""
    if racks is None:
        racks = {b.node_id: b.rack for b in image.brokers.values()}
    names = sorted((name for name in set(subscribed) if image.topic(name) is not None),
                   key=_java_order)
    if not names:
        return 0
    return _signed(xxhash.xxh3_64_intdigest(
        b"".join(_INT64_LE.pack(topic_hash(image, name, racks)) for name in names)))


def _signed(value: int) -> int:
    """An unsigned 64-bit hash as the int64 Kafka stores (Java's long)."""
    return value - (1 << 64) if value >= 1 << 63 else value


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
