"""Delegation tokens on the broker's side (KIP-48): the SCRAM credential a token logs in with,
and the periodic removal of expired tokens.

Kafka keeps a credential per token and mechanism, made from the token's HMAC with a random
salt; so does :class:`TokenCredentials`, made on first use and kept until the token changes (a
renewal keeps its issue time, so its credential stays). The rules of tokens themselves (create,
renew, expire, the HMAC) are :mod:`kbroker.metadata.delegation_tokens`.
"""

from __future__ import annotations

import base64
import logging
import time

from kbroker.metadata import delegation_tokens
from kbroker.protocol.errors import KafkaError

log = logging.getLogger("kbroker")

MAX_KEPT = 10_000  # credentials cached before the cache starts again


def _now_ms() -> int:
    return int(time.time() * 1000)


class TokenCredentials:
    def __init__(self, config, controller):
        self._config = config
        self._controller = controller
        self._kept: dict = {}  # (token id, mechanism, issue ms) -> ScramCredential

    def credential(self, token_id: str, mechanism: str):
        """A live token's (SCRAM credential, owner name, expiry ms), or None (unknown, expired,
        or the feature off: no ``delegation.token.secret.key``)."""
        from kbroker.security.sasl.scram import token_credential

        secret = self._config.get("delegation.token.secret.key")
        info = self._controller.image.delegation_tokens.get(token_id)
        if not secret or info is None or info.expired(_now_ms()):
            return None
        key = (token_id, mechanism, info.issue_ms)
        credential = self._kept.get(key)
        if credential is None:
            if len(self._kept) > MAX_KEPT:
                self._kept.clear()
            password = base64.b64encode(
                delegation_tokens.hmac_of(token_id, str.__str__(secret))).decode()
            credential = self._kept[key] = token_credential(mechanism, password)
        return credential, info.owner.partition(":")[2], info.expiry_ms

    async def remove_expired(self) -> None:
        """Kafka's expireTokens, every ``delegation.token.expiry.check.interval.ms``: tokens past
        their expiry or end are removed, by the active controller (one writer in a cluster)."""
        controller = self._controller
        if not controller.is_active():
            return
        now = _now_ms()
        gone = delegation_tokens.expired(controller.image, now)
        if not gone:
            return
        try:
            await controller.change_delegation_tokens(
                lambda image: (delegation_tokens.expired(image, now), None),
                "removing expired delegation tokens")
        except KafkaError as exc:  # the store refused (ZooKeeper away): the next round
            log.warning("removing expired delegation tokens failed: %s", exc.message)
            return
        log.info("removed expired delegation tokens %s", ", ".join(sorted(gone)))
