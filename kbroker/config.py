"""Broker and topic configuration with Kafka's names, types, defaults and validation.

Two declarative tables drive everything: ``BROKER_CONFIGS`` (``server.properties`` keys) and
``TOPIC_CONFIGS`` (per-topic overrides, each with its broker synonyms in Kafka's order). Defaults
are Apache Kafka 4.3's, with these deliberate differences for a single-node dev/CI broker:

* ``node.id`` / ``broker.id`` default to 1 (Kafka: ``node.id`` is required and ``broker.id=-1``
  means "generate one"; we never generate ids, so -1 also means 1).
* ``listeners`` defaults to ``PLAINTEXT://localhost:9092`` and ``log.dir`` to ``./kbroker-data``.
* ``offsets.topic.replication.factor`` and ``transaction.state.log.replication.factor`` /
  ``.min.isr`` default to 1, so a single node works out of the box.
* ``segment.bytes`` / ``log.segment.bytes`` keep Kafka 3.x's lower bound of 14 bytes (Kafka 4
  raised it to 1 MiB, KIP-1030) so tests can roll segments cheaply.
* Keys Kafka 4 dropped with ZooKeeper (``zookeeper.connect``, ...) are ours again: the cluster
  mode coordinates through ZooKeeper. ``cluster.id`` is our extension (Kafka keeps it in
  ``meta.properties``).

Entries marked ``ignored`` are accepted and validated so existing ``server.properties`` files
load, but kbroker does not act on them (thread counts, socket buffer sizes, ...). Unknown keys are
logged and kept in ``originals``, as Kafka does.

``load_config(path, overrides)`` reads a Java-properties file plus ``key=value`` overrides and
returns a ``BrokerConfig``. ``TopicConfig`` resolves a topic's effective values (topic override ->
broker synonyms -> default) and produces DescribeConfigs entries with Kafka's sources and
synonym lists; ``describe_broker_configs`` does the same for a BROKER resource.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any, Callable, Iterable, Mapping, NamedTuple

log = logging.getLogger("kbroker.config")

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key. Handlers map it to
    INVALID_CONFIG; the CLI prints it and exits 2."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ConfigType(IntEnum):
    """Value types, numbered as DescribeConfigs v3+ reports them (``ConfigType``)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value came from, numbered as DescribeConfigs v1+ reports it."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password(str):
    """A secret: compares and encodes as its text, but never shows it in reprs or logs."""

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    @property
    def value(self) -> str:
        return str.__str__(self)


# --- validators: callables raising ValueError(reason); str() is the doc form ------------------


class Range:
    def __init__(self, low: float | None = None, high: float | None = None) -> None:
        self.low, self.high = low, high

    def __call__(self, value: Any) -> None:
        if self.low is not None and value < self.low:
            raise ValueError(f"must be at least {self.low}" if self.high is None
                             else f"must be between {self.low} and {self.high}")
        if self.high is not None and value > self.high:
            raise ValueError(f"must be at most {self.high}" if self.low is None
                             else f"must be between {self.low} and {self.high}")

    def __str__(self) -> str:
        return f"[{'' if self.low is None else self.low},...{'' if self.high is None else f',{self.high}'}]"


class OneOf:
    def __init__(self, *allowed: str, case_sensitive: bool = True) -> None:
        self.allowed, self.case_sensitive = allowed, case_sensitive

    def __call__(self, value: str) -> None:
        pool = self.allowed if self.case_sensitive else [a.lower() for a in self.allowed]
        if (value if self.case_sensitive else value.lower()) not in pool:
            raise ValueError(f"must be one of {', '.join(self.allowed)}")

    def __str__(self) -> str:
        return f"[{', '.join(self.allowed)}]"


class ListOf:
    """Every element of a LIST value is one of ``allowed``, without duplicates."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def __call__(self, value: list[str]) -> None:
        for item in value:
            if item not in self.allowed:
                raise ValueError(f"'{item}' is not one of {', '.join(self.allowed)}")
        if len(set(value)) != len(value):
            raise ValueError("contains duplicate entries")

    def __str__(self) -> str:
        return f"[{', '.join(self.allowed)}]"


class GzipLevel:
    def __call__(self, value: int) -> None:
        if value != -1 and not 1 <= value <= 9:
            raise ValueError("must be -1 or between 1 and 9")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


# --- definitions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigDef:
    """One config key. ``synonyms`` (topic configs only) lists the broker keys that supply the
    default, in Kafka's order, each with the factor converting its unit to the topic's."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Callable[[Any], None] | None = None
    ignored: bool = False
    dynamic: bool = False
    synonyms: tuple[tuple[str, int], ...] = ()

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: Any) -> Any:
        """The typed, validated value of ``raw`` (a string from a file/the wire, or a Python
        value); ConfigError naming the key otherwise."""
        if raw is None:
            return None
        try:
            value = _PARSERS[self.type](raw)
        except ValueError as exc:
            raise ConfigError(f"invalid value {_show(self, raw)} for '{self.name}': {exc}",
                              self.name) from None
        if self.validator is not None and value is not None:
            try:
                self.validator(value)
            except ValueError as exc:
                raise ConfigError(f"invalid value {_show(self, raw)} for '{self.name}': {exc}",
                                  self.name) from None
        return value

    def to_string(self, value: Any) -> str | None:
        """Kafka's ``ConfigDef.convertToString``: the wire form of a typed value."""
        if value is None:
            return None
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        if self.type is ConfigType.PASSWORD:
            return value.value if isinstance(value, Password) else str(value)
        return str(value)


def _show(d: ConfigDef, raw: Any) -> str:
    return "[hidden]" if d.is_sensitive else repr(raw)


_INT_RE = re.compile(r"[+-]?\d+")


