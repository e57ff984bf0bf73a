"""A dev-mode broker process with its HTTP port, and small helpers over real sockets."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest

HTTP_LINE = re.compile(r"kbroker HTTP on (http://\S+/)")
TIMEOUT = 20


@pytest.fixture
def dev_broker(broker_factory):
    """A broker in dev mode (fault injection allowed, HTTP on a free port), with ``.http``."""
    return with_http(broker_factory({"dev.mode": "true", "group.initial.rebalance.delay.ms": "0",
                                     "offsets.topic.num.partitions": "1"}))


def with_http(broker):
    match = HTTP_LINE.search(broker.log())
    broker.http = match.group(1) if match else None
    return broker


def http_get(broker, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(broker.http + path.lstrip("/"), timeout=TIMEOUT) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def http_json(broker, path: str):
    status, body = http_get(broker, path)
    assert status == 200, body
    return json.loads(body)


def log_lines(broker, predicate, at_least: int = 1) -> list[str]:
    """The broker's log lines matching ``predicate``, once ``at_least`` of them are there (the
    log reaches the file through a reader thread, a moment after the broker wrote it)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        lines = [line for line in broker.log().splitlines() if predicate(line)]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)
