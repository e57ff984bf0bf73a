"""Incremental fetch sessions (KIP-227), the leader's side, for replica fetches.

A follower fetching thousands of partitions from a leader would otherwise list every one of
them in every request, and the leader would answer every one, most with nothing new: at 10,000
partitions per leader that is ~300 KB decoded and encoded twice a second per follower. With a
session, the leader remembers what each partition of the fetch asks for (offset, epochs, byte
limit) and what it last told the follower (high watermark, last stable offset, log start
offset). The follower then sends only the partitions whose fetch changed and those it no longer
wants (``forgotten_topics_data``); the leader still reads every partition of the session, but
answers only those with something to say: records, an error, a diverging epoch, or offsets
that moved. Kafka's FetchSession / FetchManager semantics:

- ``session_epoch`` -1 (FINAL): no session; a ``session_id`` given is closed first;
- ``session_epoch`` 0 (INITIAL): a full fetch that asks for a new session (``session_id``, if
  given, is closed first); the answer carries the new id, or 0 when none is made;
- any other epoch: an incremental fetch of session ``session_id``; an unknown id answers
  FETCH_SESSION_ID_NOT_FOUND, an epoch other than the one expected INVALID_FETCH_SESSION_EPOCH
  (top-level errors, no partitions); the follower then starts over with a full fetch.

Sessions are made for replica fetches only. Consumers asking for one get session id 0, which
the protocol allows and which makes them send full fetches, as before (their fetches list the
partitions they consume, not a broker's worth). At most ``max.incremental.fetch.session.cache.
slots`` sessions are kept; a new one evicts the least recently used.
"""

from __future__ import annotations

import logging
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from kbroker.protocol.errors import Errors
from kbroker.replica.partition import LEADER

log = logging.getLogger("kbroker.fetch")

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch: it wraps to 1, never 0)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


class CachedPartition:
    """One partition of a session: what the fetch asks (``wanted``, the last request's entry
    for it) and what the leader last answered."""

    __slots__ = ("topic", "wanted", "high_watermark", "last_stable_offset", "log_start_offset")

    def __init__(self, topic, wanted):
        self.topic = topic
        self.wanted = wanted
        self.high_watermark = self.last_stable_offset = self.log_start_offset = None


@dataclass
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental fetch must carry
    replica_id: int
    # (topic key, partition) -> CachedPartition, in fetch order; the topic key is the topic id
    # from Fetch v13 on, its name before.
    partitions: OrderedDict = field(default_factory=OrderedDict)
    topics: dict = field(default_factory=dict)  # topic key -> the topic entry partitions share


def _topic_key(topic, by_id: bool):
    return topic.topic_id if by_id else topic.topic


class FetchContext:
    """How one Fetch request is read and answered: ``wanted()`` the (topic, partition request)
    pairs to read, ``finish(response)`` the answer as the session wants it."""

    error = None
    # ``quiet(wanted, partition)``: whether a partition has nothing to tell this fetch (it is
    # then not even read); None where every partition is read (no per-partition call on a
    # consumer's fetch).
    quiet = None

    def wanted(self):
        raise NotImplementedError

    def finish(self, response):
        return response


class Sessionless(FetchContext):
    """A full fetch without a session (session id 0 in the answer)."""

    def __init__(self, request):
        self.request = request

    def wanted(self):
        return [(topic, wanted) for topic in self.request.topics for wanted in topic.partitions]


class SessionError(FetchContext):
    def __init__(self, error):
        self.error = error

    def wanted(self):
        return []


class NewSession(Sessionless):
    """A full fetch whose answer opens ``session`` with every partition it names."""

    def __init__(self, request, session: FetchSession, by_id: bool):
        super().__init__(request)
        self.session, self.by_id = session, by_id
        for topic in request.topics:
            key = _topic_key(topic, by_id)
            shared = session.topics.setdefault(key, topic)
            for wanted in topic.partitions:
                session.partitions[(key, wanted.partition)] = CachedPartition(shared, wanted)

    def finish(self, response):
        response.session_id = self.session.session_id
        _remember(self.session, response, self.by_id, keep_all=True)
        return response


