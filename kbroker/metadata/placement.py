"""Replica placement: Kafka's ``AdminUtils.assignReplicasToBrokers``, rack-aware when every
live broker has a rack.

Without racks, the brokers sorted by id are walked round-robin from a random start: partition p's
first replica is broker ``(p + start) % n`` and the others follow at a shift that grows by one
every ``n`` partitions, so leaders and followers spread evenly. With racks the same walk runs over
the brokers listed rack by rack in turn (``rack_alternated``), and a replica is skipped while its
rack (or the broker itself) already holds one and some rack (broker) holds none: with as many
racks as replicas, every replica of a partition sits in a different rack.

Kafka's ``RackAwareMode.Safe``: when only some brokers have a rack, racks are ignored (Kafka's
enforced mode would refuse the creation instead; a partly-racked cluster is a misconfiguration
the operator sees in DescribeCluster).
"""

from __future__ import annotations

import random
from typing import Mapping

from kbroker.protocol.errors import Errors, KafkaError


def check_replication_factor(replication_factor: int, live_brokers: int) -> None:
    """INVALID_REPLICATION_FACTOR with Kafka's message when the brokers cannot hold it."""
    if replication_factor > live_brokers:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): The "
                         f"target replication factor of {replication_factor} cannot be reached "
                         f"because only {live_brokers} broker(s) are registered.")


def assign_replicas(racks: Mapping[int, str | None], partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int = -1, shift: int = -1
                    ) -> list[tuple[int, ...]]:
    """The replica lists of partitions ``first_partition .. first_partition + partitions - 1``
    over the brokers of ``racks`` (broker id -> rack or None). ``start``/``shift`` fix Kafka's
    random start index and replica shift (tests); -1 draws them."""
    if partitions <= 0:
        return []
    check_replication_factor(replication_factor, len(racks))
    if all(rack is not None for rack in racks.values()):
        brokers = rack_alternated(racks)
        rack_of = dict(racks)
    else:
        brokers = sorted(racks)
        rack_of = None
    n = len(brokers)
    start = start if start >= 0 else random.randrange(n)
    shift = shift if shift >= 0 else random.randrange(n)
    result = []
    partition = max(0, first_partition)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if rack_of is None:
            replicas = [brokers[first]] + [brokers[_replica_index(first, shift, j, n)]
                                           for j in range(replication_factor - 1)]
        else:
            replicas = _rack_aware_replicas(brokers, rack_of, first, shift, replication_factor)
        result.append(tuple(replicas))
        partition += 1
    return result


def _rack_aware_replicas(brokers, rack_of, first, shift, replication_factor) -> list[int]:
    n, racks = len(brokers), len(set(rack_of.values()))
    leader = brokers[first]
    replicas, used_racks, used_brokers = [leader], {rack_of[leader]}, {leader}
    k = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = brokers[_replica_index(first, shift * racks, k, n)]
            rack = rack_of[broker]
            k += 1
            # Kafka's rule: skip a broker whose rack already has a replica while some rack has
            # none, and a broker that already has one while some broker has none.
            if ((rack not in used_racks or len(used_racks) == racks)
                    and (broker not in used_brokers or len(used_brokers) == n)):
                replicas.append(broker)
                used_racks.add(rack)
                used_brokers.add(broker)
                break
    return replicas


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    if n == 1:
        return first
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers listed one per rack in turn (racks sorted, brokers sorted within a rack):
    Kafka's getRackAlternatedBrokerList."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [iter(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    while len(result) < len(racks):
        for queue in queues:
            broker = next(queue, None)
            if broker is not None:
                result.append(broker)
    return result


def reassignment_problem(replicas, live: set[int]) -> str | None:
    """Kafka's checks of a target replica list (KafkaController.validateReassignment)."""
    if not replicas:
        return "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return ("Duplicate replica ids in partition reassignment replica list: "
                f"{list(replicas)}")
    if any(r < 0 for r in replicas):
        return f"Invalid broker id in replica assignment: {list(replicas)}"
    if not set(replicas) <= live:
        return (f"Replica assignment has brokers that are not alive. Replica list: "
                f"{list(replicas)}, live broker list: {sorted(live)}")
    return None
