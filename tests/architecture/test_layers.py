"""The import rules of kbroker's layers, checked on the source (issue 10's seams).

Layers, top to bottom: server -> handlers -> replica / coordinator / metadata -> log -> protocol.
``config`` is read by every layer and imports none of them. Beside the broker, ``cli`` and
``testing`` are two front ends that share ``kbroker.admin_client`` and ``kbroker.config.profile``
and import each other in neither direction. The rules:

- nothing above ``replica/`` imports ``kbroker.log``: partitions are the only door to a log;
- handlers import nothing from ``server/``;
- coordinators import neither ``handlers/`` nor ``server/`` nor ``log/``;
- ``protocol/`` imports no other kbroker layer, and ``log/`` imports only ``protocol`` (and config
  types it is handed);
- ``config`` imports no broker layer, ``log`` included (a topic's LogConfig is derived in
  ``replica/log_settings.py``);
- ``testing`` imports nothing from ``cli`` and ``cli`` nothing from ``testing``;
- ``admin_client`` imports no other kbroker module;
- ``schema_registry`` imports neither ``handlers/``, ``server/``, ``log/``, ``replica/`` nor the
  front ends (it runs on the coordinator runtime);
- ``telemetry`` imports only ``protocol`` (the handlers and the server use it, not the reverse);
- the three coordinators share ``coordinator/runtime.py``, ``timeline.py``, ``partitioning.py``
  and ``interbroker.py``; the transaction and share coordinators import nothing of the group
  coordinator's;
- only ``metadata/controller.py`` writes the metadata store (calls its mutating methods).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kbroker"
GENERATED = ROOT / "protocol" / "messages"


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        if GENERATED in path.parents:
            continue
        yield path


def _imports(path: Path) -> set[str]:
    """Every kbroker module ``path`` imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("kbroker")}


def _layer(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def _imports_layer(imports: set[str], layer: str) -> list[str]:
    prefix = f"kbroker.{layer}"
    return sorted(name for name in imports if name == prefix or name.startswith(prefix + "."))


RULES = {
    # layer -> layers it must not import
    "server": ["log"],
    "handlers": ["server", "log"],
    "coordinator": ["handlers", "server", "log"],
    # share partitions may use the share coordinator's persister contract, nothing else of it
    "share": ["handlers", "server", "log", "cli", "testing"],
    "metadata": ["handlers", "server", "log", "coordinator"],
    # client telemetry: its manager, subscriptions and their image listener; only protocol below
    "telemetry": ["handlers", "server", "coordinator", "replica", "metadata", "log", "security",
                  "share", "cli", "testing"],
    "replica": ["handlers", "server", "coordinator"],
    "log": ["handlers", "server", "coordinator", "replica", "metadata"],
    "protocol": ["handlers", "server", "coordinator", "replica", "metadata", "log", "config"],
    "config": ["handlers", "server", "coordinator", "replica", "metadata", "log", "security",
               "cli", "testing"],
    "testing": ["cli"],
    # the schema registry sits beside server/: the coordinator runtime, protocol, security and
    # metadata below it; the server starts it, never the reverse
    "schema_registry": ["handlers", "server", "log", "replica", "cli", "testing"],
    "cli": ["testing"],
    "admin_client": ["protocol", "server", "handlers", "log", "replica", "metadata",
                     "coordinator", "security", "config", "cli", "testing", "cluster"],
}


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_point_downward(layer):
    violations = []
    for path in _modules():
        if _layer(path) != layer:
            continue
        imports = _imports(path)
        for forbidden in RULES[layer]:
            for name in _imports_layer(imports, forbidden):
                violations.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not violations, "\n".join(violations)


def test_the_coordinators_share_only_their_common_parts():
    """The transaction and share coordinators (issue 34's homes) import nothing from the group
    coordinator's package: the shard rule, the inter-broker channel, the runtime and the
    timeline maps live in kbroker/coordinator/ itself."""
    offenders = []
    for sub in ("txn", "share"):
        for path in sorted((ROOT / "coordinator" / sub).rglob("*.py")):
            for name in _imports(path):
                if name.startswith("kbroker.coordinator.group"):
                    offenders.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_every_rule_names_a_layer_that_exists():
    """A rule for a package that was renamed or moved would pass for ever, checking nothing."""
    layers = {_layer(path) for path in _modules()}
    assert set(RULES) <= layers, sorted(set(RULES) - layers)
    named = {name for forbidden in RULES.values() for name in forbidden}
    assert named <= layers, sorted(named - layers)


STORE_WRITES = {"commit", "allocate_producer_ids"}


def test_only_the_controller_writes_the_metadata_store():
    """Calls of the store's mutating methods (on a receiver named like the store or the metadata)
    anywhere but in the metadata package, whose controller is the one caller."""
    allowed = {ROOT / "metadata" / "controller.py"}
    offenders = []
    for path in _modules():
        if path in allowed or path.parent == ROOT / "metadata":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in STORE_WRITES):
                receiver = ast.unparse(node.func.value)
                if "store" in receiver or "metadata" in receiver:
                    offenders.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} "
                                     f"{receiver}.{node.func.attr}(...)")
    assert not offenders, "\n".join(offenders)


def test_only_the_zk_package_knows_zookeeper():
    """kazoo is imported in kbroker/metadata/zk/ alone (and by the test tooling of
    kbroker/testing/); the mode-independent metadata modules (the controller, images, deltas,
    policies, the local store) import nothing from it: the store is the one thing that
    differs between modes, and the server wires the ZooKeeper one in."""
    zk_package = ROOT / "metadata" / "zk"
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        if zk_package in path.parents or _layer(path) == "testing":
            continue
        if any(n == "kazoo" or n.startswith("kazoo.") for n in names):
            offenders.append(f"{path.relative_to(ROOT.parent)} imports kazoo")
        if path.parent == ROOT / "metadata" and any(
                n.startswith("kbroker.metadata.zk") for n in names):
            offenders.append(f"{path.relative_to(ROOT.parent)} imports the ZooKeeper side")
    assert not offenders, "\n".join(offenders)


def test_share_partitions_use_only_the_persister_of_the_coordinators():
    """``kbroker/share/`` reaches the share coordinator through its persister contract alone
    (kbroker.coordinator.share.persister), never the coordinators themselves."""
    allowed = "kbroker.coordinator.share.persister"
    offenders = []
    for path in _modules():
        if _layer(path) != "share":
            continue
        for name in _imports_layer(_imports(path), "coordinator"):
            if name != allowed and not name.startswith(allowed + "."):
                offenders.append(f"{path.relative_to(ROOT.parent)} imports {name}")
    assert not offenders, "\n".join(offenders)
