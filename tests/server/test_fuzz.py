"""Fuzzing in CI: a few thousand structure-aware frames (tests/server/fuzz_frames.py) against a real
broker process. It never crashes, never logs a traceback for input, and its peak RSS stays under
twice the largest frame it accepts. Long runs: tools/fuzz_broker.py."""

from __future__ import annotations

from kbroker.testing.procfs import memory_kib
from tests.server.fuzz_frames import FuzzSession

FRAMES = 5000
MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes, Kafka's default


def test_fuzzed_frames_never_crash_the_broker(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": False,
                             "group.initial.rebalance.delay.ms": 0,
                             "socket.request.max.bytes": MAX_FRAME})
    session = FuzzSession("127.0.0.1", broker.port, seed=11)
    last = ""
    try:
        for _ in range(FRAMES):
            last = session.step()
            assert broker.alive(), f"the broker died after: {last}"
    finally:
        session._drop()
    peak = memory_kib(broker.proc.pid, "VmHWM") * 1024
    print(f"fuzz: {session.frames} frames, {session.closed_by_broker} connections closed by the "
          f"broker, peak RSS {peak / 2**20:.0f} MiB")
    assert broker.alive()
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 300:][:3000]
    assert peak < 2 * MAX_FRAME
