#!/usr/bin/env python3
"""Start-up of ``kbroker serve`` on an empty data dir: spawn to the ready banner, the broker's own
"ready in" figure, and the process's CPU, median of N runs, alternating between source trees.

    python tools/bench_startup.py [--runs 9] TREE [TREE ...]

Each TREE is a checkout (``git worktree add /tmp/old <commit>``) put first on ``PYTHONPATH``.
Each is compiled first (``compileall``), and the runs may write bytecode whatever the shell's
``PYTHONDONTWRITEBYTECODE`` says: a tree without bytecode compiles its 160-odd modules at every
start, which is what a run would then measure.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BANNER = re.compile(rb"ready in ([\d.]+) s")


def _environment(tree: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": tree}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def once(tree: str) -> tuple[float, float, float]:
    data = tempfile.mkdtemp(prefix="kbroker-startup-")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "kbroker", "serve", "--set", f"log.dirs={data}",
         "--set", "listeners=PLAINTEXT://127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_environment(tree),
        # ``-m`` puts the working directory first on sys.path: run in the tree, or every tree
        # would be the checkout the command was started from
        cwd=tree)
    elapsed = inside = float("nan")
    for line in process.stdout:
        match = BANNER.search(line)
        if match:
            elapsed, inside = time.perf_counter() - started, float(match.group(1))
            break
    process.terminate()
    process.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(data, ignore_errors=True)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, inside, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("trees", nargs="+")
    args = parser.parse_args()
    results: dict[str, list] = {tree: [] for tree in args.trees}
    for tree in args.trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "kbroker")],
                       check=True, env=_environment(tree))
    for _ in range(args.runs):
        for tree in args.trees:
            results[tree].append(once(tree))
    for tree, runs in results.items():
        spawn, inside, cpu = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"{tree}: spawn to ready {spawn:.3f} s, inside the broker {inside:.3f} s, "
              f"CPU of the process {cpu:.3f} s (medians of {len(runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
