"""A dev-mode broker process with its HTTP port, and small helpers over real sockets."""

from __future__ import annotations

import json
import re
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
