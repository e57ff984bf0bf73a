"""Read side of the transaction coordinator: DescribeTransactions and ListTransactions (Kafka's
``TransactionCoordinator.handleDescribeTransactions`` and
``TransactionStateManager.listTransactionStates``).

Reads never write: they look at the hosted shards' current ``TxnMetadata`` as it stands.

- describe: an empty id is INVALID_REQUEST; a shard this broker does not host NOT_COORDINATOR, one
  still loading COORDINATOR_LOAD_IN_PROGRESS; an unknown id (or one being expired, Dead)
  TRANSACTIONAL_ID_NOT_FOUND. The partitions listed are those of the open transaction; in
  PrepareCommit/PrepareAbort, as Kafka, only those whose marker is not written yet (the
  coordinator's ``unmarked``).
- list: any shard still loading makes the whole answer COORDINATOR_LOAD_IN_PROGRESS (as Kafka);
  unknown state names are echoed in ``unknown_state_filters`` and filter nothing; the duration
  filter keeps transactions started more than that many ms ago (v1+, KIP-994); the pattern
  (v2+, KIP-1152) must match the whole transactional id (Java ``Matcher.matches``), and one that
  does not compile is INVALID_REGULAR_EXPRESSION. Dead ids are never listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kbroker.coordinator.txn.state import PREPARING, TxnMetadata, TxnState
from kbroker.protocol.errors import Errors, KafkaError

_BY_DISPLAY = {state.display: state for state in TxnState}


def describe(coordinator, transactional_id: str) -> TxnMetadata:
    """The metadata of one transactional id; raises KafkaError with Kafka's error."""
    if not transactional_id:
        raise KafkaError(Errors.INVALID_REQUEST, "an empty transactional id cannot be described")
    shard = coordinator.shard_for(transactional_id)
    metadata = shard.txns.get(transactional_id)
    if metadata is None or metadata.state is TxnState.DEAD:
        raise KafkaError(Errors.TRANSACTIONAL_ID_NOT_FOUND)
    unmarked = coordinator.unmarked.get(transactional_id)
    if metadata.state in PREPARING and unmarked is not None:
        metadata = replace(metadata, partitions=frozenset(unmarked) & metadata.partitions)
    return metadata


@dataclass(frozen=True, slots=True)
class Listing:
    error: Errors
    unknown_state_filters: list[str]
    transactions: list[TxnMetadata]


def list_transactions(coordinator, state_filters, producer_id_filters, duration_filter_ms: int,
                      pattern: str | None, now: int) -> Listing:
    states, unknown = set(), []
    for name in state_filters or ():
        if name in _BY_DISPLAY:
            states.add(_BY_DISPLAY[name])
        else:
            unknown.append(name)
    shards = list(coordinator.runtime.shards.values())
    if any(shard.loading for shard in shards):
        return Listing(Errors.COORDINATOR_LOAD_IN_PROGRESS, unknown, [])
    compiled = None
    if pattern:
        try:
            compiled = re.compile(pattern)
        except re.error:
            return Listing(Errors.INVALID_REGULAR_EXPRESSION, unknown, [])
    producer_ids = set(producer_id_filters or ())

    def included(m: TxnMetadata) -> bool:
        if m.state is TxnState.DEAD:
            return False  # being expired
        if producer_ids and m.producer_id not in producer_ids:
            return False
        if states and m.state not in states:
            return False
        if duration_filter_ms >= 0 and now - m.txn_start_timestamp <= duration_filter_ms:
            return False
        return compiled is None or compiled.fullmatch(m.transactional_id) is not None

    found = [m for shard in shards for m in shard.txns.values() if included(m)]
    return Listing(Errors.NONE, unknown, found)
