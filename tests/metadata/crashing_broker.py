"""``python -m tests.metadata.crashing_broker STEP WRITE serve ...``: ``kbroker serve`` that dies
(``os._exit``, as abrupt as ``kill -9``) at one step of its metadata pipeline.

STEP is a step of :class:`kbroker.metadata.controller.Controller` ("committed", "published",
"reconciled") or "reconciling" (after the first partition the replica manager makes); WRITE is
a piece of the write's description ("creating topic orders", "deleting topic orders"). The
first write that matches kills the process; every other one runs as usual.
"""

from __future__ import annotations

import os
import sys

from kbroker.metadata.controller import Controller
from kbroker.replica.replica_manager import ReplicaManager

CRASHED = 137


def _arm(step: str, write: str) -> None:
    if step == "reconciling":
        state = {"armed": False}
        original_step = Controller._between_steps
        original_add = ReplicaManager._add_partition

        def between_steps(self, at, what):
            if at == "committed" and write in what:
                state["armed"] = True
            original_step(self, at, what)

        def add_partition(self, *args, **kwargs):
            partition = original_add(self, *args, **kwargs)
            if state["armed"]:
                os._exit(CRASHED)
            return partition

        Controller._between_steps = between_steps
        ReplicaManager._add_partition = add_partition
        return

    def between_steps(self, at, what):
        if at == step and write in what:
            os._exit(CRASHED)

    Controller._between_steps = between_steps


def main() -> None:
    step, write, *rest = sys.argv[1:]
    _arm(step, write)
    from kbroker.cli.main import main as kbroker

    sys.exit(kbroker(rest))


if __name__ == "__main__":
    main()
