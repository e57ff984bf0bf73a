"""Kafka's own command-line tools (ProducerPerformance, ConsumerPerformance, EndToEndLatency) run
from the reference jars, and the figures read back from what they print."""

from __future__ import annotations

import re
import subprocess

import run_kafka

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


def java_tool(main: str, args: list[str], version: str, timeout: float = 900) -> str:
    """Run ``main`` of Kafka ``version``'s jars; its stdout, or ``RuntimeError`` with the tail of
    both streams when it fails."""
    cmd = run_kafka.java_cmd(main, args, version, None, heap="512M")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{main} failed ({res.returncode}):\n{res.stdout[-2000:]}\n"
                           f"{res.stderr[-2000:]}")
    return res.stdout


def produced_per_s(out: str) -> float:
    """Records per second of ProducerPerformance's final summary line."""
    line = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    return float(re.search(r"records sent, ([\d.]+) records/sec", line).group(1))


def consumed_fields(out: str, records: int) -> list[str]:
    """The fields of ConsumerPerformance's result row (CSV: start, end, MB, MB/s, records,
    records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s), after checking it read all
    ``records``."""
    rows = [ln for ln in out.splitlines() if ln and ln[0].isdigit()]
    fields = [f.strip() for f in rows[-1].split(",")]
    if int(fields[4]) < records:
        raise RuntimeError(f"ConsumerPerformance read {fields[4]} of {records}")
    return fields