def _integer(bits: int) -> Callable[[Any], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    kind = {16: "a short", 32: "an integer", 64: "a long"}[bits]

    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"not {kind}")
        if isinstance(raw, str):
            text = raw.strip()
            if not _INT_RE.fullmatch(text):
                raise ValueError(f"not {kind}")
            raw = int(text)
        if not isinstance(raw, int):
            raise ValueError(f"not {kind}")
        if not low <= raw <= high:
            raise ValueError(f"out of range for {kind} ({low}..{high})")
        return raw

    return parse


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError("not a boolean (expected true or false)")


def _double(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("not a number")
    try:
        return float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ValueError("not a number") from None


def _string(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("not a string")
    return raw.strip()


def _list(raw: Any) -> list[str]:
    if isinstance(raw, (list, tuple)):
        return [str(x).strip() for x in raw]
    text = _string(raw)
    return [] if not text else [part.strip() for part in text.split(",")]


def _password(raw: Any) -> Password:
    return raw if isinstance(raw, Password) else Password(_string(raw))


_PARSERS: dict[ConfigType, Callable[[Any], Any]] = {
    ConfigType.BOOLEAN: _boolean,
    ConfigType.STRING: _string,
    ConfigType.INT: _integer(32),
    ConfigType.SHORT: _integer(16),
    ConfigType.LONG: _integer(64),
    ConfigType.DOUBLE: _double,
    ConfigType.LIST: _list,
    ConfigType.CLASS: _string,
    ConfigType.PASSWORD: _password,
}

B, S, I, SH, L, D, LS, C, P = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
                               ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE,
                               ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_AT0, _AT1 = Range(0), Range(1)


def _d(name: str, type_: ConfigType, default: Any, doc: str, importance: Importance = MEDIUM,
       validator: Callable[[Any], None] | None = None, **kw: Any) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, importance, validator, **kw)


def _ignored(name: str, type_: ConfigType, default: Any, doc: str,
             validator: Callable[[Any], None] | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc + " (accepted and ignored by kbroker)", LOW,
                     validator, ignored=True)


_BROKER_TABLE: tuple[ConfigDef, ...] = (
    # identity and listeners
    _d("node.id", I, None, "The id of this broker; a synonym of broker.id. Defaults to 1.", HIGH, _AT0),
    _d("broker.id", I, None, "Legacy name of node.id; -1 (Kafka: generate one) means the default, 1.",
       HIGH, Range(-1)),
    _d("cluster.id", S, None, "kbroker extension: the cluster id to use when the data dir has none yet.",
       MEDIUM),
    _d("broker.rack", S, None, "The rack of this broker, reported in Metadata responses."),
    _d("listeners", LS, ["PLAINTEXT://localhost:9092"],
       "Comma-separated NAME://host:port to listen on; empty host binds all interfaces, port 0 picks "
       "a free one.", HIGH, dynamic=True),
    _d("advertised.listeners", LS, None,
       "Listeners published to clients; defaults to listeners with localhost, empty and 0.0.0.0 hosts "
       "replaced by 127.0.0.1.", HIGH, dynamic=True),
    _d("listener.security.protocol.map", S,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Maps listener names to security protocols.", LOW, dynamic=True),
    _d("inter.broker.listener.name", S, None, "The listener brokers use to talk to each other."),
    _d("security.inter.broker.protocol", S, "PLAINTEXT",
       "Security protocol between brokers when inter.broker.listener.name is unset.", MEDIUM,
       OneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    # ZooKeeper (cluster mode)
    _d("zookeeper.connect", S, None,
       "host:port[,host:port][/chroot] of ZooKeeper; unset means the embedded single-node store.", HIGH),
    _d("zookeeper.session.timeout.ms", I, 18000, "ZooKeeper session timeout.", HIGH, _AT1),
    _d("zookeeper.connection.timeout.ms", I, None,
       "Max wait to connect to ZooKeeper; defaults to zookeeper.session.timeout.ms.", HIGH),
    # requests and sockets
    _d("message.max.bytes", I, 1048588,
       "Largest record batch the broker accepts (after compression).", HIGH, _AT0, dynamic=True),
    _d("socket.request.max.bytes", I, 104857600, "Largest request the broker reads.", HIGH, _AT1),
    _d("fetch.max.bytes", I, 57671680, "Most bytes returned by one fetch request.", MEDIUM, Range(1024)),
    _d("connections.max.idle.ms", L, 600000, "Idle connections are closed after this long."),
    _d("max.connections", I, INT_MAX, "Most connections the broker accepts.", MEDIUM, _AT0, dynamic=True),
    _d("max.connections.per.ip", I, INT_MAX, "Most connections accepted from one address.", MEDIUM,
       _AT0, dynamic=True),
    _d("request.timeout.ms", I, 30000, "Timeout for requests the broker itself sends.", HIGH),
    _d("max.incremental.fetch.session.cache.slots", I, 1000,
       "Most incremental fetch sessions kept.", MEDIUM, _AT0),
    _d("delete.records.purgatory.purge.interval.requests", I, 1,
       "Purge interval of the DeleteRecords purgatory.", LOW),
    _ignored("num.network.threads", I, 3, "Network threads.", _AT1),
    _ignored("num.io.threads", I, 8, "Request handler threads.", _AT1),
    _ignored("background.threads", I, 10, "Background task threads.", _AT1),
    _ignored("num.recovery.threads.per.data.dir", I, 2, "Log recovery threads per data dir.", _AT1),
    _ignored("num.replica.fetchers", I, 1, "Replica fetcher threads.", _AT1),
    _ignored("queued.max.requests", I, 500, "Queued requests before network threads block.", _AT1),
    _ignored("socket.send.buffer.bytes", I, 102400, "SO_SNDBUF of server sockets.", None),
    _ignored("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of server sockets.", None),
    _ignored("socket.listen.backlog.size", I, 50, "Listen backlog of server sockets.", _AT1),
    _ignored("process.roles", LS, ["broker"], "KRaft roles; kbroker is always a broker.", None),
    _ignored("controller.listener.names", LS, [], "KRaft controller listeners.", None),
    _ignored("controller.quorum.voters", LS, [], "KRaft controller quorum.", None),
    _ignored("controller.quorum.bootstrap.servers", LS, [], "KRaft controller bootstrap.", None),
    _ignored("metadata.log.dir", S, None, "KRaft metadata log dir; kbroker keeps metadata in log.dirs.",
             None),
    _ignored("log.cleaner.threads", I, 1, "Log cleaner threads.", _AT0),
    _ignored("log.cleaner.dedupe.buffer.size", L, 134217728, "Log cleaner dedupe buffer size.", None),
    _ignored("log.cleaner.io.buffer.size", I, 524288, "Log cleaner I/O buffer size.", _AT0),
    _ignored("group.coordinator.threads", I, 4, "Group coordinator threads.", _AT1),
    _ignored("group.coordinator.rebalance.protocols", LS, ["classic", "consumer", "streams"],
             "Enabled group protocols.", None),
    # topics and logs
    _d("auto.create.topics.enable", B, True, "Create unknown topics on metadata and produce requests.",
       HIGH),
    _d("delete.topic.enable", B, True, "Allow DeleteTopics.", HIGH),
    _d("num.partitions", I, 1, "Default partition count of new topics.", MEDIUM, _AT1),
    _d("default.replication.factor", I, 1, "Default replication factor of new topics.", MEDIUM, _AT1),
    _d("min.insync.replicas", I, 1, "Minimum in-sync replicas for acks=all writes.", HIGH, _AT1,
       dynamic=True),
    _d("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader.", HIGH,
       dynamic=True),
    _d("compression.type", S, "producer", "Final compression of topic data; producer keeps the "
       "producer's codec.", HIGH, OneOf(*COMPRESSION_TYPES), dynamic=True),
    _d("compression.gzip.level", I, -1, "gzip level for compression.type=gzip.", MEDIUM, GzipLevel(),
       dynamic=True),
    _d("compression.lz4.level", I, 9, "lz4 level for compression.type=lz4.", MEDIUM, Range(1, 17),
       dynamic=True),
    _d("compression.zstd.level", I, 3, "zstd level for compression.type=zstd.", MEDIUM,
       Range(-131072, 22), dynamic=True),
    _d("log.dir", LS, ["./kbroker-data"], "Data directory, used when log.dirs is unset.", HIGH),
    _d("log.dirs", LS, None, "Comma-separated data directories; overrides log.dir.", HIGH),
    _d("log.segment.bytes", I, 1073741824, "Maximum size of one log segment file.", HIGH, Range(14),
       dynamic=True),
    _d("log.roll.ms", L, None, "Roll a segment after this long; overrides log.roll.hours.", HIGH,
       dynamic=True),
    _d("log.roll.hours", I, 168, "Roll a segment after this many hours.", HIGH, _AT1, dynamic=True),
    _d("log.roll.jitter.ms", L, None, "Maximum jitter subtracted from the roll time.", HIGH, dynamic=True),
    _d("log.roll.jitter.hours", I, 0, "Maximum roll jitter in hours.", HIGH, _AT0, dynamic=True),
    _d("log.index.interval.bytes", I, 4096, "Bytes between offset index entries.", MEDIUM, _AT0,
       dynamic=True),
    _d("log.index.size.max.bytes", I, 10485760, "Maximum size of an offset or time index.", MEDIUM,
       Range(4), dynamic=True),
    _d("log.open.files.max", I, 4096, "Most segment and index files kept open at once (kbroker; "
       "opened on demand, least recently used closed first; capped at half the open files limit).",
       MEDIUM, Range(16)),
    _d("log.retention.ms", L, None, "Retention time; -1 keeps forever. Beats .minutes and .hours.",
       HIGH, dynamic=True),
    _d("log.retention.minutes", I, None, "Retention time in minutes; beats log.retention.hours.", HIGH,
       dynamic=True),
    _d("log.retention.hours", I, 168, "Retention time in hours.", HIGH, dynamic=True),
    _d("log.retention.bytes", L, -1, "Maximum partition size before old segments go; -1 is unlimited.",
       HIGH, dynamic=True),
    _d("log.retention.check.interval.ms", L, 300000, "How often retention runs.", MEDIUM, _AT1),
    _d("log.segment.delete.delay.ms", L, 60000, "Delay before a deleted segment's files are removed.",
       HIGH, _AT0, dynamic=True),
    _d("log.flush.interval.messages", L, LONG_MAX, "fsync after this many messages.", HIGH, _AT1,
       dynamic=True),
    _d("log.flush.interval.ms", L, None,
       "fsync after this long; defaults to log.flush.scheduler.interval.ms.", HIGH, dynamic=True),
    _d("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the flusher checks logs.", HIGH,
       dynamic=True),
    _d("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often recovery points are written.",
       HIGH, _AT0),
    _d("log.flush.start.offset.checkpoint.interval.ms", I, 60000,
       "How often log start offsets are written.", HIGH, _AT0),
    _d("log.preallocate", B, False, "Preallocate segment files.", MEDIUM, dynamic=True),
    _d("log.message.timestamp.type", S, "CreateTime", "Timestamp stored in records.", MEDIUM,
       OneOf(*TIMESTAMP_TYPES), dynamic=True),
    _d("log.message.timestamp.before.max.ms", L, LONG_MAX,
       "How far a record timestamp may lag the broker clock.", MEDIUM, _AT0, dynamic=True),
    _d("log.message.timestamp.after.max.ms", L, 3600000,
       "How far a record timestamp may lead the broker clock.", MEDIUM, _AT0, dynamic=True),
    _d("log.cleanup.policy", LS, ["delete"], "delete and/or compact.", MEDIUM,
       ListOf("compact", "delete"), dynamic=True),
    _d("log.cleaner.enable", B, True, "Run the log cleaner (compaction).", MEDIUM),
    _d("log.cleaner.backoff.ms", L, 15000, "Cleaner sleep when nothing is cleanable.", MEDIUM, _AT0,
       dynamic=True),
    _d("log.cleaner.min.cleanable.ratio", D, 0.5, "Dirty ratio that makes a log cleanable.", MEDIUM,
       Range(0, 1), dynamic=True),
    _d("log.cleaner.delete.retention.ms", L, 86400000, "How long tombstones are kept.", MEDIUM, _AT0,
       dynamic=True),
    _d("log.cleaner.min.compaction.lag.ms", L, 0, "Minimum age before a record can be compacted.",
       MEDIUM, _AT0, dynamic=True),
    _d("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Maximum age before a record is compacted.",
       MEDIUM, _AT1, dynamic=True),
    _d("log.local.retention.ms", L, -2, "Tiered storage local retention (no tiered storage here).",
       MEDIUM, Range(-2), dynamic=True),
    _d("log.local.retention.bytes", L, -2, "Tiered storage local retention bytes.", MEDIUM, Range(-2),
       dynamic=True),
    # replication
    _d("replica.lag.time.max.ms", L, 30000, "A follower this far behind drops out of the ISR.", HIGH),
    _d("replica.fetch.max.bytes", I, 1048576, "Bytes per partition a follower fetches.", MEDIUM, _AT0),
    _d("replica.fetch.response.max.bytes", I, 10485760, "Bytes per follower fetch response.", MEDIUM,
       _AT0),
    _d("replica.fetch.wait.max.ms", I, 500, "Follower fetch max wait.", HIGH),
    _d("replica.fetch.min.bytes", I, 1, "Follower fetch min bytes.", HIGH),
    _d("replica.fetch.backoff.ms", I, 1000, "Follower back-off after a fetch error.", MEDIUM, _AT0),
    _d("replica.socket.timeout.ms", I, 30000, "Follower socket timeout.", HIGH),
    _d("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often high watermarks are saved.",
       HIGH),
    _d("auto.leader.rebalance.enable", B, True, "Move leadership back to preferred replicas.", HIGH),
    _d("leader.imbalance.check.interval.seconds", L, 300, "Preferred-leader check interval.", HIGH, _AT1),
    # group coordinator
    _d("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets.", HIGH, _AT1),
    _d("offsets.topic.replication.factor", SH, 1, "Replication factor of __consumer_offsets.", HIGH, _AT1),
    _d("offsets.topic.segment.bytes", I, 104857600, "Segment size of __consumer_offsets.", HIGH, _AT1),
    _d("offsets.retention.minutes", I, 10080, "Committed offsets of empty groups expire after this.",
       HIGH, _AT1),
    _d("offsets.retention.check.interval.ms", L, 600000, "How often expired offsets are removed.", HIGH,
       _AT1),
    _d("offsets.commit.timeout.ms", I, 5000, "Timeout of an offset commit write.", HIGH, _AT1),
    _d("offsets.load.buffer.size", I, 5242880, "Read size when loading a coordinator partition.", HIGH,
       _AT1),
    _d("offset.metadata.max.bytes", I, 4096, "Largest metadata string of a committed offset.", HIGH),
    _d("group.initial.rebalance.delay.ms", I, 3000, "Wait for more members before the first rebalance.",
       MEDIUM),
    _d("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member may ask for.", MEDIUM),
    _d("group.max.session.timeout.ms", I, 1800000, "Largest session timeout a member may ask for.",
       MEDIUM),
    _d("group.max.size", I, INT_MAX, "Most members of one classic group.", MEDIUM, _AT1),
    _d("group.consumer.session.timeout.ms", I, 45000, "Session timeout of consumer-protocol members.",
       MEDIUM, _AT1),
    _d("group.consumer.min.session.timeout.ms", I, 45000, "Minimum consumer-protocol session timeout.",
       MEDIUM, _AT1),
    _d("group.consumer.max.session.timeout.ms", I, 60000, "Maximum consumer-protocol session timeout.",
       MEDIUM, _AT1),
    _d("group.consumer.heartbeat.interval.ms", I, 5000, "Heartbeat interval of consumer-protocol members.",
       MEDIUM, _AT1),
    _d("group.consumer.min.heartbeat.interval.ms", I, 5000, "Minimum consumer-protocol heartbeat.",
       MEDIUM, _AT1),
    _d("group.consumer.max.heartbeat.interval.ms", I, 15000, "Maximum consumer-protocol heartbeat.",
       MEDIUM, _AT1),
    _d("group.consumer.max.size", I, INT_MAX, "Most members of one consumer-protocol group.", MEDIUM,
       _AT1),
    _d("group.consumer.assignors", LS, ["uniform", "range"], "Server-side assignors, preferred first.",
       MEDIUM),
    # transactions
    _d("transaction.state.log.num.partitions", I, 50, "Partitions of __transaction_state.", HIGH, _AT1),
    _d("transaction.state.log.replication.factor", SH, 1, "Replication factor of __transaction_state.",
       HIGH, _AT1),
    _d("transaction.state.log.min.isr", I, 1, "min.insync.replicas of __transaction_state.", HIGH, _AT1),
    _d("transaction.state.log.segment.bytes", I, 104857600, "Segment size of __transaction_state.", HIGH,
       _AT1),
    _d("transaction.state.log.load.buffer.size", I, 5242880, "Read size when loading transactions.",
       HIGH, _AT1),
    _d("transaction.max.timeout.ms", I, 900000, "Largest transaction timeout a producer may ask for.",
       HIGH, _AT1),
    _d("transactional.id.expiration.ms", I, 604800000, "Idle transactional ids expire after this.",
       HIGH, _AT1),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000,
       "How often timed-out transactions are aborted.", LOW, _AT1),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000,
       "How often expired transactional ids are removed.", LOW, _AT1),
    _d("transaction.partition.verification.enable", B, True,
       "Verify a partition is in the transaction before a transactional append.", LOW),
    _d("producer.id.expiration.ms", I, 86400000, "Idle producer ids expire after this.", LOW, _AT1),
    _d("producer.id.expiration.check.interval.ms", I, 600000, "How often producer ids expire.", LOW, _AT1),
    # security
    _d("sasl.enabled.mechanisms", LS, ["GSSAPI"], "SASL mechanisms offered.", MEDIUM, dynamic=True),
    _d("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism between brokers.", MEDIUM),
    _d("ssl.keystore.location", S, None, "Key store file (PEM or PKCS12).", MEDIUM, dynamic=True),
    _d("ssl.keystore.password", P, None, "Key store password.", MEDIUM, dynamic=True),
    _d("ssl.keystore.type", S, "JKS", "Key store format.", MEDIUM, dynamic=True),
    _d("ssl.key.password", P, None, "Private key password.", MEDIUM, dynamic=True),
    _d("ssl.keystore.key", P, None, "PEM private key.", MEDIUM, dynamic=True),
    _d("ssl.keystore.certificate.chain", P, None, "PEM certificate chain.", MEDIUM, dynamic=True),
    _d("ssl.truststore.location", S, None, "Trust store file.", MEDIUM, dynamic=True),
    _d("ssl.truststore.password", P, None, "Trust store password.", MEDIUM, dynamic=True),
    _d("ssl.truststore.type", S, "JKS", "Trust store format.", MEDIUM, dynamic=True),
    _d("ssl.truststore.certificates", P, None, "PEM trusted certificates.", MEDIUM, dynamic=True),
    _d("ssl.client.auth", S, "none", "Client certificate requirement.", MEDIUM,
       OneOf("required", "requested", "none"), dynamic=True),
    _d("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], "TLS versions offered.", MEDIUM, dynamic=True),
    _d("authorizer.class.name", S, "", "Authorizer; empty disables ACL checks.", LOW),
    _d("super.users", S, None, "Semicolon-separated principals that pass every ACL check.", LOW),
    _d("allow.everyone.if.no.acl.found", B, False, "Allow access to resources without ACLs.", LOW),
    _d("delegation.token.secret.key", P, None, "Secret for delegation tokens.", MEDIUM),
    _d("connections.max.reauth.ms", L, 0, "Re-authentication interval for SASL connections.", MEDIUM),
    _d("create.topic.policy.class.name", C, None, "CreateTopics policy class (not loaded by kbroker).",
       LOW),
    _d("alter.config.policy.class.name", C, None, "AlterConfigs policy class (not loaded by kbroker).",
       LOW),
)

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_TABLE}


def _t(name: str, type_: ConfigType, default: Any, doc: str, *synonyms: tuple[str, int] | str,
       validator: Callable[[Any], None] | None = None) -> ConfigDef:
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    return ConfigDef(name, type_, default, doc, MEDIUM, validator, synonyms=syn)


_TOPIC_TABLE: tuple[ConfigDef, ...] = (
    _t("cleanup.policy", LS, ["delete"], "delete, compact, or both.", "log.cleanup.policy",
       validator=ListOf("compact", "delete")),
    _t("compression.type", S, "producer", "Final compression of the topic's data.", "compression.type",
       validator=OneOf(*COMPRESSION_TYPES)),
    _t("compression.gzip.level", I, -1, "gzip level.", "compression.gzip.level", validator=GzipLevel()),
    _t("compression.lz4.level", I, 9, "lz4 level.", "compression.lz4.level", validator=Range(1, 17)),
    _t("compression.zstd.level", I, 3, "zstd level.", "compression.zstd.level",
       validator=Range(-131072, 22)),
    _t("delete.retention.ms", L, 86400000, "How long tombstones are kept on compacted topics.",
       "log.cleaner.delete.retention.ms", validator=_AT0),
    _t("file.delete.delay.ms", L, 60000, "Delay before a deleted segment's files are removed.",
       "log.segment.delete.delay.ms", validator=_AT0),
    _t("flush.messages", L, LONG_MAX, "fsync after this many messages.", "log.flush.interval.messages",
       validator=_AT1),
    _t("flush.ms", L, LONG_MAX, "fsync after this long.", "log.flush.interval.ms",
       "log.flush.scheduler.interval.ms", validator=_AT0),
    _t("follower.replication.throttled.replicas", LS, [], "Replicas throttled on the follower side."),
    _t("index.interval.bytes", I, 4096, "Bytes between offset index entries.",
       "log.index.interval.bytes", validator=_AT0),
    _t("leader.replication.throttled.replicas", LS, [], "Replicas throttled on the leader side."),
    _t("local.retention.bytes", L, -2, "Tiered storage local retention bytes.",
       "log.local.retention.bytes", validator=Range(-2)),
    _t("local.retention.ms", L, -2, "Tiered storage local retention time.", "log.local.retention.ms",
       validator=Range(-2)),
    _t("max.compaction.lag.ms", L, LONG_MAX, "Maximum age before a record is compacted.",
       "log.cleaner.max.compaction.lag.ms", validator=_AT1),
    _t("max.message.bytes", I, 1048588, "Largest record batch accepted (after compression).",
       "message.max.bytes", validator=_AT0),
    _t("message.timestamp.after.max.ms", L, 3600000, "How far a timestamp may lead the broker clock.",
       "log.message.timestamp.after.max.ms", validator=_AT0),
    _t("message.timestamp.before.max.ms", L, LONG_MAX, "How far a timestamp may lag the broker clock.",
       "log.message.timestamp.before.max.ms", validator=_AT0),
    _t("message.timestamp.type", S, "CreateTime", "CreateTime or LogAppendTime.",
       "log.message.timestamp.type", validator=OneOf(*TIMESTAMP_TYPES)),
    _t("min.cleanable.dirty.ratio", D, 0.5, "Dirty ratio that makes the log cleanable.",
       "log.cleaner.min.cleanable.ratio", validator=Range(0, 1)),
    _t("min.compaction.lag.ms", L, 0, "Minimum age before a record can be compacted.",
       "log.cleaner.min.compaction.lag.ms", validator=_AT0),
    _t("min.insync.replicas", I, 1, "Minimum in-sync replicas for acks=all writes.",
       "min.insync.replicas", validator=_AT1),
    _t("preallocate", B, False, "Preallocate segment files.", "log.preallocate"),
    _t("remote.log.copy.disable", B, False, "Tiered storage: stop uploading (no tiered storage here)."),
    _t("remote.log.delete.on.disable", B, False, "Tiered storage: delete remote data on disable."),
    _t("remote.storage.enable", B, False, "Tiered storage (not supported by kbroker)."),
    _t("retention.bytes", L, -1, "Maximum partition size before old segments go; -1 is unlimited.",
       "log.retention.bytes"),
    _t("retention.ms", L, 604800000, "How long data is kept; -1 keeps forever.", "log.retention.ms",
       ("log.retention.minutes", MS_PER_MINUTE), ("log.retention.hours", MS_PER_HOUR),
       validator=Range(-1)),
    _t("segment.bytes", I, 1073741824, "Maximum size of one segment file.", "log.segment.bytes",
       validator=Range(14)),
    _t("segment.index.bytes", I, 10485760, "Maximum size of an offset or time index.",
       "log.index.size.max.bytes", validator=Range(4)),
    _t("segment.jitter.ms", L, 0, "Maximum jitter subtracted from the roll time.", "log.roll.jitter.ms",
       ("log.roll.jitter.hours", MS_PER_HOUR), validator=_AT0),
    _t("segment.ms", L, 604800000, "Roll a segment after this long.", "log.roll.ms",
       ("log.roll.hours", MS_PER_HOUR), validator=_AT1),
    _t("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader.",
       "unclean.leader.election.enable"),
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_TABLE}

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: keys that describe one setting in other units.
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
_BROKER_SYNONYMS = {name: group for group in _BROKER_SYNONYM_GROUPS for name in group}


def broker_synonyms(name: str) -> tuple[str, ...]:
    return _BROKER_SYNONYMS.get(name, (name,))


# --- Java properties files --------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    """Join continued lines (odd number of trailing backslashes); drop blanks and comments."""
    pending: str | None = None
    for natural in text.splitlines():
        line = natural.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue  # comment lines never continue, whatever they end with
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties`` text: ``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; backslash line continuations; ``\\t \\n \\uXXXX`` escapes."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        props[_unescape(key)] = _unescape(line[i:])
    return props


# --- broker configuration ---------------------------------------------------------------------


class Endpoint(NamedTuple):
    """One listener: ``PLAINTEXT://localhost:9092`` -> ``Endpoint("PLAINTEXT", "localhost", 9092)``."""

    name: str
    host: str
    port: int

    @property
    def bind_host(self) -> str | None:
        """The address to bind: None (all interfaces) for an empty host; localhost means
        127.0.0.1 so the listener matches what we advertise."""
        if not self.host:
            return None
        return "127.0.0.1" if self.host == "localhost" else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%a-z]*\]|[^:\[\]/]*):(\d+)")


