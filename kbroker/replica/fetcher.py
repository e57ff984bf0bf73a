"""Replica fetchers: a follower copies its leaders' logs with the Fetch API.

One :class:`ReplicaFetcher` task per (leader broker, fetcher id); a partition goes to fetcher
``hash(topic, partition) % num.replica.fetchers`` of its leader, as in Kafka's
AbstractFetcherManager. A fetcher loops over its partitions:

1. *Truncating* (KIP-101 / KIP-279): a partition that just started following asks the leader
   ``OffsetForLeaderEpoch(latest local epoch)`` and truncates to where the two logs agree; when
   the leader answers an epoch this replica never saw, it truncates to the end of its own
   previous epoch and asks again, so two leader changes in a row cannot leave a divergent tail.
   With Fetch v12+ (and a local epoch to name), Kafka skips this round trip: the fetch carries
   ``last_fetched_epoch`` and the leader answers ``diverging_epoch`` when the logs disagree, which
   this fetcher treats exactly like an OffsetForLeaderEpoch answer.
2. *Fetching*: ``Fetch`` from the log end offset with the follower's replica id
   (``ReplicaState`` from v15, KIP-903), ``current_leader_epoch`` for fencing,
   ``replica.fetch.{max.bytes,min.bytes,wait.max.ms,response.max.bytes}``; batches are appended
   as they are (offsets and epochs kept, leader-epoch checkpoint maintained by the log) and the
   leader's high watermark is taken, bounded by the local log end offset.
3. Errors: OFFSET_OUT_OF_RANGE resets the fetch position from the leader's ListOffsets (truncate
   to its end offset, or start over at its log start offset); leader/epoch errors back off for
   ``replica.fetch.backoff.ms`` until the next metadata image moves the partition; a lost
   connection backs off and reconnects.

Concurrency rule: each fetcher is one asyncio task owning its partition states; the manager
adds and removes partitions from the event loop (metadata images), never while a response is
being applied (the task re-checks each partition's leader epoch after every await).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from dataclasses import dataclass
from typing import Callable

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.replica.broker_client import BrokerClient, BrokerClientError

log = logging.getLogger("kbroker.replicas.fetcher")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
_RETRY_LATER = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH,
                          Errors.UNKNOWN_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                          Errors.UNKNOWN_TOPIC_ID, Errors.REPLICA_NOT_AVAILABLE,
                          Errors.KAFKA_STORAGE_ERROR})


@dataclass(frozen=True)
class FetcherSettings:
    """Kafka's follower settings (``replica.*``, ``num.replica.fetchers``)."""

    num_fetchers: int = 1                  # num.replica.fetchers
    fetch_max_bytes: int = 1048576         # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10485760     # replica.fetch.response.max.bytes
    wait_max_ms: int = 500                 # replica.fetch.wait.max.ms
    min_bytes: int = 1                     # replica.fetch.min.bytes
    backoff_ms: int = 1000                 # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30000         # replica.socket.timeout.ms
    # Use Fetch's diverging_epoch (v12+) instead of an OffsetForLeaderEpoch round trip when the
    # leader supports it (Kafka's truncation on fetch, KIP-595's follower side). Tests turn it
    # off to exercise the OffsetForLeaderEpoch path.
    truncate_on_fetch: bool = True

    @classmethod
    def from_config(cls, config) -> "FetcherSettings":
        return cls(num_fetchers=config.get("num.replica.fetchers"),
                   fetch_max_bytes=config.get("replica.fetch.max.bytes"),
                   response_max_bytes=config.get("replica.fetch.response.max.bytes"),
                   wait_max_ms=config.get("replica.fetch.wait.max.ms"),
                   min_bytes=config.get("replica.fetch.min.bytes"),
                   backoff_ms=config.get("replica.fetch.backoff.ms"),
                   socket_timeout_ms=config.get("replica.socket.timeout.ms"))


def fetcher_id(topic: str, index: int, num_fetchers: int) -> int:
    """Which of a leader's fetchers serves a partition; stable across restarts."""
    return (zlib.crc32(topic.encode()) * 31 + index) % max(num_fetchers, 1)


