"""Start-up failures an operator can fix, and the process exit code of each kind.

A :class:`StartupError` is printed by the CLI as one line (``kbroker: <what>; <fix>``) without a
traceback (``--debug`` shows it). Exit codes, documented in ``kbroker --help``:

====  ==============================================================================
0     clean shutdown
1     unexpected internal error (a bug: run with ``--debug`` and report the traceback)
2     bad usage or bad config (a key, a value)
3     a listener cannot be bound (port in use, address not available, permission)
4     a log dir is unusable (unreadable, in use by another broker, bad meta.properties)
5     the metadata file is corrupt
====  ==============================================================================
"""

from __future__ import annotations

EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_LISTENER = 3
EXIT_LOG_DIR = 4
EXIT_METADATA = 5


class StartupError(RuntimeError):
    def __init__(self, problem: str, fix: str, exit_code: int):
        super().__init__(f"{problem}; {fix}")
        self.problem = problem
        self.fix = fix
        self.exit_code = exit_code
