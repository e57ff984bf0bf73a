#!/usr/bin/env python3
"""One share consumer of tools/share_soak.py: a confluent-kafka ShareConsumer in explicit mode
that writes what it got to its own log file, flushed, before it acknowledges it.

    python tools/share_soak_member.py --bootstrap H:P --group G --topic T --log FILE

Log lines (space-separated; ``TS`` is ``time.time()``):

- ``S TS PID``: started;
- ``R TS ID DELIVERY_COUNT PARTITION OFFSET``: a record received (its value is its id), written
  and flushed for the whole poll before any of it is acknowledged;
- ``A TS ok P,P,.. err P:NAME,..``: the answer to the ACCEPTs of the poll above (commit_sync),
  per partition (``-`` for none); ``A TS fail all NAME``: commit_sync itself failed;
- ``E TS NAME``: an error returned by poll;
- ``X TS``: closed cleanly (after SIGTERM).

A record with no ``A`` line after it was held when the process died: the checker counts its
redelivery as the kill's. The soak kills these processes with SIGKILL at random moments, so the
file may end in the middle of a line.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer


def error_name(exc) -> str:
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    return err.name() if hasattr(err, "name") else type(exc).__name__


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                              "share.acknowledgement.mode": "explicit", "log_level": 3})
    consumer.subscribe([args.topic])
    with open(args.log, "a", buffering=1 << 16) as out:
        out.write(f"S {time.time():.3f} {os.getpid()}\n")
        out.flush()
        while not stopping:
            messages = consumer.poll(1.0)
            if not messages:
                continue
            now = f"{time.time():.3f}"
            good, lines = [], []
            for m in messages:
                if m.error() is not None:
                    lines.append(f"E {now} {m.error().name()}\n")
                    continue
                good.append(m)
                lines.append(f"R {now} {m.value().decode()} {m.delivery_count()} "
                             f"{m.partition()} {m.offset()}\n")
            out.writelines(lines)
            out.flush()  # on disk (in the kernel) before the broker hears of the ACCEPT
            if not good:
                continue
            for m in good:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            try:
                results = consumer.commit_sync(30)
            except Exception as exc:  # noqa: BLE001 - logged as the poll's answer
                out.write(f"A {time.time():.3f} fail all {error_name(exc)}\n")
            else:
                ok = sorted(tp.partition for tp, err in results.items() if err is None)
                bad = sorted(f"{tp.partition}:{error_name(err)}"
                             for tp, err in results.items() if err is not None)
                out.write(f"A {time.time():.3f} ok {','.join(map(str, ok)) or '-'} "
                          f"err {','.join(bad) or '-'}\n")
            out.flush()
        consumer.close()
        out.write(f"X {time.time():.3f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
