"""TransactionCoordinator: routes a transactional id to its ``__transaction_state`` shard, runs
the operations there, writes transaction markers and aborts timed-out transactions.

Markers: once PrepareCommit/PrepareAbort is committed, one task per transaction writes a COMMIT
or ABORT marker to every partition of the transaction (a partition of ``__consumer_offsets``
through the group coordinator, which turns the transaction's pending offsets into committed
ones, or drops them), waits until each marker is committed, retries a partition that failed
with a retriable error every 100 ms while the shard is hosted, drops a partition that no longer
exists, then writes CompleteCommit/CompleteAbort. A shard that loads resumes the markers of every
transaction it finds prepared (a crash between Prepare and Complete).

Transactions v2 (KIP-890 part 2): clients choose v2 from the finalized ``transaction.version``
(kept in the metadata image, see kbroker.handlers.features); the broker serves both. A v2 producer's Produce and TxnOffsetCommit add their
partition to the transaction through :meth:`add_partitions_now` (a produce waiting for it keeps
its place among its connection's produces: kbroker.handlers.session).

Timeouts: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` each loaded shard
fences and aborts its Ongoing transactions older than their timeout; this runs for transactions
recovered by a load as for live ones. Every
``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle for
``transactional.id.expiration.ms`` without an open transaction are deleted (tombstones).
"""

from __future__ import annotations

import asyncio
import logging

from kbroker.coordinator.interbroker import InterBrokerChannel
from kbroker.coordinator.runtime import CoordinatorRuntime, now_ms
from kbroker.coordinator.txn import describe as reads
from kbroker.coordinator.txn import operations as ops
from kbroker.coordinator.txn.marker_channel import MarkerChannel
from kbroker.coordinator.txn.records import partition_for
from kbroker.coordinator.txn.shard import TxnShard
from kbroker.coordinator.txn.state import PREPARING, TxnMetadata
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.broker_client import BrokerClientError

log = logging.getLogger("kbroker.coordinator.txn")

TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
# Marker retries back off from 100 ms (Kafka's retry.backoff.ms) to 1 s (its
# reconnect.backoff.max.ms) while no partition gets its marker: a leader that is gone is not
# hammered, and a new one is found within a second of the image naming it.
_RETRY_S = 0.1
_MAX_RETRY_S = 1.0
# Errors after which a marker is not retried (Kafka's TransactionMarkerRequestCompletionHandler).
# UNKNOWN_TOPIC_OR_PARTITION from a leader is retried, as Kafka does (its image may be behind
# ours); a partition is dropped for it only when our own image no longer has the topic.
_DROP_PARTITION = (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED)


