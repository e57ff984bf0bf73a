"""Small text files of a log dir, in Kafka's formats, written atomically.

Every write goes to ``<file>.tmp``, is fsynced, renamed over the target, and the directory is
fsynced (Kafka's ``CheckpointFile``), so a crash leaves either the old or the new content.

Offset checkpoints (log-dir root: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``)::

    0                       <- version
    2                       <- number of entries
    my-topic 0 1234         <- "<topic> <partition> <offset>", one line per partition
    my-topic 1 99

``leader-epoch-checkpoint`` (in a partition dir)::

    0                       <- version
    2                       <- number of entries
    0 0                     <- "<leader epoch> <start offset>", epochs ascending
    3 5120

``partition.metadata`` (in a partition dir; no trailing newline, as Kafka writes it)::

    version: 0
    topic_id: <topic id, base64url without padding, Kafka's Uuid.toString>

``meta.properties`` (log-dir root; Java properties, KRaft v1)::

    version=1
    node.id=1
    cluster.id=<cluster id>
    directory.id=<base64url uuid>

``.kafka_cleanshutdown`` (log-dir root; present only between a clean shutdown and the next
start): ``{"version":"0","broker_epoch":"-1"}`` (Kafka's ``CleanShutdownFileHandler``).
"""

from __future__ import annotations

import base64
import os
import uuid

OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class CheckpointError(ValueError):
    """A checkpoint file exists but cannot be parsed."""


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, *, durable: bool = True) -> None:
    """Write through a temp file and a rename, so a reader never sees half of it; ``durable``
    also fsyncs the file and its directory before returning."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not a text file ({e.reason} at byte {e.start})") from None


def _entries(path: str, lines: list[str], version: int, fields: int) -> list[list[str]]:
    try:
        if int(lines[0]) != version:
            raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
        count = int(lines[1])
        rows = [line.split() for line in lines[2:2 + count]]
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{path}: malformed checkpoint ({e})") from None
    if len(rows) != count or any(len(row) != fields for row in rows):
        raise CheckpointError(f"{path}: expected {count} entries of {fields} fields")
    return rows


# --- offset checkpoints ------------------------------------------------------------------------

def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(OFFSET_CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    write_atomic(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The checkpoint's entries; an absent file reads as empty."""
    lines = _read_lines(path)
    if lines is None:
        return {}
    rows = _entries(path, lines, OFFSET_CHECKPOINT_VERSION, 3)
    try:
        return {(topic, int(partition)): int(offset) for topic, partition, offset in rows}
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


# --- leader-epoch-checkpoint -------------------------------------------------------------------

def write_leader_epoch_checkpoint(path: str, entries: list[tuple[int, int]],
                                  durable: bool = True) -> None:
    lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    write_atomic(path, ("\n".join(lines) + "\n").encode(), durable=durable)


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    lines = _read_lines(path)
    if lines is None:
        return []
    rows = _entries(path, lines, LEADER_EPOCH_CHECKPOINT_VERSION, 2)
    try:
        return [(int(epoch), int(start)) for epoch, start in rows]
    except ValueError as e:
        raise CheckpointError(f"{path}: {e}") from None


# --- partition.metadata ------------------------------------------------------------------------

def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return uuid.UUID(bytes=raw)
    except ValueError as e:
        raise CheckpointError(f"bad uuid {text!r}: {e}") from None


def write_partition_metadata(dir_path: str, topic_id: uuid.UUID, *, durable: bool = True) -> None:
    text = f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}"
    write_atomic(os.path.join(dir_path, PARTITION_METADATA), text.encode(), durable=durable)


def read_partition_metadata(dir_path: str) -> uuid.UUID | None:
    lines = _read_lines(os.path.join(dir_path, PARTITION_METADATA))
    if lines is None:
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    if fields.get("version", "").strip() != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{dir_path}/{PARTITION_METADATA}: malformed")
    return uuid_from_base64(fields["topic_id"].strip())


# --- meta.properties ---------------------------------------------------------------------------

def write_properties(path: str, props: dict[str, str]) -> None:
    text = "#\n" + "".join(f"{key}={value}\n" for key, value in props.items())
    write_atomic(path, text.encode())


def read_properties(path: str) -> dict[str, str] | None:
    lines = _read_lines(path)
    if lines is None:
        return None
    props = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props
