#!/usr/bin/env python3
"""Long fuzzing run against a real kbroker process (the suite runs a bounded one:
tests/server/test_fuzz.py). Reports frames tried, connections the broker closed, peak RSS, and
each distinct traceback the broker logged (by its last frame), with the input that caused it.

    .venv/bin/python tools/fuzz_broker.py [--frames 100000] [--seed 1] [--max-frame 104857600]

Exit status 1 when the broker died or logged a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kbroker.testing.procfs import memory_mb  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.server.fuzz_frames import FuzzSession  # noqa: E402


def tracebacks(log_text: str) -> dict[str, str]:
    """Distinct tracebacks: the last 'File ..., line N, in f' line and the exception line."""
    found = {}
    for block in re.split(r"\n(?=\d{4}-\d\d-\d\d )", log_text):
        if "Traceback" not in block:
            continue
        files = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', block)
        last = block.strip().splitlines()[-1]
        where = f"{Path(files[-1][0]).name}:{files[-1][1]} in {files[-1][2]}" if files else "?"
        found.setdefault(f"{where}: {last}", block.splitlines()[0])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-frame", type=int, default=100 * 1024 * 1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", {
            "auto.create.topics.enable": False, "group.initial.rebalance.delay.ms": 0,
            "socket.request.max.bytes": args.max_frame}).start()
        session = FuzzSession("127.0.0.1", broker.port, args.seed)
        started = time.monotonic()
        died_after = None
        try:
            while session.frames < args.frames:
                what = session.step()
                if session.frames % 1000 == 0:
                    if not broker.alive():
                        died_after = what
                        break
                    print(f"{session.frames} frames, {time.monotonic() - started:.0f} s, "
                          f"peak RSS {memory_mb(broker.proc.pid, 'VmHWM'):.0f} MB", flush=True)
        except AssertionError as exc:
            died_after = str(exc)
        peak = memory_mb(broker.proc.pid, "VmHWM") if broker.alive() else float("nan")
        alive = broker.alive()
        broker.stop()
        found = tracebacks(broker.log_path.read_text(errors="replace"))
    print(f"frames tried: {session.frames}; closed by the broker: {session.closed_by_broker}; "
          f"peak RSS {peak:.0f} MB (bound: 2 x {args.max_frame / 2**20:.0f} MiB); "
          f"broker alive: {alive}")
    if died_after:
        print(f"the broker stopped answering after: {died_after}")
    for signature, first_line in found.items():
        print(f"traceback: {signature}\n    first logged as: {first_line}")
    return 1 if died_after or found or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
