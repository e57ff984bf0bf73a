"""kbroker for tests and scripts: a real broker in-process or as a child process, and the pytest
plugin.

Key files:

* ``inprocess.py``: ``KafkaBroker`` (sync; the broker's event loop runs in a background thread),
  ``AsyncKafkaBroker`` (on the caller's loop) and ``running_broker(settings)``.
* ``subprocess_broker.py``: ``SubprocessKafkaBroker``, a ``kbroker serve --dev`` child found
  through its ready file.
* ``security.py`` / ``certs.py``: secured brokers (SSL, mTLS, SASL listeners; certificates and
  users made at start) and the client settings for them.
* ``oauth_idp.py``: ``IdentityProvider``, a client-credentials token endpoint and a JWKS on
  127.0.0.1 for OAUTHBEARER with signed tokens (KIP-768).
* ``cluster.py``: ``KafkaCluster``, ``kbroker cluster up`` as a child, with kill and restart.
* ``helpers.py``: ``KafkaHelpers`` (create topics, produce, consume all, wait for lag 0).
* ``procfs.py``: a process's liveness (zombies count as gone), memory and CPU time from /proc.
* ``waiting.py``: ``wait_for``, the poll loop of tests and tools (a timeout is both a
  ``TimeoutError`` and an ``AssertionError``).
* ``plugin.py``: the pytest fixtures ``kafka_broker``, ``kafka_topic``, ``fresh_kafka_broker``,
  ``kafka_secure_broker``, ``kafka_cluster``.

The dev profile (no initial rebalance delay, one-partition internal topics, ...) is
``kbroker.config.profile``, shared with ``kbroker serve --dev``; the admin calls are
``kbroker.admin_client``, shared with the CLI. Nothing here imports ``kbroker.cli``.

Concurrency rule: the broker's state belongs to its event loop's thread; sync callers talk to it
over sockets (or ``KafkaBroker.call`` for a coroutine on that loop), never by touching it.
"""

from kbroker.config.profile import DEV_PROFILE
from kbroker.testing.cluster import KafkaCluster
from kbroker.testing.helpers import KafkaHelpers
from kbroker.testing.inprocess import AsyncKafkaBroker, KafkaBroker, running_broker
from kbroker.testing.security import BrokerSecurity
from kbroker.testing.subprocess_broker import SubprocessKafkaBroker

__all__ = ["AsyncKafkaBroker", "BrokerSecurity", "DEV_PROFILE", "KafkaBroker", "KafkaCluster",
           "KafkaHelpers", "SubprocessKafkaBroker", "running_broker"]