def parse_listeners(key: str, entries: list[str]) -> list[Endpoint]:
    endpoints = []
    for entry in entries:
        match = _LISTENER_RE.fullmatch(entry)
        if not match:
            raise ConfigError(f"invalid value {entry!r} for '{key}': expected NAME://host:port", key)
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(f"invalid value {entry!r} for '{key}': port out of range", key)
        endpoints.append(Endpoint(name, host, port))
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"invalid value for '{key}': each listener name must appear only once", key)
    return endpoints


# Hosts a client cannot usefully connect to as written. librdkafka may resolve "localhost" to ::1
# while we listen on IPv4, so the advertised default is the IPv4 loopback.
_ADVERTISE_AS_LOOPBACK = {"": "127.0.0.1", "localhost": "127.0.0.1", "0.0.0.0": "127.0.0.1",
                          "::": "::1"}

_MISSING = object()


class BrokerConfig:
    """Typed broker configuration: ``cfg.get("log.segment.bytes")``, ``cfg["num.partitions"]``,
    ``cfg.num_partitions`` (dots become underscores) and the resolved helpers below.

    ``originals`` is what the user set (file and overrides, as strings, unknown keys included).
    Dynamic layers (AlterConfigs on a BROKER resource) sit above the static values.
    """

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props or {})
        self.unknown: list[str] = []
        self._static: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        self._dynamic_default: dict[str, Any] = {}
        for key, raw in self.originals.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                self.unknown.append(key)
            else:
                self._static[key] = definition.parse(raw)
        if self.unknown:
            log.warning("unknown configs supplied and not used: %s", ", ".join(sorted(self.unknown)))
        self._check()

    # -- access --

    def get(self, name: str, default: Any = _MISSING) -> Any:
        for layer in (self._dynamic_broker, self._dynamic_default, self._static):
            if name in layer:
                return layer[name]
        definition = BROKER_CONFIGS.get(name)
        if definition is not None:
            return definition.default
        if default is _MISSING:
            raise KeyError(name)
        return default

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in BROKER_CONFIGS

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        if name in BROKER_CONFIGS:
            return self.get(name)
        raise AttributeError(attr)

    def is_set(self, name: str) -> bool:
        return name in self._static or name in self._dynamic_broker or name in self._dynamic_default

    def source_of(self, name: str) -> ConfigSource:
        if name in self._dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def set_dynamic(self, name: str, value: Any, *, cluster_default: bool = False) -> None:
        """Set (or with ``value=None`` remove) a dynamic broker config; validates first."""
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"unknown broker config '{name}'", name)
        if not definition.dynamic:
            raise ConfigError(f"cannot update '{name}' dynamically: it is read-only", name)
        layer = self._dynamic_default if cluster_default else self._dynamic_broker
        previous = dict(layer)
        if value is None:
            layer.pop(name, None)
        else:
            layer[name] = definition.parse(value)
        try:
            self._check()
        except ConfigError:
            layer.clear()
            layer.update(previous)
            raise

    def dynamic_configs(self, *, cluster_default: bool = False) -> dict[str, str]:
        """The dynamic broker configs of one layer (per-broker or cluster default), as strings:
        what AlterConfigs set and the metadata store keeps across restarts."""
        layer = self._dynamic_default if cluster_default else self._dynamic_broker
        return {name: BROKER_CONFIGS[name].to_string(value) for name, value in layer.items()}

    def _layers(self) -> list[tuple[ConfigSource, Mapping[str, Any]]]:
        defaults = {n: d.default for n, d in BROKER_CONFIGS.items() if d.default is not None}
        return [(ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default),
                (ConfigSource.STATIC_BROKER_CONFIG, self._static),
                (ConfigSource.DEFAULT_CONFIG, defaults)]

    # -- resolved helpers --

    @property
    def node_id(self) -> int:
        node_id, broker_id = self.get("node.id"), self.get("broker.id")
        if node_id is not None:
            return node_id
        return 1 if broker_id is None or broker_id < 0 else broker_id

    @property
    def broker_id(self) -> int:
        return self.node_id

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_listeners("listeners", self.get("listeners"))

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """Explicit advertised.listeners, else listeners with unroutable hosts made loopback. A
        port of 0 stays 0: the server substitutes the port it bound."""
        configured = self.get("advertised.listeners")
        if configured is not None:
            return parse_listeners("advertised.listeners", configured)
        return [e._replace(host=_ADVERTISE_AS_LOOPBACK.get(e.host, e.host)) for e in self.listeners]

    @property
    def listener_security_protocols(self) -> dict[str, str]:
        mapping = {}
        for pair in filter(None, (p.strip() for p in self.get("listener.security.protocol.map").split(","))):
            name, _, protocol = pair.partition(":")
            mapping[name.strip().upper()] = protocol.strip().upper()
        return mapping

    def security_protocol(self, listener_name: str) -> str:
        return self.listener_security_protocols[listener_name.upper()]

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        return list(dirs if dirs is not None else self.get("log.dir"))

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; any negative value means -1 (forever)."""
        return self._resolve_ms(TOPIC_CONFIGS["retention.ms"], negative_is_unlimited=True)

    @property
    def log_roll_ms(self) -> int:
        return self._resolve_ms(TOPIC_CONFIGS["segment.ms"])

    @property
    def log_roll_jitter_ms(self) -> int:
        return self._resolve_ms(TOPIC_CONFIGS["segment.jitter.ms"])

    @property
    def log_flush_interval_ms(self) -> int:
        return self._resolve_ms(TOPIC_CONFIGS["flush.ms"])

    @property
    def offsets_retention_ms(self) -> int:
        return self.get("offsets.retention.minutes") * MS_PER_MINUTE

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self.get("zookeeper.connection.timeout.ms")
        return value if value is not None else self.get("zookeeper.session.timeout.ms")

    def _resolve_ms(self, topic_def: ConfigDef, negative_is_unlimited: bool = False) -> int:
        value = self.topic_default(topic_def.name)
        return -1 if negative_is_unlimited and value < 0 else value

    def topic_default(self, topic_config: str) -> Any:
        """The broker-wide value a topic config takes without an override: the first non-null
        broker synonym (in Kafka's order, unit-converted), else the topic config's default."""
        definition = TOPIC_CONFIGS[topic_config]
        for name, factor in definition.synonyms:
            value = self.get(name)
            if value is not None:
                if factor != 1:
                    value = value * factor
                    if topic_config == "retention.ms" and value < 0:
                        value = -1
                return value
        return definition.default

    # -- cross-key checks --

    def _check(self) -> None:
        node_id, broker_id = self.get("node.id"), self.get("broker.id")
        if node_id is not None and broker_id is not None and broker_id >= 0 and node_id != broker_id:
            raise ConfigError(f"'node.id' ({node_id}) and 'broker.id' ({broker_id}) must match", "node.id")
        protocols = self.listener_security_protocols
        names = set()
        for endpoint in self.listeners:
            names.add(endpoint.name)
            if endpoint.name not in protocols:
                raise ConfigError(f"invalid value for 'listeners': listener name {endpoint.name} is not "
                                  "in 'listener.security.protocol.map'", "listeners")
        for endpoint in self.advertised_listeners:
            if endpoint.name not in names:
                raise ConfigError(f"invalid value for 'advertised.listeners': listener name "
                                  f"{endpoint.name} is not in 'listeners'", "advertised.listeners")
            if endpoint.host in ("0.0.0.0", "::"):
                raise ConfigError("invalid value for 'advertised.listeners': cannot advertise the "
                                  f"non-routable address {endpoint.host}", "advertised.listeners")
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("'group.min.session.timeout.ms' must not exceed "
                              "'group.max.session.timeout.ms'", "group.min.session.timeout.ms")
        if not self.log_dirs:
            raise ConfigError("invalid value for 'log.dirs': at least one directory is required", "log.dirs")


def load_config(path: str | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
    """Read a properties file (optional) then ``key=value`` overrides (later wins)."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # java.util.Properties' own encoding
        props.update(parse_properties(text))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid override {item!r}: expected key=value")
        props[key.strip()] = value
    return BrokerConfig(props)


# --- DescribeConfigs --------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry; the handler copies it into the response."""

    name: str
    value: str | None
    source: ConfigSource
    is_sensitive: bool
    read_only: bool
    config_type: ConfigType
    documentation: str | None
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def _broker_synonym_chain(broker: BrokerConfig, name: str) -> list[ConfigSynonym]:
    """Kafka's ConfigHelper.configSynonyms: every layer for every synonym, most specific layer
    first, then dropping entries before the first one for ``name`` itself (so describing
    log.retention.ms while only log.retention.hours is set reports DEFAULT_CONFIG, as Kafka does)."""
    names = broker_synonyms(name)
    chain = []
    for source, layer in broker._layers():
        for synonym in names:
            if synonym in layer:
                definition = BROKER_CONFIGS[synonym]
                value = None if definition.is_sensitive else definition.to_string(layer[synonym])
                chain.append(ConfigSynonym(synonym, value, source))
    while chain and chain[0].name != name:
        chain.pop(0)
    return chain


def describe_broker_configs(broker: BrokerConfig, names: Iterable[str] | None = None, *,
                            include_synonyms: bool = False,
                            include_documentation: bool = False) -> list[ConfigEntry]:
    """Entries for a BROKER resource naming this broker (all configs when ``names`` is None;
    unknown names are skipped, as Kafka does)."""
    wanted = list(BROKER_CONFIGS) if names is None else [n for n in names if n in BROKER_CONFIGS]
    entries = []
    for name in wanted:
        definition = BROKER_CONFIGS[name]
        chain = _broker_synonym_chain(broker, name)
        value = None if definition.is_sensitive else definition.to_string(broker.get(name))
        if name in ("node.id", "broker.id"):
            value = str(broker.node_id)  # both default to null in the table so either can win
        entries.append(ConfigEntry(
            name=name, value=value,
            source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
            is_sensitive=definition.is_sensitive, read_only=not definition.dynamic,
            config_type=definition.type,
            documentation=definition.doc if include_documentation else None,
            synonyms=chain if include_synonyms else []))
    return entries


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Check topic overrides (CreateTopics / AlterConfigs); returns the typed values. ConfigError
    names the offending key; the handler answers INVALID_CONFIG with its message."""
    parsed = {}
    for key, raw in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {key}", key)
        if raw is None:
            raise ConfigError(f"null value not supported for topic config '{key}'", key)
        parsed[key] = definition.parse(raw)
    low = parsed.get("min.compaction.lag.ms", 0)
    high = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if low > high:
        raise ConfigError(f"conflicting topic configs: min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})", "min.compaction.lag.ms")
    return parsed


class TopicConfig:
    """A topic's effective configuration: topic override -> broker synonyms -> Kafka default.

    ``tc.get("retention.ms")``, ``tc["segment.bytes"]`` or ``tc.retention_ms``; ``overrides`` holds
    the typed per-topic values, ``originals`` the strings to persist.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None,
                 broker: BrokerConfig | None = None) -> None:
        self.originals = dict(overrides or {})
        self.overrides = validate_topic_configs(self.originals)
        self.broker = broker if broker is not None else BrokerConfig()

    def get(self, name: str) -> Any:
        if name in self.overrides:
            return self.overrides[name]
        if name not in TOPIC_CONFIGS:
            raise KeyError(name)
        return self.broker.topic_default(name)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        if name in TOPIC_CONFIGS:
            return self.get(name)
        raise AttributeError(attr)

    def values(self) -> dict[str, Any]:
        return {name: self.get(name) for name in TOPIC_CONFIGS}

    @property
    def compacted(self) -> bool:
        return "compact" in self.get("cleanup.policy")

    def with_overrides(self, changes: Mapping[str, Any | None]) -> TopicConfig:
        """A new TopicConfig with ``changes`` applied (None deletes an override)."""
        merged = dict(self.originals)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return TopicConfig(merged, self.broker)

    def synonyms(self, name: str) -> list[ConfigSynonym]:
        """Kafka's synonym list for DescribeConfigs: the topic override, then the chain of the
        first broker synonym (e.g. retention.ms -> log.retention.ms/.minutes/.hours)."""
        definition = TOPIC_CONFIGS[name]
        chain: list[ConfigSynonym] = []
        if definition.synonyms:
            chain = _broker_synonym_chain(self.broker, definition.synonyms[0][0])
        if name in self.overrides:
            chain.insert(0, ConfigSynonym(name, self._string(name), ConfigSource.TOPIC_CONFIG))
        return chain

    def source(self, name: str) -> ConfigSource:
        chain = self.synonyms(name)
        return chain[0].source if chain else ConfigSource.DEFAULT_CONFIG

    def _string(self, name: str) -> str | None:
        definition = TOPIC_CONFIGS[name]
        return None if definition.is_sensitive else definition.to_string(self.get(name))

    def describe(self, names: Iterable[str] | None = None, *, include_synonyms: bool = False,
                 include_documentation: bool = False) -> list[ConfigEntry]:
        wanted = list(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
        entries = []
        for name in wanted:
            definition = TOPIC_CONFIGS[name]
            chain = self.synonyms(name)
            entries.append(ConfigEntry(
                name=name, value=self._string(name),
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                is_sensitive=definition.is_sensitive, read_only=False, config_type=definition.type,
                documentation=definition.doc if include_documentation else None,
                synonyms=chain if include_synonyms else []))
        return entries
