"""Produces a broker refused, counted by error from its log: kbroker's "produce to T-P from C
rejected: ERROR: message" lines and Kafka's "Error processing append operation on partition
T-P" followed by the exception. Used by tools/eos_chains.py and tools/cluster_faults to count the
sequence and epoch errors each side gave.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

# kbroker: "produce to T-P from C rejected: OUT_OF_ORDER_SEQUENCE_NUMBER: ..."; Kafka: "Error
# processing append operation on partition T-P (kafka.server.ReplicaManager)" then the
# exception's class on the next line.
_KBROKER_REFUSAL = re.compile(r"rejected: ([A-Z_]+):")
_KAFKA_REFUSAL = re.compile(r"org\.apache\.kafka\.common\.errors\.(\w+Exception)")
# KIP-890's sequence guards: after the first batch of a transaction on a partition failed with a
# retriable error, the batches pipelined behind it are refused until it is retried (Kafka's
# ProducerAppendInfo); the client retries them in order. Not the false errors of issue 21.
_GUARD = ("Expected sequence 0 for transactions v2", "(earliest seen sequence)")
# kbroker rate-limits repeated log lines and says on the next one how many it left out.
_SUPPRESSED = re.compile(r"\[(\d+) similar line\(s\) suppressed")
GUARD_SUFFIX = " (KIP-890 guard)"


def refusal_key(error: str, message: str) -> str:
    """How a broker's refusal of a produce is counted: its error, marked when it is one of
    KIP-890's sequence guards."""
    return f"broker {error}{GUARD_SUFFIX if any(g in message for g in _GUARD) else ''}"


class BrokerLogs:
    """The produce refusals brokers log from now on (files), counted by error name."""

    def __init__(self, paths):
        self.paths = [Path(p) for p in paths]
        self.start = {p: p.stat().st_size if p.exists() else 0 for p in self.paths}

    def refusals(self) -> Counter:
        counts: Counter = Counter()
        for path in self.paths:
            if not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(self.start[path])
                text = f.read().decode(errors="replace")
            after_kafka_refusal = False
            for line in text.splitlines():
                if after_kafka_refusal:
                    match = _KAFKA_REFUSAL.match(line)
                else:
                    match = _KBROKER_REFUSAL.search(line) if " kbroker." in line else None
                if match is not None:
                    suppressed = _SUPPRESSED.search(line)
                    counts[refusal_key(match.group(1), line)] += 1 + (
                        int(suppressed.group(1)) if suppressed else 0)
                after_kafka_refusal = "Error processing append operation" in line
        return counts
