"""The security columns: every client produces and consumes over SSL, SASL_SSL with PLAIN,
SASL_SSL with SCRAM-SHA-512 and mTLS, each on the listener that demands it (so a pass means the
client did the handshake and the authentication that mode needs: the broker serves nothing
before; an mTLS cell's topic is open only to the principal of the client certificate's subject). The settings reach the driver as ``--property`` pairs in its client's own vocabulary
(``compat_tests/security.py``); records are checked exactly, as in ``produce-consume``."""

from __future__ import annotations

import pytest

from compat_tests import harness, security
from compat_tests.harness import Spec
from compat_tests.reference import ensure_topic
from compat_tests.test_produce_consume import explicit_timestamps


@pytest.mark.parametrize("mode", security.MODES, ids=[m.name.replace(" ", "-")
                                                       for m in security.MODES])
@pytest.mark.compat("security: {mode}")
def test_produce_consume_secured(secure_broker, driver, mode, cell):
    cell.need(driver, security.FEATURE[mode.name])
    topic = harness.unique("sec", driver.name, mode.name.replace(" ", "-").lower())
    ensure_topic(secure_broker.plaintext, topic, partitions=1)
    if mode.client_cert:
        secure_broker.grant_only(topic, security.MTLS_PRINCIPAL)
    args = security.property_args(driver.config_style, mode, secure_broker.ca)
    bootstrap = secure_broker.bootstrap(mode)
    spec = Spec(count=6, timestamp=explicit_timestamps(driver))
    started = harness.now_ms()
    produced = harness.produce(driver, bootstrap, topic, spec, timeout=20, args=args).ok()
    window = (started, harness.now_ms())
    consumed = harness.consume(driver, bootstrap, topic, spec.count, timeout=15, args=args).ok()
    problems = harness.compare(spec, driver, produced, consumed.records, window)
    assert not problems, "; ".join(problems[:5])
