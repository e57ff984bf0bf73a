"""The import rule of issue 10: only kbroker/metadata/controller.py writes the metadata store."""

from __future__ import annotations

import ast
from pathlib import Path

from kbroker.metadata.store import WRITES

KBROKER = Path(__file__).resolve().parents[2] / "kbroker"
# The store's own definitions, and the controller allowed to call them (zk_controller is the
# same Controller in cluster mode: a subclass writing to ZooKeeper).
ALLOWED = {"metadata/controller.py", "metadata/zk_controller.py", "metadata/local_store.py",
           "metadata/store.py"}


def store_writes(path: Path) -> list[str]:
    """Calls like ``<something store>.create_topic(...)`` in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in WRITES:
            owner = ast.unparse(node.func.value)
            if "store" in owner.lower():
                found.append(f"{path.relative_to(KBROKER)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_the_controller_writes_the_metadata_store():
    offenders = []
    for path in sorted(KBROKER.rglob("*.py")):
        if path.relative_to(KBROKER).as_posix() not in ALLOWED:
            offenders += store_writes(path)
    assert not offenders, "metadata store written outside the controller:\n" + "\n".join(offenders)


def test_the_rule_sees_a_write():
    # The checker itself: the controller's own writes are found.
    assert store_writes(KBROKER / "metadata" / "controller.py")


def test_only_the_broker_builds_a_store():
    users = [path.relative_to(KBROKER).as_posix() for path in KBROKER.rglob("*.py")
             if "import LocalMetadataStore" in path.read_text()
             and path.relative_to(KBROKER).as_posix() not in ALLOWED]
    assert users == ["server/broker.py"], users
