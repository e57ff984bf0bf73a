"""What every Python-run driver shares: the contract's events, exit codes and records.

The contract is described in ``compat_tests/README.md``; the clients themselves are driven by
the adapters of ``compat_tests/clients`` (shared with the integration tests).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# The drivers run as scripts: make the repository importable.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from compat_tests.clients.records import Ack, Failed, Got, Rec  # noqa: E402

EXIT_OK, EXIT_ERROR, EXIT_TIMEOUT, EXIT_USAGE = 0, 1, 2, 64


class Usage(Exception):
    pass


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def error_fields(exc) -> dict:
    """Error class name, message and, when the client exposes one, the Kafka error name."""
    if not isinstance(exc, BaseException) and callable(getattr(exc, "name", None)):
        return {"error": "KafkaException", "code": exc.name(), "message": exc.str()}  # confluent
    fields = {"error": type(exc).__name__, "message": str(exc)}
    code = None
    inner = exc.args[0] if exc.args else None
    if hasattr(inner, "name") and callable(inner.name):  # confluent KafkaException
        code = inner.name()
    elif hasattr(exc, "name") and callable(getattr(exc, "name", None)):
        code = exc.name()
    elif getattr(type(exc), "errno", None) not in (None, -1):  # kafka-python / aiokafka errors
        code = getattr(type(exc), "message", None) or type(exc).__name__
    if code:
        fields["code"] = code
    return fields


def contract_records(count: int, key_prefix: str = "key-", value_prefix: str = "value-",
                     null_key_every: int = 0, value_size: int = 0, headers_from: str | None = None,
                     partition: int | None = None, timestamp: int | None = None) -> list[Rec]:
    """The contract's record i: key <key-prefix>i (null every N), value <value-prefix>i padded
    to --value-size, headers h-index=i and h-client=<driver> when asked, timestamp --timestamp
    + i."""
    out = []
    for i in range(count):
        null_key = null_key_every > 0 and i % null_key_every == null_key_every - 1
        value = f"{value_prefix}{i}".encode()
        if value_size and len(value) < value_size:
            value += b"." * (value_size - len(value))
        headers = (("h-index", str(i).encode()), ("h-client", headers_from.encode())) \
            if headers_from else ()
        out.append(Rec(value=value, key=None if null_key else f"{key_prefix}{i}".encode(),
                       headers=headers, partition=partition,
                       timestamp=None if timestamp is None else timestamp + i))
    return out


def report_produced(topic: str, results: list) -> int:
    """`produced`/`error` per record, then `done`; the exit code."""
    acked = 0
    for i, result in enumerate(results):
        if isinstance(result, Ack):
            acked += 1
            emit("produced", index=i, topic=topic, partition=result.partition,
                 offset=result.offset, timestamp=result.timestamp)
        elif isinstance(result, Failed):
            emit("error", index=i, **error_fields(result.error))
    emit("done", produced=acked, requested=len(results))
    return EXIT_OK if acked == len(results) else EXIT_ERROR


def text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


def record_event(g: Got) -> None:
    emit("record", topic=g.topic, partition=g.partition, offset=g.offset, key=text(g.key),
         value=text(g.value), headers=[{"key": k, "value": text(v)} for k, v in g.headers],
         timestamp=g.timestamp,
         timestampType="LogAppendTime" if g.timestamp_type == "append" else "CreateTime",
         leaderEpoch=g.leader_epoch)


def rebalance_event(kind: str, partitions: list[int]) -> None:
    emit(kind, partitions=partitions)


def done_consuming(seen: int, count: int) -> int:
    ok = seen >= count
    emit("done", consumed=seen, requested=count, timedOut=not ok)
    return EXIT_OK if ok else EXIT_TIMEOUT
