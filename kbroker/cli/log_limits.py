"""Rate limit for repeated log lines: a client retrying a bad request must not flood the log.

Lines are grouped by logger and message template (the format string before its arguments, so
"illegal topic name: %s" is one group whatever the name). Each group may log ``burst`` lines per
``interval`` seconds; the rest are counted, and the first line of the next interval says how many
were dropped. Start-up and recovery lines (loggers ``kbroker`` and ``kbroker.log``: one per
partition, each one wanted) and the state-change log (``kbroker.state_change``: every leadership,
ISR and replica change, :mod:`kbroker.metadata.state_change`) are never limited.
"""

from __future__ import annotations

import logging
import time

EXEMPT = ("kbroker", "kbroker.log", "kbroker.state_change")


class RepeatFilter(logging.Filter):
    def __init__(self, burst: int = 5, interval: float = 10.0, clock=time.monotonic):
        super().__init__()
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self._windows: dict[tuple, list] = {}  # key -> [window start, lines logged, dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name in EXEMPT or record.levelno >= logging.CRITICAL:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= self.interval:
            dropped = window[2] if window is not None else 0
            self._windows[key] = [now, 1, 0]
            if len(self._windows) > 10_000:  # templates are few; bound it all the same
                self._windows = {key: self._windows[key]}
            if dropped:
                record.msg = (f"{record.getMessage()} [{dropped} similar line(s) suppressed in "
                              f"the last {self.interval:.0f} s]")
                record.args = ()
            return True
        if window[1] < self.burst:
            window[1] += 1
            return True
        window[2] += 1
        return False