class Incremental(FetchContext):
    """An incremental fetch of ``session``: every partition of the session is read; the answer
    holds those with something to say."""

    def __init__(self, request, session: FetchSession, by_id: bool):
        self.session, self.by_id = session, by_id
        partitions, topics = session.partitions, session.topics
        for topic in request.topics:
            key = _topic_key(topic, by_id)
            shared = topics.setdefault(key, topic)
            for wanted in topic.partitions:
                cached = partitions.get((key, wanted.partition))
                if cached is None:
                    partitions[(key, wanted.partition)] = CachedPartition(shared, wanted)
                else:
                    cached.wanted = wanted
        for topic in request.forgotten_topics_data or ():
            key = _topic_key(topic, by_id)
            for index in topic.partitions:
                partitions.pop((key, index), None)
        session.epoch = next_epoch(session.epoch)

    def wanted(self):
        cached = self.session.partitions.values()
        self._cached = {id(c.wanted): c for c in cached}
        return [(c.topic, c.wanted) for c in cached]

    def quiet(self, wanted, partition) -> bool:
        """A follower at this leader's log end, told the offsets as they are: nothing to read,
        no divergence, nothing to answer. The leader skips the read (at 10,000 partitions per
        session that is most of an idle fetch's cost). No divergence is possible when the
        follower names no epoch (an empty log: the read checks none either) or this log's
        latest one (which ends at the log end)."""
        cached = self._cached.get(id(wanted))
        if (cached is None or partition.role != LEADER
                or wanted.fetch_offset != partition.log_end_offset):
            return False
        if wanted.last_fetched_epoch >= 0:
            latest = partition.latest_epoch
            if wanted.last_fetched_epoch != (-1 if latest is None else latest):
                return False
        return (cached.high_watermark == partition.high_watermark
                and cached.last_stable_offset == partition.last_stable_offset
                and cached.log_start_offset == partition.log_start_offset)

    def finish(self, response):
        response.session_id = self.session.session_id
        _remember(self.session, response, self.by_id, keep_all=False)
        return response


def _remember(session: FetchSession, response, by_id: bool, keep_all: bool) -> None:
    """Record what the answer tells the follower; unless ``keep_all``, drop from it the
    partitions with nothing new. Partitions that got records move to the end of the session,
    so the response's byte budget goes to the others first next time (as Kafka does)."""
    partitions = session.partitions
    moved = []
    kept_topics = []
    for topic in response.responses:
        key = topic.topic_id if by_id else topic.topic
        kept = []
        for out in topic.partitions:
            cached = partitions.get((key, out.partition_index))
            if cached is None:
                continue
            has_records = bool(out.records)
            if (keep_all or has_records or out.error_code
                    or (out.diverging_epoch is not None and out.diverging_epoch.epoch >= 0)
                    or out.high_watermark != cached.high_watermark
                    or out.last_stable_offset != cached.last_stable_offset
                    or out.log_start_offset != cached.log_start_offset):
                kept.append(out)
                cached.high_watermark = out.high_watermark
                cached.last_stable_offset = out.last_stable_offset
                cached.log_start_offset = out.log_start_offset
                if has_records:
                    moved.append((key, out.partition_index))
        if kept:
            topic.partitions = kept
            kept_topics.append(topic)
    response.responses = kept_topics
    for key in moved:
        partitions.move_to_end(key)


class FetchSessionCache:
    """The broker's fetch sessions (at most ``slots``), by id."""

    def __init__(self, slots: int):
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, request, by_id: bool, replica_id: int) -> FetchContext:
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if session_id:
                self._sessions.pop(session_id, None)
            if epoch == INITIAL_EPOCH and replica_id >= 0 and self.slots > 0:
                return NewSession(request, self._new(replica_id), by_id)
            return Sessionless(request)
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            log.info("fetch session %d of replica %d: epoch %d, expected %d; the follower "
                     "starts over", session_id, replica_id, epoch, session.epoch)
            return SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        return Incremental(request, session, by_id)

    def _new(self, replica_id: int) -> FetchSession:
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        session_id = random.randrange(1, _MAX_EPOCH)  # 0 means "no session"
        while session_id in self._sessions:
            session_id = random.randrange(1, _MAX_EPOCH)
        session = FetchSession(session_id, next_epoch(INITIAL_EPOCH), replica_id)
        self._sessions[session_id] = session
        return session
