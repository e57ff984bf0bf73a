"""The format libraries load only when a schema of their type is parsed: a broker without a
registry (or a registry that never sees a Protobuf or JSON schema) never imports them."""

from __future__ import annotations

import subprocess
import sys

LIBRARIES = ("google.protobuf", "grpc_tools", "jsonschema", "referencing", "avro")


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(','.join(m for m in {LIBRARIES!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_the_broker_and_the_registry_load_no_format_library():
    assert loaded_after("import kbroker.cli.main, kbroker.server.broker, kbroker.schema_registry.service, "
                        "kbroker.schema_registry.api, kbroker.schema_registry.formats") == []


def test_each_format_loads_only_its_own_libraries():
    protobuf = "from kbroker.schema_registry.formats import parse\nparse('PROTOBUF', 'syntax = \"proto3\";', {})"
    assert sorted(loaded_after(protobuf)) == ["google.protobuf", "grpc_tools"]
    json_schema = "from kbroker.schema_registry.formats import parse\nparse('JSON', '{}', {})"
    assert sorted(loaded_after(json_schema)) == ["jsonschema", "referencing"]
