"""``kbroker.testing.procfs`` on real processes: this one and children in each state."""

import os
import subprocess
import sys

from kbroker.testing.procfs import alive, cpu_seconds, memory_kib, memory_mb
from kbroker.testing.waiting import wait_for


def test_a_running_child_is_alive_a_zombie_and_a_reaped_one_are_not():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    assert alive(child.pid)
    child.stdin.close()  # the child exits; until we reap it, it is a zombie
    wait_for(lambda: not alive(child.pid), "the child to exit", 30)
    assert os.waitpid(child.pid, os.WNOHANG)[0] == child.pid  # it was a zombie, not reaped
    assert not alive(child.pid)


def test_memory_and_cpu_of_this_process():
    rss, peak = memory_kib(os.getpid(), "VmRSS"), memory_kib(os.getpid(), "VmHWM")
    assert 0 < rss <= peak
    assert memory_mb(os.getpid(), "VmHWM") == peak / 1024
    sum(range(10**6))  # some CPU time of our own
    assert cpu_seconds(os.getpid()) > 0


def test_memory_of_a_process_that_is_gone_is_zero_for_a_report():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert memory_mb(child.pid, "VmRSS") == 0.0
