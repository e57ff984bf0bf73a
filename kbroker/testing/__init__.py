"""kbroker for tests and scripts: a real broker in-process or as a child process, and the pytest
plugin.

Key files:

* ``inprocess.py``: ``KafkaBroker`` (sync; the broker's event loop runs in a background thread),
  ``AsyncKafkaBroker`` (on the caller's loop) and ``running_broker(settings)``.
* ``subprocess_broker.py``: ``SubprocessKafkaBroker``, a ``kbroker serve --dev`` child found
  through its ready file.
* ``profile.py``: the dev profile (no initial rebalance delay, one-partition internal topics, ...)
  shared with ``kbroker serve --dev``.
* ``helpers.py``: ``KafkaHelpers`` (create topics, produce, consume all, wait for lag 0).
* ``plugin.py``: the pytest fixtures ``kafka_broker``, ``kafka_topic``, ``fresh_kafka_broker``.

Concurrency rule: the broker's state belongs to its event loop's thread; sync callers talk to it
over sockets (or ``KafkaBroker.call`` for a coroutine on that loop), never by touching it.
"""

from kbroker.testing.helpers import KafkaHelpers
from kbroker.testing.inprocess import AsyncKafkaBroker, KafkaBroker, running_broker
from kbroker.testing.profile import DEV_PROFILE
from kbroker.testing.subprocess_broker import SubprocessKafkaBroker

__all__ = ["AsyncKafkaBroker", "DEV_PROFILE", "KafkaBroker", "KafkaHelpers",
           "SubprocessKafkaBroker", "running_broker"]
