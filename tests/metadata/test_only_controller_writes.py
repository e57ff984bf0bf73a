"""The import rule of issue 10: only kbroker/metadata/controller.py writes the metadata store
(``store.commit(delta)``), in both modes."""

from __future__ import annotations

import ast
from pathlib import Path

from kbroker.metadata.store import WRITES

KBROKER = Path(__file__).resolve().parents[2] / "kbroker"
# The stores' own definitions, and the controller allowed to call them: one pipeline for both
# modes, no subclass per mode.
ALLOWED = {"metadata/controller.py", "metadata/local_store.py", "metadata/store.py",
           "metadata/zk/store.py"}


def store_writes(path: Path) -> list[str]:
    """Calls like ``<something store>.commit(...)`` in one module."""
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


def test_one_controller_for_both_modes_and_no_sync_twins():
    """No subclass of the Controller (the cluster's used to override 15 of its methods), and no
    write with a synchronous and an ``_async`` form."""
    import inspect

    from kbroker.metadata.controller import Controller

    subclasses = []
    for path in KBROKER.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        subclasses += [f"{path.relative_to(KBROKER)}:{node.name}" for node in ast.walk(tree)
                       if isinstance(node, ast.ClassDef)
                       and any(ast.unparse(base).endswith("Controller") for base in node.bases)]
    assert subclasses == [], subclasses
    names = {name for name, _ in inspect.getmembers(Controller, inspect.isfunction)}
    assert not [n for n in names if n.endswith("_async") or n.endswith("_now")], names
    writes = ("create_topic", "create_partitions", "delete_topic", "alter_topic_configs",
              "alter_broker_configs", "alter_scram_credentials", "create_acls", "delete_acls",
              "alter_client_quotas", "update_features", "elect_leaders", "alter_reassignments",
              "change_isr", "allocate_producer_ids", "write", "follow")
    assert all(inspect.iscoroutinefunction(getattr(Controller, w)) for w in writes)
