#!/usr/bin/env python3
"""Merge a run's module times (``build/test-durations.json``, written by every pytest run of the
suite, see ``tests/parallel.py``) into ``tests/durations.json``, the order in which ``make test``
hands modules to its workers (longest first).

    python tools/test_durations.py [build/test-durations.json]

A module the run measured takes its new time; one it did not run keeps its old one; one that no
longer exists is dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KNOWN = ROOT / "tests" / "durations.json"


def main(argv: list[str]) -> int:
    measured_path = Path(argv[1]) if len(argv) > 1 else ROOT / "build" / "test-durations.json"
    if not measured_path.exists():
        print(f"no measured durations at {measured_path}: run the suite first", file=sys.stderr)
        return 1
    measured = json.loads(measured_path.read_text())
    known = json.loads(KNOWN.read_text()) if KNOWN.exists() else {}
    merged = {module: seconds for module, seconds in {**known, **measured}.items()
              if (ROOT / module).exists()}
    KNOWN.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
    print(f"{KNOWN.relative_to(ROOT)}: {len(measured)} modules measured, {len(merged)} listed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
