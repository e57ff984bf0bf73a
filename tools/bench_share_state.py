#!/usr/bin/env python3
"""Share partition state (kbroker/share/state.py, issue 34 part 3): memory per in-flight record
and the time of fetch, acknowledge, lock expiry and persist at a full window.

No broker: the pure state is driven as :mod:`kbroker.share.manager` drives it, with log batches
of ``--batch`` records (what a producer writes; confluent-kafka's default linger makes batches
of hundreds).

- memory: ``--partitions`` states (100) each acquire ``--window`` records (10,000, Kafka's
  largest ``group.share.partition.max.record.locks``) in fetches of 500-record batches; the
  bytes tracemalloc sees allocated by that, above the idle (empty) states, per record and in
  all. Then the same after acknowledgements: ``split``, each batch's first half accepted (every
  batch split once); ``per-offset``, accept and release alternating offset by offset (every
  offset a state of its own, the worst case).
- time, one partition at a full window (the median of ``--rounds``): ``fetch`` acquires the next
  batch after the oldest one was accepted (the window stays full); ``acknowledge`` accepts one
  batch in the middle of the window; ``persist`` builds the state batches of that
  acknowledgement and the delivery-complete count (what SharePartition.persist writes);
  ``expire`` runs the lock expiry when one batch's lock has run out; ``deadline`` finds the
  earliest lock deadline (the manager's timer).

Run: ``python tools/bench_share_state.py`` (about 3 minutes on a busy 2-core machine);
``--time-only --window 100000`` shows how the times grow with the window. ``--code DIR``
imports kbroker from another checkout (``git worktree add /tmp/share-before main``) for a
before/after table; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(code: Path):
    sys.path.insert(0, str(code))
    from kbroker.share import state
    assert Path(state.__file__).resolve().is_relative_to(code.resolve()), state.__file__
    return state


def fill(state_mod, state, limits, window: int, batch: int, member: str = "m",
         now: int = 0, base: int = 0) -> int:
    """Acquire ``window`` records from ``base`` in fetches of one ``batch``-record log batch;
    the next offset."""
    offset = base
    while offset < base + window:
        batches = [state_mod.FetchedBatch(offset, offset + batch - 1)]
        state.acquire(member, batches, 500, False, limits, now)
        offset += batch
    return offset


def memory(s, partitions: int, window: int, batch: int) -> dict:
    limits = s.Limits(delivery_count_limit=5, max_record_locks=window, lock_duration_ms=30000)
    results = {}
    for shape in ("batches", "split", "per-offset"):
        gc.collect()
        tracemalloc.start()
        states = [s.SharePartitionState(0) for _ in range(partitions)]
        idle = tracemalloc.get_traced_memory()[0]
        for state in states:
            fill(s, state, limits, window, batch)
            if shape == "split":
                for first in range(0, window, batch):
                    state.acknowledge("m", [(first, first + batch // 2 - 1, [s.ACCEPT])],
                                      limits, 0)
            elif shape == "per-offset":
                # offset 0 stays acquired so that the start offset does not move
                state.acknowledge("m", [(1, window - 1, [s.ACCEPT if o % 2 else s.RELEASE
                                                         for o in range(1, window)])],
                                  limits, 0)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - idle
        tracemalloc.stop()
        records = partitions * window
        results[shape] = {"records": records, "bytes": used, "mb": used / 1e6,
                          "bytes_per_record": used / records}
        del states
    return results


def timings(s, window: int, batch: int, rounds: int) -> dict:
    limits = s.Limits(delivery_count_limit=5, max_record_locks=window, lock_duration_ms=30000)
    out: dict[str, list[float]] = {k: [] for k in
                                   ("fetch", "acknowledge", "persist", "expire", "deadline")}
    for _ in range(rounds):
        state = s.SharePartitionState(0)
        end = fill(s, state, limits, window, batch)
        # fetch: the oldest batch accepted, the next one acquired (the window stays full)
        state.acknowledge("m", [(0, batch - 1, [s.ACCEPT])], limits, 0)
        batches = [s.FetchedBatch(end, end + batch - 1)]
        began = time.perf_counter()
        state.acquire("m", batches, 500, False, limits, 0)
        out["fetch"].append(time.perf_counter() - began)
        # acknowledge one batch in the middle, as the manager does (remembered fields)
        middle = batch * (window // batch // 2)
        remembered = {}
        began = time.perf_counter()
        changed = state.acknowledge("m", [(middle, middle + batch - 1, [s.ACCEPT])], limits,
                                    0, remembered)
        state.fields(changed)
        out["acknowledge"].append(time.perf_counter() - began)
        began = time.perf_counter()
        state.persisted_batches(changed)
        state.delivery_complete_count()
        out["persist"].append(time.perf_counter() - began)
        began = time.perf_counter()
        state.next_deadline_ms()
        out["deadline"].append(time.perf_counter() - began)
        # expire: one more batch acquired later; at its predecessors' deadline only they go
        state.acknowledge("m", [(batch, middle - 1, [s.RENEW]),
                                (middle + batch, end - 1, [s.RENEW])], limits, 10_000)
        began = time.perf_counter()
        expired = state.expire_locks(30_000, limits)
        out["expire"].append(time.perf_counter() - began)
        assert len(expired) == batch, len(expired)
    return {name: statistics.median(values) * 1e6 for name, values in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to import kbroker from")
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--window", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--time-only", action="store_true",
                        help="no memory figures (a large --window on the old code would hold "
                        "one object per offset in every partition)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    s = load(args.code)
    mem = {} if args.time_only else memory(s, args.partitions, args.window, args.batch)
    times = timings(s, args.window, args.batch, args.rounds)
    print(f"kbroker from {args.code}")
    if mem:
        print(f"memory, {args.partitions} partitions x {args.window} in flight, "
              f"{args.batch}-record batches:")
    for shape, m in mem.items():
        print(f"  {shape:10} {m['mb']:8.1f} MB  {m['bytes_per_record']:7.1f} B/record")
    print(f"time at a full window of {args.window} (median of {args.rounds}, microseconds):")
    for name, micros in times.items():
        print(f"  {name:12} {micros:10.1f}")
    if args.json:
        args.json.write_text(json.dumps({"code": str(args.code), "memory": mem,
                                         "time_us": times}, indent=2))


if __name__ == "__main__":
    main()
