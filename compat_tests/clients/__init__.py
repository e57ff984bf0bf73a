"""Client adapters: one module per client library, shared by the integration tests and the
compatibility drivers.

Every adapter drives its client through the client's public API only (what a user of that client
does) and speaks the same shapes (``records.py``): :class:`Rec` in, :class:`Ack` or
:class:`Failed` per record out of ``produce``, :class:`Got` per record out of ``consume``.

    produce(bootstrap, topic, records, *, codec, acks, config, timeout) -> [Ack | Failed]
    consume(bootstrap, topic, count, *, partitions, start, group, isolation, config, timeout,
            on_record, on_rebalance) -> [Got]
    version() -> {"version": ..., ...}

``config`` holds client settings in the client's own spelling (librdkafka's dotted names for
confluent and kcat, keyword arguments for kafka-python and aiokafka); each caller brings its own
(``tests/integration/clients.py``: short timeouts, no group; ``compat_tests/drivers``: the
contract's options). Modules are imported on first use so a missing client only fails its users.
"""

from __future__ import annotations

import importlib

MODULES = {"confluent": "confluent", "kafka-python": "kafka_python", "aiokafka": "aio",
           "kcat": "kcat"}


def adapter(name: str):
    """The adapter module of client ``name`` (a key of MODULES)."""
    return importlib.import_module(f"{__name__}.{MODULES[name]}")
