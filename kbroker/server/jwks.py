"""Reading a listener's JWKS (``sasl.oauthbearer.jwks.endpoint.url``) for OAUTHBEARER with signed
tokens, as Kafka's ``RefreshingHttpsJwks`` does:

- at start-up, once: a broker whose JWKS cannot be read does not start (Kafka's broker fails in
  the validator's ``configure``);
- then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and at once when a token names a key
  id the set lacks (:meth:`~kbroker.security.sasl.jwt.JwksKeys.missing`, at most once a minute per
  key id): that is how a rotated signing key is picked up;
- a failed read is retried after ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``, doubling,
  until ``...retry.backoff.max.ms`` has passed; then the keys already held stay, with one warning.

``http://``, ``https://`` (the system's CAs) and ``file://`` locations are read with urllib in a
worker thread, so the event loop never waits on the identity provider.

Concurrency rule: one task per listener owns the refreshes; the validator only reads the keys
(a list replaced whole) on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request

from kbroker.security.sasl.jwt import JwksKeys

log = logging.getLogger("kbroker.auth")
READ_TIMEOUT_S = 10


class JwksReadError(Exception):
    pass


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=READ_TIMEOUT_S) as response:  # noqa: S310
        return response.read(16 * 1024 * 1024)


class JwksRefresher:
    def __init__(self, keys: JwksKeys, refresh_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, listener: str):
        self.keys = keys
        self.refresh_ms, self.listener = refresh_ms, listener
        self.retry_backoff_ms, self.retry_backoff_max_ms = retry_backoff_ms, retry_backoff_max_ms
        self._wanted = asyncio.Event()
        keys.wake = self._wanted.set

    async def load(self) -> int:
        """The first read (raises JwksReadError); returns the number of keys."""
        return await self._read_once()

    async def _read_once(self) -> int:
        try:
            document = await asyncio.to_thread(_read, self.keys.location)
            return self.keys.update(document)
        except (OSError, ValueError) as exc:
            raise JwksReadError(f"cannot read the JWKS at {self.keys.location}: {exc}") from None

    async def run(self) -> None:
        while True:
            try:  # asyncio.timeout: 3.11's wait_for can swallow a cancel (see zk/client.gather)
                async with asyncio.timeout(self.refresh_ms / 1000):
                    await self._wanted.wait()
            except TimeoutError:
                pass
            self._wanted.clear()
            self.keys.refresh_wanted = False
            await self.refresh()

    async def refresh(self) -> None:
        started = time.monotonic()
        backoff = self.retry_backoff_ms / 1000
        while True:
            try:
                count = await self._read_once()
                log.info("listener %s: read %d keys from the JWKS at %s", self.listener, count,
                         self.keys.location)
                return
            except JwksReadError as exc:
                waited = time.monotonic() - started
                if waited + backoff > self.retry_backoff_max_ms / 1000:
                    log.warning("listener %s: %s; keeping the %d keys already read",
                                self.listener, exc, len(self.keys.keys))
                    return
                await asyncio.sleep(backoff)
                backoff *= 2