class TransactionCoordinator:
    def __init__(self, config, controller, partitions, producer_ids, groups=None):
        self.config = config
        self.partitions = partitions
        self.producer_ids = producer_ids
        self.groups = groups
        topic_configs = {"cleanup.policy": "compact", "compression.type": "producer",
                         "segment.bytes": str(config.get("transaction.state.log.segment.bytes")),
                         "min.insync.replicas": str(config.get("transaction.state.log.min.isr"))}
        self.runtime = CoordinatorRuntime(
            controller, partitions, TOPIC, config.get("transaction.state.log.num.partitions"),
            topic_configs, lambda runtime, index: TxnShard(runtime, index, self),
            config.get("transaction.state.log.replication.factor"))
        self._markers: set[asyncio.Task] = set()
        # transactional id -> the last produce still waiting for an implicit AddPartitions.
        # transactional id -> partitions of its prepared transaction still without a marker
        # (DescribeTransactions lists those, as Kafka does).
        self.unmarked: dict[str, set] = {}
        self._completions: dict[str, asyncio.Future] = {}
        # Markers for partitions other brokers lead (WriteTxnMarkers), and a partition leader's
        # AddPartitionsToTxn to another broker's coordinator: one channel each, as Kafka has.
        timeout_s = config.get("request.timeout.ms") / 1000
        security = lambda: getattr(partitions, "inter_broker_security", None)  # noqa: E731
        self.marker_channel = MarkerChannel(partitions.node_id, timeout_s, "txn-markers",
                                            security)
        self.verify_channel = InterBrokerChannel(partitions.node_id, timeout_s, "txn-verify",
                                                 security)
        self._stopping = False
        self._timeouts: asyncio.Task | None = None
        self._expiry: asyncio.Task | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.runtime.start()
        self._timeouts = asyncio.get_running_loop().create_task(self._abort_timed_out_periodically(),
                                                                name="transaction timeouts")
        self._expiry = asyncio.get_running_loop().create_task(self._expire_ids_periodically(),
                                                              name="transactional id expiry")

    async def stop(self) -> None:
        """Ends every task this coordinator started, promptly: the flag stops the marker loops
        between attempts, closing the channels cancels requests to other brokers (even one
        connecting to a broker that is gone), the cancel ends any wait. Markers not written are
        resumed by the next host of the shard."""
        self._stopping = True
        self.marker_channel.close()
        self.verify_channel.close()
        tasks = [t for t in (self._timeouts, self._expiry, *self._markers) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await self.runtime.stop()

    def shard_loaded(self, shard: TxnShard) -> None:
        for m in shard.txns.values():
            if m.state in PREPARING:
                log.info("resuming the %s markers of %s (producer id %d, epoch %d)",
                         "COMMIT" if m.commit else "ABORT", m.transactional_id, m.producer_id,
                         m.producer_epoch)
                self.send_markers(shard, m)

    # --- routing -------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.runtime.num_partitions)

    def shard_for(self, transactional_id: str) -> TxnShard:
        self.runtime.require_topic()
        return self.runtime.shard(self.partition_for(transactional_id))

    async def write(self, transactional_id: str, op):
        await self.runtime.ensure_topic()
        return await self.runtime.write(self.partition_for(transactional_id), op)

    # --- operations ----------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int):
        max_timeout = self.config.get("transaction.max.timeout.ms")
        await self.producer_ids.ready()  # the operation takes its id synchronously
        return await self.write(transactional_id, lambda shard: ops.init_producer_id(
            shard, transactional_id, timeout_ms, producer_id, producer_epoch, max_timeout,
            self.producer_ids.next_id))

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions, client_transaction_version: int = 0) -> Errors:
        return await self.write(transactional_id, lambda shard: ops.add_partitions(
            shard, transactional_id, producer_id, producer_epoch, partitions,
            client_transaction_version))

    def add_partitions_now(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions) -> asyncio.Future:
        """A transactions v2 producer's partitions, added by the broker (KIP-890 part 2): the
        state changes now, the future answers once it is committed (at once on a single node).
        Raises KafkaError when the coordinator is not available."""
        self.runtime.require_topic()
        return self.runtime.run(self.partition_for(transactional_id), lambda shard:
                                ops.add_partitions(shard, transactional_id, producer_id,
                                                   producer_epoch, partitions, 2))

    def completion(self, transactional_id: str) -> asyncio.Future:
        """Done when the prepared transaction of ``transactional_id`` has its Complete record
        (or at once when none is prepared)."""
        future = self._completions.get(transactional_id)
        if future is None or future.done():
            future = asyncio.get_running_loop().create_future()
            if transactional_id in self.unmarked:
                self._completions[transactional_id] = future
            else:
                future.set_result(None)
        return future

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        return ops.verify_partitions(self.shard_for(transactional_id), transactional_id,
                                     producer_id, producer_epoch, partitions)

    def remote_coordinator(self, transactional_id: str):
        """(broker id, endpoint) of the broker leading ``transactional_id``'s shard when that
        is another broker (its endpoint None while it is offline); None when it is this one,
        or when the topic does not exist yet (this broker creates it)."""
        topic = self.runtime.controller.image.topic(TOPIC)
        if topic is None:
            return None
        leader = topic.state(self.partition_for(transactional_id)).leader
        if leader == self.partitions.node_id:
            return None
        return leader, self._endpoint(self.runtime.controller.image, leader)

    async def add_partitions_remote(self, coordinator, transactional_id: str, producer_id: int,
                                    producer_epoch: int, partitions, verify_only: bool) -> dict:
        """A partition leader asks the remote coordinator ``coordinator`` (from
        :meth:`remote_coordinator`) to verify (transactions v1) or add (v2) ``partitions``:
        AddPartitionsToTxn v4+, one transaction, as Kafka's AddPartitionsToTxnManager.
        {(topic, index): Errors}; a broker that cannot be reached is COORDINATOR_NOT_AVAILABLE
        (retriable for the producer)."""
        from kbroker.protocol.messages.add_partitions_to_txn import \
            AddPartitionsToTxnRequest as Req
        broker_id, endpoint = coordinator
        if endpoint is None:
            return {tp: Errors.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = Req(transactions=[Req.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=verify_only,
            topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])])
        try:
            response = await self.verify_channel.request(broker_id, endpoint,
                                                         "AddPartitionsToTxn", request)
        except BrokerClientError as exc:
            log.info("AddPartitionsToTxn for %s to broker %d: %s", transactional_id, broker_id,
                     exc)
            return {tp: Errors.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        top = Errors.for_code(response.error_code)
        results = {tp: top if top is not Errors.NONE else Errors.UNKNOWN_SERVER_ERROR
                   for tp in partitions}
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for r in topic.results_by_partition:
                    if (topic.name, r.partition_index) in results:
                        results[(topic.name, r.partition_index)] = Errors.for_code(
                            r.partition_error_code)
        return results

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> Errors:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [self.offsets_partition(group_id)])

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, self.groups.partition_for(group_id)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, tv2: bool = False):
        """(error, producer id, epoch the producer goes on with)."""
        return await self.write(transactional_id, lambda shard: ops.end_txn(
            shard, transactional_id, producer_id, producer_epoch, commit, tv2,
            self.producer_ids.next_id))

    # --- reads (DescribeTransactions, ListTransactions) ---------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata:
        return reads.describe(self, transactional_id)

    def list_transactions(self, state_filters, producer_id_filters, duration_filter_ms: int = -1,
                          pattern: str | None = None) -> reads.Listing:
        return reads.list_transactions(self, state_filters, producer_id_filters,
                                       duration_filter_ms, pattern, now_ms())

    # --- markers -------------------------------------------------------------------------------

    def send_markers(self, shard: TxnShard, prepared: TxnMetadata) -> None:
        if self._stopping:
            return  # the next host of the shard resumes them
        unmarked = self.unmarked[prepared.transactional_id] = set(prepared.partitions)
        task = asyncio.get_running_loop().create_task(
            self._write_markers(shard, prepared, unmarked),
            name=f"markers {prepared.transactional_id}")
        self._markers.add(task)
        task.add_done_callback(self._markers.discard)

    def write_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int, commit: bool,
                     transaction_version: int = 0) -> asyncio.Future:
        """Append one marker to a partition this broker leads; its committed future. Raises
        KafkaError. Also serves WriteTxnMarkers."""
        if topic == OFFSETS_TOPIC and self.groups is not None:
            return self.groups.runtime.append_txn_marker(index, producer_id, producer_epoch,
                                                         coordinator_epoch, commit,
                                                         transaction_version)
        partition = self.partitions.get(topic, index)
        if partition is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                             f"this broker has no partition {topic}-{index}")
        _, committed = partition.append_txn_marker(producer_id, producer_epoch, coordinator_epoch,
                                                   commit, now_ms(), transaction_version)
        return committed

    async def _write_markers(self, shard: TxnShard, prepared: TxnMetadata, unmarked: set) -> None:
        transactional_id = prepared.transactional_id
        try:
            await self._write_markers_and_complete(shard, prepared, unmarked)
        finally:
            if self.unmarked.get(transactional_id) is unmarked:
                del self.unmarked[transactional_id]
            waiter = self._completions.pop(transactional_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _write_markers_and_complete(self, shard: TxnShard, prepared: TxnMetadata,
                                          unmarked: set) -> None:
        index = shard.partition_index
        coordinator_epoch = shard.coordinator_epoch
        remaining = sorted(prepared.partitions)
        backoff, last_errors = _RETRY_S, {}
        while remaining:
            if self._stopping or self.runtime.shards.get(index) is not shard:
                return  # stopping or unloaded: the next host resumes the markers
            results = await self._write_markers_once(prepared, coordinator_epoch, remaining)
            retry, errors = [], {}
            for (topic, p), error in results.items():
                if error is Errors.NONE:
                    unmarked.discard((topic, p))
                elif error in _DROP_PARTITION:
                    unmarked.discard((topic, p))
                    log.warning("marker of %s for %s-%d not written: %s",
                                prepared.transactional_id, topic, p, error.name)
                else:
                    retry.append((topic, p))
                    errors[(topic, p)] = error
            if errors and errors != last_errors:  # one line per change, not per attempt
                log.info("markers of %s to retry: %s", prepared.transactional_id,
                         ", ".join(f"{t}-{p} {e.name}" for (t, p), e in sorted(errors.items())))
            last_errors = errors
            backoff = _RETRY_S if len(retry) < len(remaining) else min(2 * backoff, _MAX_RETRY_S)
            remaining = sorted(retry)
            if remaining:
                await asyncio.sleep(backoff)
        backoff = _RETRY_S
        while not self._stopping and self.runtime.shards.get(index) is shard:
            try:
                await self.runtime.write(index, lambda s: ops.complete(s, prepared))
                return
            except KafkaError as exc:
                log.warning("completing the transaction of %s failed: %s; retrying",
                            prepared.transactional_id, exc)
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, _MAX_RETRY_S)

    async def _write_markers_once(self, prepared: TxnMetadata, coordinator_epoch: int,
                                  partitions: list) -> dict:
        """One attempt at every marker, each partition routed to its leader in the current
        image: written here, or in one WriteTxnMarkers per other broker, all concurrently (a
        local marker waiting for its followers does not hold back the others).
        {(topic, index): Errors}."""
        image = self.runtime.controller.image
        results, remote = {}, {}
        sends, groups = [], []
        for topic, p in partitions:
            meta = image.topic(topic)
            if meta is None or p >= meta.num_partitions:
                results[(topic, p)] = Errors.UNKNOWN_TOPIC_OR_PARTITION  # gone: no marker
                log.warning("marker of %s for %s-%d dropped: the topic is gone",
                            prepared.transactional_id, topic, p)
                continue
            leader = meta.state(p).leader
            if leader == self.partitions.node_id:
                groups.append([(topic, p)])
                sends.append(self._write_local_marker(prepared, coordinator_epoch, topic, p))
            else:
                remote.setdefault(leader, []).append((topic, p))
        for leader, group in remote.items():
            endpoint = self._endpoint(image, leader)
            if endpoint is None:  # no leader, or it is offline: wait for the next image
                results.update((tp, Errors.LEADER_NOT_AVAILABLE) for tp in group)
                continue
            groups.append(group)
            sends.append(self.marker_channel.send(
                leader, endpoint, prepared.producer_id, prepared.producer_epoch,
                coordinator_epoch, prepared.commit, group, _transaction_version(prepared)))
        for group, answer in zip(groups, await asyncio.gather(*sends, return_exceptions=True)):
            if isinstance(answer, BaseException):
                if isinstance(answer, asyncio.CancelledError):
                    raise answer
                log.error("markers of %s: %r", prepared.transactional_id, answer)
                answer = {tp: Errors.UNKNOWN_SERVER_ERROR for tp in group}
            results.update(answer)
        return results

    async def _write_local_marker(self, prepared: TxnMetadata, coordinator_epoch: int,
                                  topic: str, index: int) -> dict:
        try:
            # Shielded: our cancel (a stop) must not cancel the partition's commit future.
            await asyncio.shield(self.write_marker(topic, index, prepared.producer_id,
                                                   prepared.producer_epoch, coordinator_epoch,
                                                   prepared.commit, _transaction_version(prepared)))
            return {(topic, index): Errors.NONE}
        except KafkaError as exc:
            return {(topic, index): exc.error}

    def _endpoint(self, image, broker_id: int):
        broker = image.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        endpoint = broker.endpoints.get(self.config.inter_broker_listener_name)
        return endpoint if endpoint is not None else next(iter(broker.endpoints.values()))

    # --- timeouts ------------------------------------------------------------------------------

    async def abort_timed_out(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        total = 0
        for index, shard in list(self.runtime.shards.items()):
            if not shard.loading:
                total += await self.runtime.write(index, lambda s: ops.abort_timed_out(
                    s, now, self.producer_ids.next_id))
        return total

    async def expire_ids(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        expiration = self.config.get("transactional.id.expiration.ms")
        total = 0
        for index, shard in list(self.runtime.shards.items()):
            if not shard.loading:
                total += await self.runtime.write(
                    index, lambda s: ops.expire_ids(s, now, expiration))
        return total

    async def _expire_ids_periodically(self) -> None:
        interval = self.config.get(
            "transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_ids()
            except KafkaError as exc:
                log.warning("expiring transactional ids: %s", exc)
            except Exception:
                log.exception("expiring transactional ids failed")

    async def _abort_timed_out_periodically(self) -> None:
        interval = self.config.get(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
            except KafkaError as exc:
                log.warning("aborting timed-out transactions: %s", exc)
            except Exception:
                log.exception("aborting timed-out transactions failed")


def _transaction_version(prepared: TxnMetadata) -> int:
    """What a marker tells the partition (WriteTxnMarkers v2): 2 when the coordinator bumped the
    producer's epoch for it."""
    return 2 if prepared.tv2 else 0
