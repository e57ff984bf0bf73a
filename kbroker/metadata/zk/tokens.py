"""Delegation tokens in ZooKeeper, in Kafka 3.x's layout (DelegationTokenManagerZk).

Each token is ``/delegation_token/tokens/<token id>`` (Kafka's JSON, :func:`.znodes.encode_token`);
every change (a creation, a renewal, an expiry time set, a removal) is followed by a sequential
``/delegation_token/token_changes/token_change_N`` holding the token id, which every broker
watches: it re-reads the token it names (gone: removed). The HMAC is never stored: each broker
computes it from the id and its ``delegation.token.secret.key``, which must be the same on all.

A write reads each token znode's version fresh and commits one transaction (conditional on
those versions, fenced by the controller epoch when this broker is the controller) with the
token znodes and one notification per token; a lost race re-reads and tries again.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import MetadataImage, TokenInfo
from kbroker.metadata.zk import znodes as zn
from kbroker.metadata.zk.security import _attempts, _read_for_write, _write_or_create

log = logging.getLogger("kbroker.metadata.zk")


async def write_tokens(store, changes: Mapping[str, TokenInfo | None]) -> None:
    zk = store._zk

    async def attempt(txn):
        for token_id, info in sorted(changes.items()):
            path = zn.token_path(token_id)
            _, version = await _read_for_write(zk, path)
            if info is not None:
                _write_or_create(txn, path, zn.encode_token(info), version)
            elif version is not None:
                txn.delete(path, version)
            txn.create(zn.TOKEN_CHANGE_PREFIX, token_id.encode(), sequence=True)

    await _attempts(store, "changing delegation tokens", attempt)


def _decoded(path: str, data: bytes) -> TokenInfo | None:
    try:
        return zn.decode_token(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring an unreadable delegation token znode %s (%s)", path, exc)
        return None


async def read_all(reader) -> list[TokenInfo]:
    """Every token ZooKeeper holds."""
    ids = await reader.children(zn.TOKENS)
    found = await reader.get_many(zn.token_path(t) for t in ids)
    tokens = []
    for path, (data, _) in sorted(found.items()):
        info = _decoded(path, data)
        if info is not None:
            tokens.append(info)
    return tokens


async def read_named(reader, image: MetadataImage, token_ids: Iterable[str]) -> MetadataDelta:
    """The delta of the tokens a notification names: each as ZooKeeper holds it, or gone."""
    ids = sorted(set(token_ids))
    found = await reader.get_many(zn.token_path(t) for t in ids)
    changes = {}
    for token_id in ids:
        entry = found.get(zn.token_path(token_id))
        info = _decoded(zn.token_path(token_id), entry[0]) if entry else None
        if info != image.delegation_tokens.get(token_id):
            changes[token_id] = info
    return MetadataDelta(tokens=changes)


def delta_to(image: MetadataImage, tokens: list[TokenInfo]) -> MetadataDelta:
    """The delta that makes the image's tokens ``tokens`` (the safety net's full read)."""
    now = {t.token_id: t for t in tokens}
    changes = {token_id: now.get(token_id) for token_id in
               image.delegation_tokens.keys() | now.keys()
               if now.get(token_id) != image.delegation_tokens.get(token_id)}
    return MetadataDelta(tokens=changes)
