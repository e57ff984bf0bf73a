"""Share sessions (KIP-932): Kafka's ``ShareSessionCache`` and ``ShareSession``.

A share consumer keeps one session per broker, keyed by (group id, member id). Its first
ShareFetch has epoch 0 and opens it (replacing any older one; acknowledgements are not allowed in
it: INVALID_REQUEST); each later request carries the session's epoch, which the broker then
increments (wrapping to 1); epoch -1 closes it. A ShareAcknowledge may not open a session
(INVALID_SHARE_SESSION_EPOCH for epoch 0). Errors: SHARE_SESSION_NOT_FOUND for an unknown
session, INVALID_SHARE_SESSION_EPOCH for a wrong epoch, SHARE_SESSION_LIMIT_REACHED when
``group.share.max.share.sessions`` are open.

The session remembers which partitions the member fetches (added by each request's topics,
removed by its forgotten topics); later responses list only partitions with records, an error,
or news since the last response. A session dies with its connection: :meth:`connection_closed`
returns what to release.
"""

from __future__ import annotations

import uuid

from kbroker.protocol.errors import Errors, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2**31 - 1

PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch in (INITIAL_EPOCH, INT_MAX) else epoch + 1


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions", "connection", "needs_update")

    def __init__(self, group_id: str, member_id: str, partitions: list[PartitionKey],
                 connection):
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        # dict for its insertion order; the value: answer this partition in the next response
        # even without records (it had an error last time).
        self.partitions: dict[PartitionKey, bool] = dict.fromkeys(partitions, False)
        self.connection = connection

    def update(self, added: list[PartitionKey], forgotten: list[PartitionKey]) -> None:
        for key in added:
            self.partitions.setdefault(key, False)
        for key in forgotten:
            self.partitions.pop(key, None)


class ShareSessionCache:
    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def for_fetch(self, group_id: str, member_id: str, epoch: int,
                  partitions: list[PartitionKey], forgotten: list[PartitionKey],
                  acknowledging: bool, connection) -> tuple[ShareSession, bool]:
        """The session a ShareFetch runs in and whether it is a full (epoch 0) one; the epoch is
        already moved on for the next request. Raises KafkaError as Kafka's
        SharePartitionManager.newContext."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND)
            return session, True
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise KafkaError(Errors.INVALID_REQUEST,
                                 "a share session's opening fetch (epoch 0) cannot acknowledge")
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise KafkaError(Errors.SHARE_SESSION_LIMIT_REACHED)
            session = self.sessions[key] = ShareSession(group_id, member_id, partitions,
                                                        connection)
            return session, True
        session = self._check(key, epoch)
        session.update(partitions, forgotten)
        session.epoch = next_epoch(session.epoch)
        return session, False

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """ShareAcknowledge: epoch 0 is refused; -1 checks only that the session exists."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH)
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self.sessions.get(key)
            if session is None:
                raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND)
            return session
        session = self._check(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return session

    def _check(self, key, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(Errors.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise KafkaError(Errors.INVALID_SHARE_SESSION_EPOCH)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def connection_closed(self, connection) -> list[ShareSession]:
        """The sessions opened on a connection that is gone (removed here)."""
        gone = [s for s in self.sessions.values() if s.connection is connection]
        for session in gone:
            del self.sessions[(session.group_id, session.member_id)]
        return gone
