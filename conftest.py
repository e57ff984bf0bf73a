"""Suite-wide: a test or a run that hangs is reported, not left to a CI time limit.

- A test (setup, call and teardown) gets ``TEST_LIMIT_S``; past that every thread's stack is
  printed and the process exits with status 1. The slowest tests (fault schedules, Spark's
  module set-up) take a few minutes; a hang (a client library deadlocked in a call, say) would
  otherwise eat the whole CI budget with nothing said.
- A thread that something joins at interpreter exit (an executor worker stuck in a blocking call,
  a library's atexit hook) would hang the process after the last test. Once pytest has finished,
  the interpreter gets ``EXIT_GRACE_S`` to exit; past that the same dump and exit.
"""

import faulthandler
import os
import sys

import pytest

# The run's reference Apache Kafka (fixture ``reference_kafka``), for tests/ and compat_tests/.
# How the suite runs in parallel (workers, module order, tests that must run alone); the logs
# of the brokers a failed test ran, in its report.
pytest_plugins = ["tests.parallel", "tests.shared_kafka", "tests.failure_logs"]

# Kafka's tools (kafka-configs, kafka-transactions, ...) start as short-lived JVMs: C1, the serial
# collector and a class-data archive (tools/kafka_ref/run_kafka.py, QUICK_TOOLS_ENV); =0 turns it off.
os.environ.setdefault("KBROKER_QUICK_TOOL_JVMS", "1")

TEST_LIMIT_S = 900
EXIT_GRACE_S = 120


_real_stderr = None


def _terminal(config):
    """The run's real stderr: during a test, fd 2 is pytest's capture file, gone at exit."""
    global _real_stderr
    if _real_stderr is None:
        capman = config.pluginmanager.getplugin("capturemanager")
        err = getattr(getattr(capman, "_global_capturing", None), "err", None)
        saved = getattr(err, "targetfd_save", None)  # pytest's copy of the original fd 2
        _real_stderr = os.fdopen(os.dup(saved), "w") if saved is not None else sys.__stderr__
    return _real_stderr


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(TEST_LIMIT_S, exit=True, file=_terminal(item.config))
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_unconfigure(config):
    faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True, file=sys.__stderr__)
