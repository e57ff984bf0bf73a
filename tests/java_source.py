"""Java programs the tests keep as one source file (tests/share/ShareConsume.java,
tests/integration/share_java/ShareJoin.java, tests/coordinator/java/MetadataHash.java), compiled
once instead of at every launch.

``java File.java`` compiles the file in memory each time it starts: ~1.5 s of CPU per launch, and
the suite launches these a few dozen times. :func:`command` compiles a source once per content
and class path (``javac`` into ``build/java-sources/``, under a lock the xdist workers share) and
returns the ``java`` command that runs the compiled class, started as the tests' other client JVMs
are (C1 only, the serial collector: they live seconds).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "java-sources"
QUICK_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def command(source: Path, classpath: str) -> list[str]:
    """``java ... -cp <classes>:classpath <Main>`` for the public class of ``source`` (its file
    name, as for ``java File.java``)."""
    return ["java", *QUICK_JVM, "-cp", f"{compiled(source, classpath)}{os.pathsep}{classpath}",
            source.stem]


def compiled(source: Path, classpath: str) -> Path:
    key = hashlib.sha256(source.read_bytes() + b"\0" + classpath.encode()).hexdigest()[:16]
    classes = CACHE / f"{source.stem}-{key}"
    if (classes / f"{source.stem}.class").exists():
        return classes
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{source.stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker compiles, the others then use its classes
        if not (classes / f"{source.stem}.class").exists():
            staging = classes.with_name(f"{classes.name}.tmp{os.getpid()}")
            done = subprocess.run(["javac", "-nowarn", "-d", str(staging), "-cp", classpath,
                                   str(source)], capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"javac {source.name} failed:\n{done.stderr[-3000:]}")
            os.replace(staging, classes)
    return classes
