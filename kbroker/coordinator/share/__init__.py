"""The share coordinator (KIP-932): the durable state of share partitions in
``__share_group_state``, and the persister through which share partitions and the group
coordinator read and write it.

Key files:
- ``persister`` — the contract (:class:`Persister`, SharePartitionKey, StateBatch, results).
- ``records`` — ShareSnapshot/ShareUpdate keys and values in Kafka's formats, the state
  partition of a key (Java String.hashCode over ``group:topicId:partition``, Kafka's Uuid text),
  and the FindCoordinator(SHARE) key parser.
- ``combiner`` — merging state batches as Kafka's PersisterStateBatchCombiner.
- ``shard`` — :class:`ShareShard`: one state partition's share partitions; replay merges
  updates into the last snapshot.
- ``operations`` — initialize / read / write / delete / read_summary with Kafka 4.4's checks,
  fencing and update-or-snapshot policy.
- ``coordinator`` — :class:`ShareCoordinator` (the runtime over ``__share_group_state``) and
  :class:`BrokerPersister` (local shard, or the leader over the APIs 83-87, with retries).
- ``wire`` — those APIs' requests and results for one share partition.

Concurrency rule: as every coordinator on the runtime (:mod:`kbroker.coordinator.runtime`): a
shard runs one operation at a time on the event loop, its state changes only in ``replay``, and
an answer is given once the operation's record is committed (replicated to the ISR).
"""