class _PartitionFetch:
    """One partition inside a fetcher: the leader epoch it follows and its fetch state."""

    __slots__ = ("partition", "leader_epoch", "truncating", "delayed_until")

    def __init__(self, partition, truncating: bool):
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.truncating = truncating
        self.delayed_until = 0.0

    @property
    def current(self) -> bool:
        """Still following the leader and epoch this state was made for."""
        p = self.partition
        return p.role == "follower" and p.leader_epoch == self.leader_epoch


class _FetchSession:
    """The follower's side of an incremental fetch session (KIP-227) with one leader, Kafka's
    FetchSessionHandler: the first fetch is full and asks for a session (epoch 0); once the
    leader gives one, each fetch carries only the partitions whose fetch changed (offset, log
    start, epochs) and those no longer fetched, with the next epoch. A new connection, or any
    error the leader answers, starts over with a full fetch."""

    __slots__ = ("client", "session_id", "epoch", "sent", "topic_ids")

    def __init__(self):
        self.client = None
        self.reset(None)

    def reset(self, client) -> None:
        self.client = client
        self.session_id = 0
        self.epoch = 0  # 0: a full fetch that asks for a session
        self.sent: dict[tuple[str, int], tuple] = {}  # what the leader holds, per partition
        self.topic_ids: dict[str, object] = {}

    def changed(self, wanted: dict) -> list:
        if not self.session_id:
            return list(wanted)
        sent = self.sent
        return [key for key, params in wanted.items() if sent.get(key) != params]

    def forgotten(self, wanted: dict) -> list:
        if not self.session_id:
            return []
        return [key for key in self.sent if key not in wanted]

    def answered(self, session_id: int, wanted: dict, sent: list, forgotten: list) -> None:
        """A fetch was answered without a top-level error."""
        if not self.session_id:
            if not session_id:  # the leader keeps no session: full fetches again
                return
            self.session_id, self.epoch, self.sent = session_id, 1, {}
        else:
            self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
            for key in forgotten:
                del self.sent[key]
        for key in sent:
            self.sent[key] = wanted[key]
            self.topic_ids[key[0]] = wanted[key][0]


