"""Polling until something holds, for tests and tools that watch a broker or cluster from
outside (a process, ZooKeeper, a client's view): there is no event to wait on, so they poll."""

from __future__ import annotations

import time


class WaitTimeout(TimeoutError, AssertionError):
    """A wait that ran out. A ``TimeoutError`` for the tools that catch one and carry on; an
    ``AssertionError`` so that in a test it reads as the failed expectation it is."""


def wait_for(condition, what: str, timeout: float, interval: float = 0.05):
    """``condition()``'s first truthy value, polled every ``interval`` seconds; past ``timeout``
    seconds, ``WaitTimeout`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
