"""Delegation tokens (KIP-48): the rules of creating, renewing, expiring and finding them.

Each decision reads the current image and returns the change (token id -> TokenInfo, None
removes) with its answer; the controller commits the change through its pipeline
(:meth:`kbroker.metadata.controller.Controller.change_delegation_tokens`). The rules are Kafka's
(its ZooKeeper-era DelegationTokenManager):

- **create**: a fresh id (a random UUID, URL-safe base64 without padding), issued now; the
  lifetime is the requested ``max_lifetime_ms`` capped by ``delegation.token.max.lifetime.ms``
  (the config alone when the request asks for <= 0); the first expiry is the earlier of that
  end and now + ``delegation.token.expiry.time.ms``.
- the **HMAC** is HMAC-SHA512 of the id's UTF-8 bytes under the UTF-8 bytes of
  ``delegation.token.secret.key``; it is never stored, every broker computes it, and a request
  names its token by it.
- **renew**: only the owner or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH); an expired token
  cannot be renewed (DELEGATION_TOKEN_EXPIRED); the new expiry is now + the period (the
  expiry.time.ms config for a negative period), never past the token's end.
- **expire**: the owner or a renewer; a negative period removes the token at once (answering
  now), even when it has expired; otherwise an expired token is DELEGATION_TOKEN_EXPIRED and a
  live one gets expiry now + period, never past its end.
- an HMAC that names no token: DELEGATION_TOKEN_NOT_FOUND.
- tokens past their expiry or end are removed every ``delegation.token.expiry.check.interval.ms``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac as _hmac
import uuid
from typing import Mapping

from kbroker.metadata.image import MetadataImage, TokenInfo
from kbroker.protocol.errors import Errors, KafkaError

Changes = Mapping[str, "TokenInfo | None"]


def new_token_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@functools.lru_cache(maxsize=65536)
def hmac_of(token_id: str, secret: str) -> bytes:
    return _hmac.digest(secret.encode(), token_id.encode(), hashlib.sha512)


def find_by_hmac(image: MetadataImage, mac: bytes, secret: str) -> TokenInfo | None:
    mac = bytes(mac)
    for info in image.delegation_tokens.values():
        if _hmac.compare_digest(hmac_of(info.token_id, secret), mac):
            return info
    return None


def create(now_ms: int, owner: str, requester: str, renewers, max_lifetime_ms: int,
           config_max_lifetime_ms: int, renew_time_ms: int) -> TokenInfo:
    lifetime = config_max_lifetime_ms if max_lifetime_ms <= 0 \
        else min(max_lifetime_ms, config_max_lifetime_ms)
    max_ms = now_ms + lifetime
    return TokenInfo(new_token_id(), owner, requester, tuple(dict.fromkeys(renewers)), now_ms,
                     max_ms, min(max_ms, now_ms + renew_time_ms))


def _owned(image: MetadataImage, principal: str, mac: bytes, secret: str) -> TokenInfo:
    info = find_by_hmac(image, mac, secret)
    if info is None:
        raise KafkaError(Errors.DELEGATION_TOKEN_NOT_FOUND, "no token has this HMAC")
    if principal != info.owner and principal not in info.renewers:
        raise KafkaError(Errors.DELEGATION_TOKEN_OWNER_MISMATCH,
                         f"{principal} is neither the owner nor a renewer of token "
                         f"{info.token_id}")
    return info


def renew(image: MetadataImage, now_ms: int, principal: str, mac: bytes, period_ms: int,
          secret: str, renew_time_ms: int) -> tuple[Changes, int]:
    """(the change, the new expiry)."""
    info = _owned(image, principal, mac, secret)
    if info.expired(now_ms):
        raise KafkaError(Errors.DELEGATION_TOKEN_EXPIRED, f"token {info.token_id} has expired")
    period = renew_time_ms if period_ms < 0 else period_ms
    expiry = min(info.max_ms, now_ms + period)
    return {info.token_id: _with_expiry(info, expiry)}, expiry


def expire(image: MetadataImage, now_ms: int, principal: str, mac: bytes, period_ms: int,
           secret: str) -> tuple[Changes, int]:
    """(the change, the new expiry: now when the token is removed)."""
    info = _owned(image, principal, mac, secret)
    if period_ms < 0:
        return {info.token_id: None}, now_ms
    if info.expired(now_ms):
        raise KafkaError(Errors.DELEGATION_TOKEN_EXPIRED, f"token {info.token_id} has expired")
    expiry = min(info.max_ms, now_ms + period_ms)
    return {info.token_id: _with_expiry(info, expiry)}, expiry


def expired(image: MetadataImage, now_ms: int) -> Changes:
    """The removal of every token past its expiry or its end."""
    return {token_id: None for token_id, info in image.delegation_tokens.items()
            if info.expired(now_ms)}


def _with_expiry(info: TokenInfo, expiry_ms: int) -> TokenInfo:
    return TokenInfo(info.token_id, info.owner, info.requester, info.renewers, info.issue_ms,
                     info.max_ms, expiry_ms)