class ReplicaFetcherManager:
    """All fetchers of this broker. ``endpoint_for(leader_id)`` gives the leader's (host, port)
    on the inter-broker listener, or None while the leader is not a live broker; ``security``
    (an InterBrokerSecurity, None for PLAINTEXT) is how fetchers connect to it."""

    def __init__(self, node_id: int, settings: FetcherSettings,
                 endpoint_for: Callable[[int], tuple[str, int] | None], security=None):
        self.node_id = node_id
        self.settings = settings
        self.endpoint_for = endpoint_for
        self.security = security
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[tuple[str, int], tuple[int, int]] = {}

    def add_partition(self, partition) -> None:
        """Follow ``partition.leader_id`` from the partition's log end offset (after truncation)."""
        self.remove_partition(partition)
        if partition.leader_id < 0 or partition.leader_id == self.node_id:
            return
        key = (partition.leader_id,
               fetcher_id(partition.topic, partition.index, self.settings.num_fetchers))
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = ReplicaFetcher(self, *key)
        fetcher.add(partition)
        self._where[(partition.topic, partition.index)] = key

    def remove_partition(self, partition) -> None:
        key = self._where.pop((partition.topic, partition.index), None)
        if key is None:
            return
        fetcher = self._fetchers[key]
        fetcher.remove(partition)
        if not fetcher.partitions:
            del self._fetchers[key]
            fetcher.stop()

    def fetcher_count(self) -> int:
        return len(self._fetchers)

    def is_fetching(self, partition) -> bool:
        return (partition.topic, partition.index) in self._where

    async def shutdown(self) -> None:
        for fetcher in self.cancel_all():
            await fetcher.wait_stopped()

    def cancel_all(self) -> list:
        """Stop every fetcher now (their tasks end at the next turn of the loop)."""
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._where.clear()
        for fetcher in fetchers:
            fetcher.stop()
        return fetchers


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_index: int):
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_index = fetcher_index
        self.partitions: dict[tuple[str, int], _PartitionFetch] = {}
        self._client: BrokerClient | None = None
        self._endpoint: tuple[str, int] | None = None
        self._failures = 0
        self._stopped = False
        self._session = _FetchSession()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{leader_id}-{fetcher_index}")

    def add(self, partition) -> None:
        # Without a local epoch there is no divergence to find: Kafka truncates to the HW.
        truncating = (not self.manager.settings.truncate_on_fetch
                      or partition.latest_epoch is None)
        self.partitions[(partition.topic, partition.index)] = _PartitionFetch(partition,
                                                                             truncating)

    def remove(self, partition) -> None:
        self.partitions.pop((partition.topic, partition.index), None)

    def stop(self) -> None:
        self._stopped = True  # ends the loop even if a cancel is swallowed on the way
        self._task.cancel()
        if self._client is not None:
            self._client.close()

    async def wait_stopped(self) -> None:
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    # --- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        settings = self.manager.settings
        while self.partitions and not self._stopped:
            try:
                client = await self._connected_client()
                await self._truncate(client)
                if not await self._fetch(client):
                    await asyncio.sleep(min(settings.backoff_ms, settings.wait_max_ms) / 1000)
                self._failures = 0
            except BrokerClientError as exc:
                self._failures += 1
                if self._failures == 1 or self._failures % 60 == 0:
                    log.warning("replica fetcher %d for leader %d: %s (retrying every %d ms)",
                                self.fetcher_index, self.leader_id, exc, settings.backoff_ms)
                if self._client is not None:
                    self._client.close()
                    self._client = None
                await asyncio.sleep(settings.backoff_ms / 1000)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not silently end replication from this leader
                log.exception("replica fetcher %d for leader %d failed; retrying in %d ms",
                              self.fetcher_index, self.leader_id, settings.backoff_ms)
                if self._client is not None:
                    self._client.close()
                    self._client = None
                await asyncio.sleep(settings.backoff_ms / 1000)

    async def _connected_client(self) -> BrokerClient:
        endpoint = self.manager.endpoint_for(self.leader_id)
        if endpoint is None:
            raise BrokerClientError(f"broker {self.leader_id} is not live (no endpoint)")
        if self._client is not None and (not self._client.connected or endpoint != self._endpoint):
            self._client.close()
            self._client = None
        if self._client is None:
            settings = self.manager.settings
            client = BrokerClient(endpoint[0], endpoint[1],
                                  client_id=f"broker-{self.manager.node_id}-fetcher-"
                                            f"{self.fetcher_index}",
                                  timeout_s=settings.socket_timeout_ms / 1000,
                                  # KIP-74: one batch may exceed the limits (up to the
                                  # topic's max.message.bytes); Kafka's own frame cap is 100 MB.
                                  max_response_bytes=max(settings.response_max_bytes,
                                                         settings.fetch_max_bytes) + (100 << 20),
                                  security=self.manager.security)
            await client.connect()
            self._client, self._endpoint = client, endpoint
            if client.version_for("Fetch") < 12:  # no diverging_epoch: ask first, every time
                for state in self.partitions.values():
                    state.truncating = True
        return self._client

    def _ready(self, now: float):
        return [s for s in self.partitions.values() if s.current and s.delayed_until <= now]

    def _delay(self, state: _PartitionFetch) -> None:
        state.delayed_until = time.monotonic() + self.manager.settings.backoff_ms / 1000

    # --- truncation (KIP-101 / KIP-279) ------------------------------------------------------

    async def _truncate(self, client: BrokerClient) -> None:
        while True:
            pending = [s for s in self._ready(time.monotonic()) if s.truncating]
            if not pending:
                return
            asking = []
            for state in pending:
                if state.partition.latest_epoch is None:
                    # Nothing to compare: keep what is known committed (Kafka's pre-KIP-101 rule).
                    state.partition.truncate_to(state.partition.high_watermark)
                    state.truncating = False
                else:
                    asking.append(state)
            if not asking:
                return
            answers = await self._offsets_for_leader_epoch(client, asking)
            for state in asking:
                answer = answers.get((state.partition.topic, state.partition.index))
                if not state.current:
                    continue
                if answer is None or answer[0] != Errors.NONE:
                    error = answer[0] if answer else Errors.UNKNOWN_SERVER_ERROR
                    log.info("%s-%d: OffsetForLeaderEpoch from leader %d: %s; retrying",
                             state.partition.topic, state.partition.index, self.leader_id,
                             error.name)
                    self._delay(state)
                    continue
                self._apply_truncation(state, answer[1], answer[2])

    async def _offsets_for_leader_epoch(self, client, states) -> dict:
        from kbroker.protocol.messages.offset_for_leader_epoch import \
            OffsetForLeaderEpochRequest as Q

        by_topic: dict[str, list] = {}
        for state in states:
            p = state.partition
            by_topic.setdefault(p.topic, []).append(Q.OffsetForLeaderPartition(
                partition=p.index, current_leader_epoch=state.leader_epoch,
                leader_epoch=p.latest_epoch))
        request = Q(replica_id=self.manager.node_id, topics=[
            Q.OffsetForLeaderTopic(topic=topic, partitions=parts)
            for topic, parts in by_topic.items()])
        response = await client.request("OffsetForLeaderEpoch", request)
        return {(t.topic, p.partition): (_error(p.error_code), p.leader_epoch, p.end_offset)
                for t in response.topics for p in t.partitions}

    def _apply_truncation(self, state: _PartitionFetch, leader_epoch: int,
                          leader_end_offset: int) -> None:
        """Kafka's AbstractFetcherThread.getOffsetTruncationState, then truncate."""
        p = state.partition
        end = p.log_end_offset
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            offset, done = p.high_watermark, True
        elif leader_epoch == UNDEFINED_EPOCH:
            offset, done = min(leader_end_offset, end), True
        else:
            follower_epoch, follower_end = p.end_offset_for_epoch(leader_epoch)
            if follower_epoch == UNDEFINED_EPOCH:
                offset, done = min(leader_end_offset, end), True
            elif follower_epoch != leader_epoch:
                # An epoch this replica never saw: cut back to the end of our last epoch below
                # it and ask again about that one (the KIP-279 case).
                offset, done = min(follower_end, end), False
            else:
                offset, done = min(follower_end, leader_end_offset, end), True
        p.truncate_to(offset)
        state.truncating = not done

    # --- fetching ----------------------------------------------------------------------------

    async def _fetch(self, client: BrokerClient) -> bool:
        """One Fetch round trip; False when nothing was ready to fetch."""
        from kbroker.protocol.messages.fetch import FetchRequest as Q

        ready = [s for s in self._ready(time.monotonic()) if not s.truncating]
        if not ready:
            return False
        settings = self.manager.settings
        version = client.version_for("Fetch")
        session = self._session
        if session.client is not client:
            session.reset(client)
        wanted = {}
        for s in ready:
            p = s.partition
            wanted[(p.topic, p.index)] = (p.topic_id, s.leader_epoch, p.log_end_offset,
                                          _or_undefined(p.latest_epoch) if version >= 12
                                          else -1, p.log_start_offset)
        # In a session only what changed goes out; the leader remembers the rest.
        sending = session.changed(wanted)
        forgetting = session.forgotten(wanted)
        by_topic: dict[str, list] = {}
        for key in sending:
            by_topic.setdefault(key[0], []).append(key)
        topics = []
        for topic, keys in by_topic.items():
            topics.append(Q.FetchTopic(topic=topic, topic_id=wanted[keys[0]][0], partitions=[
                Q.FetchPartition(partition=key[1], current_leader_epoch=wanted[key][1],
                                 fetch_offset=wanted[key][2], last_fetched_epoch=wanted[key][3],
                                 log_start_offset=wanted[key][4],
                                 partition_max_bytes=settings.fetch_max_bytes)
                for key in keys]))
        forgotten_by_topic: dict[str, list] = {}
        for topic, index in forgetting:
            forgotten_by_topic.setdefault(topic, []).append(index)
        request = Q(max_wait_ms=settings.wait_max_ms, min_bytes=settings.min_bytes,
                    max_bytes=settings.response_max_bytes, isolation_level=0,
                    session_id=session.session_id, session_epoch=session.epoch, topics=topics,
                    forgotten_topics_data=[
                        Q.ForgottenTopic(topic=topic, topic_id=session.topic_ids[topic],
                                         partitions=indexes)
                        for topic, indexes in forgotten_by_topic.items()])
        if version >= 15:
            request.replica_state = Q.ReplicaState(replica_id=self.manager.node_id,
                                                   replica_epoch=-1)
        else:
            request.replica_id = self.manager.node_id
        sent_offsets = {key: params[2] for key, params in wanted.items()}
        response = await client.request("Fetch", request, version)
        if response.error_code:
            error = _error(response.error_code)
            session.reset(client)
            if error in (Errors.FETCH_SESSION_ID_NOT_FOUND, Errors.INVALID_FETCH_SESSION_EPOCH):
                # The leader lost or moved on from the session (restarted, evicted it): start
                # over with a full fetch at once.
                log.info("fetch session with leader %d: %s; starting a new one",
                         self.leader_id, error.name)
                return True
            log.info("Fetch from leader %d failed: %s", self.leader_id, error.name)
            for state in ready:
                self._delay(state)
            return True
        session.answered(response.session_id, wanted, sending, forgetting)
        names_by_id = {s.partition.topic_id: s.partition.topic for s in ready}
        for topic in response.responses:
            name = names_by_id.get(topic.topic_id) if version >= 13 else topic.topic
            for data in topic.partitions:
                state = self.partitions.get((name, data.partition_index))
                # The partition may have changed leader or epoch while the fetch was out.
                if (state is None or not state.current or state.truncating
                        or state.partition.log_end_offset
                        != sent_offsets.get((name, data.partition_index))):
                    continue
                await self._apply_fetched(client, state, data, version)
        return True

    async def _apply_fetched(self, client, state: _PartitionFetch, data, version: int) -> None:
        p = state.partition
        error = _error(data.error_code)
        if error == Errors.NONE:
            diverging = data.diverging_epoch
            if version >= 12 and diverging is not None and diverging.epoch >= 0:
                self._apply_truncation(state, diverging.epoch, diverging.end_offset)
                return
            try:
                if p.append_as_follower(data.records, data.high_watermark,
                                        data.log_start_offset):
                    # Partitions that got data go last next time: the response's byte budget
                    # goes to the first ones, so the order rotates (Kafka's fetch sessions do).
                    key = (p.topic, p.index)
                    self.partitions[key] = self.partitions.pop(key)
            except KafkaError as exc:
                log.warning("%s-%d: cannot append what leader %d sent: %s", p.topic, p.index,
                            self.leader_id, exc.message)
                self._delay(state)
        elif error == Errors.OFFSET_OUT_OF_RANGE:
            await self._reset_out_of_range(client, state)
        elif error in _RETRY_LATER:
            self._delay(state)
        else:
            log.warning("%s-%d: fetch from leader %d answered %s", p.topic, p.index,
                        self.leader_id, error.name)
            self._delay(state)

    async def _reset_out_of_range(self, client, state: _PartitionFetch) -> None:
        """Kafka's fetchOffsetAndTruncate: the leader's end is below ours (an unclean election)
        -> truncate to it; else start at max(our end, the leader's log start offset)."""
        p = state.partition
        leader_end = await self._list_offset(client, state, LATEST_TIMESTAMP)
        if leader_end is None or not state.current:
            self._delay(state)
            return
        if leader_end < p.log_end_offset:
            log.warning("%s-%d: leader %d ends at %d, below this replica's %d: truncating",
                        p.topic, p.index, self.leader_id, leader_end, p.log_end_offset)
            p.truncate_to(leader_end)
            return
        leader_start = await self._list_offset(client, state, EARLIEST_TIMESTAMP)
        if leader_start is None or not state.current:
            self._delay(state)
            return
        if leader_start > p.log_end_offset:
            p.truncate_fully_and_start_at(leader_start)

    async def _list_offset(self, client, state: _PartitionFetch, timestamp: int) -> int | None:
        from kbroker.protocol.messages.list_offsets import ListOffsetsRequest as Q

        p = state.partition
        request = Q(replica_id=self.manager.node_id, isolation_level=0, topics=[
            Q.ListOffsetsTopic(name=p.topic, partitions=[Q.ListOffsetsPartition(
                partition_index=p.index, current_leader_epoch=state.leader_epoch,
                timestamp=timestamp)])])
        response = await client.request("ListOffsets", request)
        for topic in response.topics:
            for answer in topic.partitions:
                if answer.error_code == 0:
                    return answer.offset
                log.info("%s-%d: ListOffsets from leader %d: %s", p.topic, p.index,
                         self.leader_id, _error(answer.error_code).name)
        return None


def _or_undefined(epoch: int | None) -> int:
    return UNDEFINED_EPOCH if epoch is None else epoch


def _error(code: int):
    return Errors.for_code(code)
