"""Where the schemas come from: Apache Kafka's jars pinned by version and sha256 (schemas/pin.json),
fetched by tools/kafka_schemas.py. A jar is used only when its checksum matches, a failed download
is one clear line, and nothing is copied into the repo. These tests serve fake jars from a
``file://`` repository, so they need no network."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import kafka_schemas  # noqa: E402


def _jar(entries: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in entries.items():
            zf.writestr(name, text)
    return buf.getvalue()


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    """A file:// Maven repository with one jar, a pin for it, and an empty cache."""
    monkeypatch.setenv("KBROKER_KAFKA_CACHE", str(tmp_path / "cache"))
    content = _jar({
        "common/message/FooRequest.json": '// comment\n{"name": "FooRequest"}',
        "common/message/nested/Ignored.json": "{}",
        "org/apache/kafka/Foo.class": "",
    })
    path = tmp_path / "repo/org/apache/kafka/kafka-foo/9.9.9/kafka-foo-9.9.9.jar"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    def pin(sha256: str = hashlib.sha256(content).hexdigest(),
            repository: str = (tmp_path / "repo").as_uri()) -> Path:
        pin_path = tmp_path / "pin.json"
        pin_path.write_text(json.dumps({
            "repository": repository, "group": "org.apache.kafka", "version": "9.9.9",
            "jars": {"kafka-foo": {"sha256": sha256, "schemas": "common/message/"}}}))
        return pin_path

    return tmp_path, path, pin


def test_reads_the_schemas_of_a_verified_jar(fake_repo):
    tmp_path, _, pin = fake_repo
    schemas = kafka_schemas.pinned_schemas(pin())
    assert [(s.name, s.origin) for s in schemas] == [
        ("FooRequest.json", "kafka-foo-9.9.9.jar!/common/message/FooRequest.json")]
    assert (tmp_path / "cache/schemas-9.9.9/kafka-foo-9.9.9.jar").exists()


def test_a_jar_with_another_checksum_is_refused(fake_repo):
    tmp_path, _, pin = fake_repo
    with pytest.raises(kafka_schemas.SchemaSourceError, match="refusing it"):
        kafka_schemas.pinned_schemas(pin(sha256="0" * 64))
    assert not list((tmp_path / "cache/schemas-9.9.9").iterdir())  # nothing left half-written


def test_a_corrupt_cached_jar_is_fetched_again(fake_repo):
    tmp_path, _, pin = fake_repo
    kafka_schemas.pinned_schemas(pin())
    cached = tmp_path / "cache/schemas-9.9.9/kafka-foo-9.9.9.jar"
    cached.write_bytes(b"truncated")
    assert len(kafka_schemas.pinned_schemas(pin())) == 1
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == json.loads(
        pin().read_text())["jars"]["kafka-foo"]["sha256"]


def test_a_failed_download_is_one_clear_line(fake_repo):
    _, jar, pin = fake_repo
    jar.unlink()
    with pytest.raises(kafka_schemas.SchemaSourceError) as info:
        kafka_schemas.pinned_schemas(pin())
    message = str(info.value)
    assert message.startswith("cannot download file://") and "kafka-foo-9.9.9.jar" in message
    assert "\n" not in message


def test_the_generator_reports_a_failed_download_in_one_line(tmp_path):
    # An unreachable repository (nothing listens on port 9 here) and an empty cache.
    pin = json.loads((REPO / "schemas" / "pin.json").read_text())
    pin["repository"] = "http://127.0.0.1:9/maven2"
    code = ("import sys, json; sys.path.insert(0, 'tools'); import kafka_schemas, gen_messages; "
            f"kafka_schemas.PIN = __import__('pathlib').Path({str(tmp_path / 'pin.json')!r}); "
            "sys.exit(gen_messages.main(['--check']))")
    (tmp_path / "pin.json").write_text(json.dumps(pin))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env={"KBROKER_KAFKA_CACHE": str(tmp_path / "cache"),
                                           "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("gen_messages: cannot download http://127.0.0.1:9/maven2/")


def test_the_pin_names_kafka_440_jars_with_their_checksums():
    pin = json.loads((REPO / "schemas" / "pin.json").read_text())
    assert pin["version"] == "4.4.0"
    assert set(pin["jars"]) == {"kafka-clients", "kafka-group-coordinator",
                                "kafka-transaction-coordinator", "kafka-share-coordinator"}
    for spec in pin["jars"].values():
        assert len(spec["sha256"]) == 64 and spec["schemas"] == "common/message/"


def test_no_schema_json_is_kept_in_the_repo():
    assert sorted(p.name for p in (REPO / "schemas").rglob("*")) == ["manifest.json", "pin.json"]
