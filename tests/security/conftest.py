"""Fixtures for the security tests: a CA made per session and brokers with secure listeners."""

from __future__ import annotations

import re

import pytest

from tests.broker_process import BrokerProcess
from kbroker.testing.certs import TestCA

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture(scope="session")
def ca(tmp_path_factory):
    authority = TestCA(tmp_path_factory.mktemp("certs"))
    authority.server = authority.issue("server", "localhost", server=True)
    authority.client = authority.issue("client", "alice", org="dev")
    return authority


class SecureBroker:
    def __init__(self, process: BrokerProcess):
        self.process = process
        line = next(l for l in process.log().splitlines() if "kbroker ready" in l)
        self.endpoints = {name: f"127.0.0.1:{port}"
                          for name, port in re.findall(r"(\w+)://127\.0\.0\.1:(\d+)", line)}

    def log(self) -> str:
        return self.process.log()

    def alive(self) -> bool:
        return self.process.proc.poll() is None


def _broker_factory(directory):
    started = []

    def make(listeners: dict[str, str], **overrides) -> SecureBroker:
        """``listeners``: listener name -> security protocol; each binds 127.0.0.1:0."""
        settings = {
            "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in listeners.items()),
            **{key: str(value) for key, value in overrides.items()},
        }
        process = BrokerProcess(directory / f"data{len(started)}", settings)
        started.append(process)
        process.start()
        return SecureBroker(process)

    return make, started


@pytest.fixture
def secure_broker(tmp_path):
    make, started = _broker_factory(tmp_path)
    yield make
    for process in started:
        process.kill()


@pytest.fixture(scope="module")
def full_broker(tmp_path_factory, ca):
    """One listener of each protocol; PLAIN users alice and bob, SCRAM-SHA-256/512 enabled.
    Shared by a module's tests (each uses its own topics)."""
    make, started = _broker_factory(tmp_path_factory.mktemp("full"))
    yield make(
        {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
         "SASL_SSL": "SASL_SSL"},
        **{"ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.server.keystore_pem),
           "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
           "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
           "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
           "connection.failed.authentication.delay.ms": "50"})
    for process in started:
        process.kill()
