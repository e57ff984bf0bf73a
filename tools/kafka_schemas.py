#!/usr/bin/env python3
"""Apache Kafka's message and record schemas, read from Kafka's own jars on Maven Central.

Kafka ships the JSON it generates its protocol code from inside its jars: ``common/message/*.json``
in ``kafka-clients`` (every request, response and header, plus data schemas such as
ConsumerProtocolSubscription) and each coordinator's record schemas in that coordinator's jar
(``kafka-group-coordinator``, ``kafka-transaction-coordinator``, ``kafka-share-coordinator``).
``schemas/pin.json`` pins the Kafka version, the jars and each jar's sha256.

A jar is downloaded once into ``~/.cache/kbroker/schemas-<version>/`` (``KBROKER_KAFKA_CACHE``
moves the root, as for tools/kafka_ref) and its checksum is verified after every download and
before every read, so a corrupt or tampered cache is never used. Nothing is copied into the repo.

    python tools/kafka_schemas.py fetch     # download and verify the pinned jars (CI does this)
    python tools/kafka_schemas.py list      # every schema, with the jar it comes from

Stdlib only; tools/gen_messages.py imports ``pinned_schemas()``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIN = REPO / "schemas" / "pin.json"
DOWNLOAD_TIMEOUT_S = 120


class SchemaSourceError(Exception):
    """The pinned schemas cannot be had: a failed download or a checksum mismatch."""


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    sha256: str
    prefix: str  # the directory inside the jar holding the schemas

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        return (f"{repository.rstrip('/')}/{self.group.replace('.', '/')}/{self.artifact}/"
                f"{self.version}/{self.file_name}")


@dataclass(frozen=True)
class SchemaFile:
    jar: Jar
    path: str  # inside the jar, e.g. common/message/ProduceRequest.json
    text: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def origin(self) -> str:
        """Where the schema comes from, in the jar-URL notation: kafka-clients-4.4.0.jar!/..."""
        return f"{self.jar.file_name}!/{self.path}"


def load_pin(path: Path | None = None) -> tuple[str, list[Jar]]:
    pin = json.loads((path or PIN).read_text())
    jars = [Jar(pin["group"], artifact, pin["version"], spec["sha256"], spec["schemas"])
            for artifact, spec in pin["jars"].items()]
    return pin["repository"], jars


def cache_dir(version: str) -> Path:
    root = os.environ.get("KBROKER_KAFKA_CACHE") or "~/.cache/kbroker"
    return Path(root).expanduser() / f"schemas-{version}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, dest: Path, sha256: str) -> None:
    """Download url to dest through a temporary file; dest appears only once verified."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    while block := response.read(1 << 20):
                        out.write(block)
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise SchemaSourceError(f"cannot download {url}: {reason}") from None
        got = sha256_of(Path(tmp))
        if got != sha256:
            raise SchemaSourceError(f"{url} has sha256 {got} but the pin (schemas/pin.json) "
                                    f"says {sha256}: refusing it")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch(jar: Jar, repository: str) -> Path:
    """The verified local copy of jar, downloaded into the cache when missing or corrupt."""
    path = cache_dir(jar.version) / jar.file_name
    if path.exists() and sha256_of(path) == jar.sha256:
        return path
    download(jar.url(repository), path, jar.sha256)
    return path


def fetch_all(pin: Path | None = None) -> list[tuple[Jar, Path]]:
    repository, jars = load_pin(pin)
    return [(jar, fetch(jar, repository)) for jar in jars]


def pinned_schemas(pin: Path | None = None) -> list[SchemaFile]:
    """Every *.json schema in the pinned jars' schema directories, in jar then path order."""
    schemas = []
    for jar, path in fetch_all(pin):
        with zipfile.ZipFile(path) as zf:
            names = sorted(n for n in zf.namelist()
                           if n.startswith(jar.prefix) and n.endswith(".json")
                           and "/" not in n[len(jar.prefix):])
            if not names:
                raise SchemaSourceError(f"{jar.file_name} holds no {jar.prefix}*.json")
            for name in names:
                schemas.append(SchemaFile(jar, name, zf.read(name).decode("utf-8")))
    return schemas


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "list"))
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            for jar, path in fetch_all():
                print(f"{path} (sha256 {jar.sha256[:12]}… verified)")
        else:
            for schema in pinned_schemas():
                print(schema.origin)
    except SchemaSourceError as exc:
        print(f"kafka_schemas: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
