"""Fixtures: a real ``kbroker serve`` process with its schema registry on a free port, and a
small urllib client for raw HTTP (what Confluent's REST API answers, status and JSON)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from tests.broker_process import BrokerProcess

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """A broker process and its registry URL."""

    def __init__(self, broker: BrokerProcess, url: str):
        self.broker = broker
        self.url = url

    def call(self, method: str, path: str, body=None, *, raw: bytes | None = None,
             content_type: str = CONTENT_TYPE, headers: dict | None = None):
        """(status, decoded JSON body) of one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": content_type,
                                                  **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            text, status = exc.read(), exc.code
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode()


def start_registry(tmp_path, name: str = "data", overrides: dict | None = None,
                   port: int | None = None) -> Registry:
    port = port or free_port()
    broker = BrokerProcess(tmp_path / name, {
        "schema.registry.listeners": f"http://127.0.0.1:{port}", **(overrides or {})})
    broker.start()
    return Registry(broker, f"http://127.0.0.1:{port}")


@pytest.fixture
def registry(tmp_path):
    reg = start_registry(tmp_path)
    yield reg
    reg.broker.kill()


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory):
    """One broker for a module's tests (each test uses subjects of its own)."""
    reg = start_registry(tmp_path_factory.mktemp("registry"))
    yield reg
    reg.broker.kill()
