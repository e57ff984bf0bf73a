"""Suite-wide: a test run that cannot exit is reported, not left to a CI time limit.

A thread that something joins at interpreter exit (an executor worker stuck in a blocking call,
a library's atexit hook) would otherwise hang the process after the last test, with nothing
said. Once pytest has finished, the interpreter gets ``EXIT_GRACE_S`` to exit; past that every
thread's stack is printed and the process exits with status 1.
"""

import faulthandler
import sys

EXIT_GRACE_S = 120


def pytest_unconfigure(config):
    faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True, file=sys.__stderr__)
