"""The broker table: every ``server.properties`` key kbroker knows, with Kafka 4's names, types,
defaults, validators and dynamic update modes (``DynamicBrokerConfig.AllDynamicConfigs``).

Deliberate differences from Kafka, for a single-node dev/CI broker:

* ``node.id`` / ``broker.id`` default to 1 (Kafka: ``node.id`` is required and ``broker.id=-1``
  means "generate one"; we never generate ids, so -1 also means 1).
* ``listeners`` defaults to ``PLAINTEXT://localhost:9092`` and ``log.dir`` to ``./kbroker-data``.
* ``offsets.topic.replication.factor``, ``transaction.state.log.replication.factor`` /
  ``.min.isr`` and ``share.coordinator.state.topic.replication.factor`` / ``.min.isr`` default
  to 1, so a single node works out of the box.
* ``log.segment.bytes`` keeps Kafka 3.x's lower bound of 14 bytes (Kafka 4 raised it to 1 MiB,
  KIP-1030) so tests can roll segments cheaply.
* ``cluster.id`` is our extension (Kafka keeps it in ``meta.properties``).

A key whose value asks for a feature kbroker lacks (Java plugin classes, tiered storage, ...)
is refused at start-up and by AlterConfigs with a message naming it. A key marked ``no_effect``
is accepted without effect, only where Kafka itself shows none we could emulate; the reason is in
its DescribeConfigs documentation.
"""

from __future__ import annotations

from typing import Any, Callable

from kbroker.config.types import (HostCounts, CLUSTER_WIDE, INT_MAX, LONG_MAX, PER_BROKER, ConfigDef,
                                  ConfigType, GzipLevel, Importance, ListOf, OneOf, Range,
                                  not_implemented_if_set, only)

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


CW, PB = CLUSTER_WIDE, PER_BROKER
THREADS = "kbroker serves every request on one asyncio event loop; it has no thread pool to size"
NO_REPLICATION = "a single node has no followers, so there is no replication to tune"
NO_TIERED = "kbroker has no tiered storage (remote.storage.enable is refused)"
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "kafka.security.authorizer.AclAuthorizer")


def _authorizer(value: Any) -> str | None:
    """Kafka's ACL authorizer (either name) is what kbroker implements; other classes are plugins."""
    if value in (None, "") or value in AUTHORIZERS:
        return None
    return f"only {' or '.join(AUTHORIZERS)} (kbroker's ACL authorizer) is supported; " \
           f"loading Java plugin classes is not implemented by kbroker yet"


PLUGINS = not_implemented_if_set("loading Java plugin classes")


class _RebalanceProtocols(ListOf):
    def __init__(self) -> None:
        super().__init__("classic", "consumer", "share", "streams")

    def __call__(self, value: list[str]) -> None:
        super().__call__(value)
        if "classic" not in value:  # Kafka's KafkaConfig refuses it alike
            raise ValueError("Disabling the 'classic' protocol is not supported.")
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(value: Any) -> str | None:
    """KIP-392: Kafka's rack-aware selector is built in; other selectors are Java plugins."""
    if value in (None, "", RACK_AWARE_SELECTOR):
        return None
    return f"only {RACK_AWARE_SELECTOR} is supported; loading Java plugin classes is not " \
           f"implemented by kbroker yet"
class _RegistryListeners:
    """Each schema registry listener is http:// or https:// with host:port."""

    def __call__(self, value: list[str]) -> None:
        from urllib.parse import urlsplit
        for url in value:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or parts.port is None:
                raise ValueError(f"{url}: expected http://host:port or https://host:port")

    def __str__(self) -> str:
        return "[http://host:port, https://host:port, ...]"


def _sasl_mechanisms(value: Any) -> str | None:
    served = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    missing = [m for m in value if m.upper() not in served]
    if not missing:
        return None
    return (f"the SASL mechanism{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(kbroker serves {', '.join(served)}) is not implemented by kbroker yet")


# A broker logs in from its keytab: MIT Kerberos reads the keytab whenever it needs a ticket,
# so there is no login thread, kinit or renewal to tune (Kafka's KerberosLogin).
KEYTAB_LOGIN = ("kbroker's Kerberos credentials come from the keytab, which MIT Kerberos reads "
                "whenever a ticket is needed: there is no login thread, kinit or ticket renewal")


class KerberosRules:
    """Each rule of sasl.kerberos.principal.to.local.rules parses (Kafka's KerberosShortNamer)."""

    def __call__(self, value: list[str]) -> None:
        from kbroker.config.kerberos_rules import check_rules
        check_rules(value)

    def __str__(self) -> str:
        return "[DEFAULT, RULE:[n:format](match)s/from/to/[g][/L|/U], ...]"


JWT_VALIDATORS = ("org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
                  "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator")


def _jwt_validator(value: Any) -> str | None:
    if value in JWT_VALIDATORS:
        return None
    return f"only {' or '.join(JWT_VALIDATORS)} is supported; loading Java plugin classes is " \
           f"not implemented by kbroker yet"


# What a broker's inter-broker client speaks (kbroker.security.inter_broker).
INTER_BROKER_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _inter_broker_mechanism(value: Any) -> str | None:
    if str(value).upper() in INTER_BROKER_MECHANISMS:
        return None
    return (f"the inter-broker SASL mechanism {value} is not implemented by kbroker yet (brokers "
            f"authenticate to each other with {', '.join(INTER_BROKER_MECHANISMS)})")


_SECURITY_AT_RUN_TIME = ("changing a listener's security settings at run time is not implemented yet; "
                        "restart the broker with the new settings")
KRAFT = "kbroker has no KRaft controller; it is always a broker"


def _ignored(name: str, type_: ConfigType, default: Any, doc: str,
             validator: Callable[[Any], None] | None = None, *, why: str = THREADS,
             **kw: Any) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, LOW, validator, no_effect=why, **kw)


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
       "a free one.", HIGH, update_mode=PB,
       update_refused="adding or removing listeners at run time is not implemented yet; restart "
                      "the broker with the new listeners"),
    _d("advertised.listeners", LS, None,
       "Listeners published to clients; defaults to listeners with localhost, empty and 0.0.0.0 hosts "
       "replaced by 127.0.0.1.", HIGH),
    _d("listener.security.protocol.map", S,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
       "Maps listener names to security protocols: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.", LOW, update_mode=PB,
       update_refused="changing listeners at run time is not implemented yet; restart the broker"),
    _d("inter.broker.listener.name", S, None, "The listener brokers use to talk to each other."),
    _d("security.inter.broker.protocol", S, "PLAINTEXT",
       "Security protocol between brokers, Kafka's alternative to inter.broker.listener.name: the "
       "listener named after it (which must exist) is the inter-broker listener. Setting both is "
       "an error, as in Kafka.", MEDIUM, OneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    # ZooKeeper (cluster mode: kbroker.metadata.cluster)
    _d("zookeeper.connect", S, None,
       "host:port[,host:port][/chroot] of ZooKeeper; unset means the embedded single-node store.", HIGH),
    _d("zookeeper.session.timeout.ms", I, 18000, "ZooKeeper session timeout.", HIGH, _AT1),
    _d("zookeeper.connection.timeout.ms", I, None,
       "Max wait to connect to ZooKeeper; defaults to zookeeper.session.timeout.ms.", HIGH),
    _d("controlled.shutdown.enable", B, True,
       "On stop, move leadership to other brokers before closing (cluster mode).", MEDIUM),
    _d("controlled.shutdown.max.retries", I, 3,
       "Rounds of waiting for leadership to move away on a controlled shutdown.", MEDIUM, _AT0),
    _d("controlled.shutdown.retry.backoff.ms", L, 5000,
       "How long one round of a controlled shutdown waits.", MEDIUM, _AT0),
    # requests and sockets
    _d("message.max.bytes", I, 1048588,
       "Largest record batch the broker accepts (after compression).", HIGH, _AT0, update_mode=CW),
    _d("socket.request.max.bytes", I, 104857600, "Largest request the broker reads.", HIGH, _AT1),
    _d("fetch.max.bytes", I, 57671680, "Most bytes returned by one fetch request.", MEDIUM, Range(1024)),
    _d("connections.max.idle.ms", L, 600000, "Idle connections are closed after this long."),
    _d("log.open.files.max", I, 4096, "Most segment and index files kept open at once (kbroker; "
       "opened on demand, least recently used closed first; capped at half the open files limit).",
       MEDIUM, Range(16)),
    _d("max.connections", I, INT_MAX, "Most connections the broker accepts.", MEDIUM, _AT0, update_mode=CW),
    _d("max.connections.per.ip", I, INT_MAX, "Most connections accepted from one address.", MEDIUM,
       _AT0, update_mode=CW),
    _d("max.connections.per.ip.overrides", S, "",
       "Per-address overrides of max.connections.per.ip: host:count,...", MEDIUM, HostCounts(),
       update_mode=CW),
    _d("max.connection.creation.rate", I, INT_MAX, "Most new connections per second.", MEDIUM, _AT0,
       update_mode=CW),
    _d("request.timeout.ms", I, 30000, "Timeout for requests the broker itself sends.", HIGH),
    # client quotas (kbroker.server.quotas): rates are measured over quota.window.num windows
    _d("quota.window.num", I, 11, "Number of samples kept for client quota rates.", LOW, _AT1),
    _d("quota.window.size.seconds", I, 1, "Time span of each client quota sample.", LOW, _AT1),
    _d("client.quota.callback.class", C, None, "A ClientQuotaCallback plugin deciding quotas.",
       LOW, unsupported=PLUGINS),
    _d("max.incremental.fetch.session.cache.slots", I, 1000,
       "Most incremental fetch sessions kept (replica fetches; 0: none, every fetch is full).",
       MEDIUM, _AT0),
    _d("delete.records.purgatory.purge.interval.requests", I, 1,
       "Purge interval of the DeleteRecords purgatory.", LOW),
    _ignored("num.network.threads", I, 3, "Network threads.", _AT1, update_mode=CW),
    _ignored("num.io.threads", I, 8, "Request handler threads.", _AT1, update_mode=CW),
    _ignored("background.threads", I, 10, "Background task threads.", _AT1, update_mode=CW),
    _ignored("num.recovery.threads.per.data.dir", I, 2, "Log recovery threads per data dir.", _AT1,
             update_mode=CW),
    _d("num.replica.fetchers", I, 1, "Replica fetcher tasks per leader broker (a cluster's "
       "followers).", MEDIUM, _AT1, update_mode=CW,
       update_refused="changing the number of replica fetchers at run time is not implemented "
                      "yet; restart the broker with the new value"),
    _d("queued.max.requests", I, 500,
       "Requests in flight across all connections before the broker stops reading.", MEDIUM, _AT1),
    _d("queued.max.request.bytes", L, -1,
       "Request bytes in flight across all connections before the broker stops reading; -1: "
       "no limit.", MEDIUM),
    _ignored("socket.send.buffer.bytes", I, 102400, "SO_SNDBUF of server sockets.", None,
             why="the operating system's default socket buffers are used"),
    _ignored("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of server sockets.", None,
             why="the operating system's default socket buffers are used"),
    _ignored("socket.listen.backlog.size", I, 50, "Listen backlog of server sockets.", _AT1,
             why="asyncio's listen backlog is used"),
    _ignored("process.roles", LS, ["broker"], "KRaft roles; kbroker is always a broker.", None,
             why=KRAFT),
    _ignored("controller.listener.names", LS, [], "KRaft controller listeners.", None, why=KRAFT),
    _ignored("controller.quorum.voters", LS, [], "KRaft controller quorum.", None, why=KRAFT),
    _ignored("controller.quorum.bootstrap.servers", LS, [], "KRaft controller bootstrap.", None,
             why=KRAFT),
    _ignored("metadata.log.dir", S, None, "KRaft metadata log dir.", None,
             why="kbroker keeps its metadata in the first of log.dirs"),
    _ignored("log.cleaner.threads", I, 1, "Log cleaner threads.", _AT0, update_mode=CW),
    _ignored("log.cleaner.dedupe.buffer.size", L, 134217728, "Log cleaner dedupe buffer size.", None,
             why="the cleaner's offset map is a Python dict, not a fixed buffer", update_mode=CW),
    _ignored("log.cleaner.dedupe.buffer.load.factor", D, 0.9, "Load factor of the dedupe buffer.",
             None, why="the cleaner's offset map is a Python dict, not a fixed buffer",
             update_mode=CW),
    _ignored("log.cleaner.io.buffer.size", I, 524288, "Log cleaner I/O buffer size.", _AT0,
             why="the cleaner reads whole segments through the page cache", update_mode=CW),
    _ignored("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308,
             "Throttle of the cleaner's I/O.", None,
             why="the cleaner is not throttled yet", update_mode=CW),
    _ignored("group.coordinator.threads", I, 4, "Group coordinator threads.", _AT1),
    _d("group.coordinator.rebalance.protocols", LS, ["classic", "consumer", "streams"],
       "The enabled rebalance protocols: classic, consumer (KIP-848, also needs group.version "
       ">= 1) and streams (KIP-1071, also needs streams.version >= 1); without one, its APIs "
       "answer UNSUPPORTED_VERSION, as Kafka's. classic cannot be disabled. share is accepted "
       "as Kafka accepts it; share groups follow share.version.", MEDIUM, _RebalanceProtocols()),
    _ignored("group.coordinator.cached.buffer.max.bytes", I, 1048588,
             "Largest write buffer the group coordinator keeps for reuse.", _AT0,
             why="kbroker does not pool write buffers", update_mode=CW),
    _ignored("share.coordinator.cached.buffer.max.bytes", I, 1048588,
             "Largest write buffer the share coordinator keeps for reuse.", Range(512 * 1024),
             why="kbroker does not pool write buffers", update_mode=CW),
    _ignored("share.coordinator.threads", I, 1, "Share coordinator threads.", _AT1),
    _d("metric.reporters", LS, [], "MetricsReporter classes.", LOW, update_mode=CW,
       unsupported=PLUGINS),
    _d("config.providers", LS, [], "ConfigProvider classes for variable substitution.", LOW,
       update_mode=CW, unsupported=PLUGINS),
    # topics and logs
    _d("max.request.partition.size.limit", I, 2000, "The most partitions one "
       "DescribeTopicPartitions answer carries (the request's limit is capped to it).", LOW,
       _AT1),
    _d("auto.create.topics.enable", B, True, "Create unknown topics on metadata and produce requests.",
       HIGH),
    _d("delete.topic.enable", B, True, "Allow DeleteTopics.", HIGH),
    _d("num.partitions", I, 1, "Default partition count of new topics.", MEDIUM, _AT1),
    _d("default.replication.factor", I, 1, "Default replication factor of new topics.", MEDIUM, _AT1),
    _d("min.insync.replicas", I, 1, "Minimum in-sync replicas for acks=all writes.", HIGH, _AT1,
       update_mode=CW),
    _d("unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader.", HIGH,
       update_mode=CW),
    _d("compression.type", S, "producer", "Default final compression of topics' data: producer "
       "keeps the producer's codec; another type recompresses each batch whose codec differs.",
       HIGH, OneOf(*COMPRESSION_TYPES), update_mode=CW),
    _d("compression.gzip.level", I, -1, "Default gzip level of topics that recompress to gzip "
       "(-1: Deflater's default, 6).", MEDIUM, GzipLevel(), update_mode=CW),
    _d("compression.lz4.level", I, 9, "Default lz4 level of topics that recompress to lz4 (9: "
       "lz4's fast compressor, as Kafka; other levels its high-compression one).", MEDIUM,
       Range(1, 17), update_mode=CW),
    _d("compression.zstd.level", I, 3, "Default zstd level of topics that recompress to zstd.",
       MEDIUM, Range(-131072, 22), update_mode=CW),
    _d("log.dir", LS, ["./kbroker-data"], "Data directory, used when log.dirs is unset.", HIGH),
    _d("log.dirs", LS, None, "Comma-separated data directories; overrides log.dir.", HIGH),
    _d("log.segment.bytes", I, 1073741824, "Maximum size of one log segment file.", HIGH, Range(14),
       update_mode=CW),
    _d("log.roll.ms", L, None, "Roll a segment after this long; overrides log.roll.hours.", HIGH,
       update_mode=CW),
    _d("log.roll.hours", I, 168, "Roll a segment after this many hours.", HIGH, _AT1),
    _d("log.roll.jitter.ms", L, None, "Maximum jitter subtracted from the roll time.", HIGH, update_mode=CW),
    _d("log.roll.jitter.hours", I, 0, "Maximum roll jitter in hours.", HIGH, _AT0),
    _d("log.index.interval.bytes", I, 4096, "Bytes between offset index entries.", MEDIUM, _AT0,
       update_mode=CW),
    _d("log.index.size.max.bytes", I, 10485760, "Maximum size of an offset or time index.", MEDIUM,
       Range(4), update_mode=CW),
    _d("log.retention.ms", L, None, "Retention time; -1 keeps forever. Beats .minutes and .hours.",
       HIGH, update_mode=CW),
    _d("log.retention.minutes", I, None, "Retention time in minutes; beats log.retention.hours.", HIGH),
    _d("log.retention.hours", I, 168, "Retention time in hours.", HIGH),
    _d("log.retention.bytes", L, -1, "Maximum partition size before old segments go; -1 is unlimited.",
       HIGH, update_mode=CW),
    _d("log.retention.check.interval.ms", L, 300000, "How often retention runs.", MEDIUM, _AT1),
    _d("log.segment.delete.delay.ms", L, 60000, "Delay before a deleted segment's files are removed.",
       HIGH, _AT0, update_mode=CW),
    _d("log.flush.interval.messages", L, LONG_MAX, "fsync after this many messages.", HIGH, _AT1,
       update_mode=CW),
    _d("log.flush.interval.ms", L, None,
       "fsync after this long; defaults to log.flush.scheduler.interval.ms.", HIGH, update_mode=CW),
    _d("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the flusher checks logs.", HIGH),
    _d("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often recovery points are written.",
       HIGH, _AT0),
    _d("log.flush.start.offset.checkpoint.interval.ms", I, 60000,
       "How often log start offsets are written.", HIGH, _AT0),
    _d("log.preallocate", B, False, "Default of topics' preallocate: create segment files at "
       "segment.bytes.", MEDIUM, update_mode=CW),
    _d("log.message.timestamp.type", S, "CreateTime", "Timestamp stored in records.", MEDIUM,
       OneOf(*TIMESTAMP_TYPES), update_mode=CW),
    _d("log.message.timestamp.before.max.ms", L, LONG_MAX,
       "How far a record timestamp may lag the broker clock.", MEDIUM, _AT0, update_mode=CW),
    _d("log.message.timestamp.after.max.ms", L, 3600000,
       "How far a record timestamp may lead the broker clock.", MEDIUM, _AT0, update_mode=CW),
    _d("log.cleanup.policy", LS, ["delete"], "delete and/or compact.", MEDIUM,
       ListOf("compact", "delete"), update_mode=CW),
    _d("log.cleaner.enable", B, True, "Run the log cleaner (compaction).", MEDIUM),
    _d("log.cleaner.backoff.ms", L, 15000, "Cleaner sleep when nothing is cleanable.", MEDIUM, _AT0,
       update_mode=CW),
    _d("log.cleaner.min.cleanable.ratio", D, 0.5, "Dirty ratio that makes a log cleanable.", MEDIUM,
       Range(0, 1), update_mode=CW),
    _d("log.cleaner.delete.retention.ms", L, 86400000, "How long tombstones are kept.", MEDIUM, _AT0,
       update_mode=CW),
    _d("log.cleaner.min.compaction.lag.ms", L, 0, "Minimum age before a record can be compacted.",
       MEDIUM, _AT0, update_mode=CW),
    _d("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Maximum age before a record is compacted.",
       MEDIUM, _AT1, update_mode=CW),
    _d("log.local.retention.ms", L, -2, "Tiered storage local retention.", MEDIUM, Range(-2),
       update_mode=CW, no_effect=NO_TIERED),
    _d("log.local.retention.bytes", L, -2, "Tiered storage local retention bytes.", MEDIUM, Range(-2),
       update_mode=CW, no_effect=NO_TIERED),
    # tiered storage (KIP-405): not implemented; the dynamic keys are accepted without effect
    _d("remote.log.storage.system.enable", B, False, "Enable tiered storage.", MEDIUM,
       unsupported=only(False, "tiered storage")),
    *(_ignored(name, type_, default, "Tiered storage: " + doc, _AT1, why=NO_TIERED, update_mode=CW)
      for name, type_, default, doc in (
          ("remote.log.index.file.cache.total.size.bytes", L, 1073741824, "remote index cache size."),
          ("remote.fetch.max.wait.ms", I, 500, "remote fetch max wait."),
          ("remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, "upload quota."),
          ("remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, "download quota."),
          ("remote.list.offsets.request.timeout.ms", L, 30000, "remote ListOffsets timeout."),
          ("remote.log.manager.copier.thread.pool.size", I, 10, "copier threads."),
          ("remote.log.manager.expiration.thread.pool.size", I, 10, "expiration threads."),
          ("remote.log.manager.follower.thread.pool.size", I, 2, "follower threads."),
          ("remote.log.reader.threads", I, 10, "reader threads."))),
    _ignored("follower.fetch.last.tiered.offset.enable", B, False,
             "Followers fetch from the last tiered offset.", why=NO_TIERED, update_mode=CW),
    # replication
    _d("replica.lag.time.max.ms", L, 30000, "A follower this far behind drops out of the ISR.", HIGH),
    _d("replica.fetch.max.bytes", I, 1048576, "Bytes per partition a follower fetches.", MEDIUM, _AT0),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX,
       "Bytes per second that moves between log dirs (AlterReplicaLogDirs) may copy, all moves "
       "of the broker together (kafka-reassign-partitions.sh --replica-alter-log-dirs-throttle "
       "sets it; 0 pauses them).", MEDIUM, _AT0, update_mode=CW),
    _ignored("num.replica.alter.log.dirs.threads", I, None,
             "Threads copying replicas between log dirs (default: one per log dir).", _AT1),
    _d("replica.fetch.response.max.bytes", I, 10485760, "Bytes per follower fetch response.", MEDIUM,
       _AT0),
    _d("replica.fetch.wait.max.ms", I, 500, "Follower fetch max wait.", HIGH),
    _d("replica.fetch.min.bytes", I, 1, "Follower fetch min bytes.", HIGH),
    _d("replica.fetch.backoff.ms", I, 1000, "Follower back-off after a fetch error.", MEDIUM, _AT0),
    _d("replica.socket.timeout.ms", I, 30000, "Follower socket timeout.", HIGH),
    _d("replica.selector.class", S, None, "Lets consumers fetch from a follower in their rack "
       "(KIP-392); only Kafka's RackAwareReplicaSelector is implemented.", MEDIUM,
       unsupported=_replica_selector),
    _d("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often high watermarks are saved.",
       HIGH),
    _d("auto.leader.rebalance.enable", B, True, "Move leadership back to preferred replicas.", HIGH),
    _d("leader.imbalance.check.interval.seconds", L, 300, "Preferred-leader check interval.", HIGH, _AT1),
    _d("leader.imbalance.per.broker.percentage", I, 10,
       "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.", HIGH, _AT0),
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
    _d("group.consumer.assignors", LS, ["uniform", "range"],
       "Server-side assignors of consumer groups, the default first: kbroker has uniform and "
       "range.", MEDIUM, ListOf("uniform", "range")),
    _d("group.consumer.assignment.interval.ms", I, 1000,
       "Least time between two target assignments of a consumer group (KIP-1263).", MEDIUM, _AT0),
    _d("group.consumer.min.assignment.interval.ms", I, 0,
       "Smallest consumer.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _d("group.consumer.max.assignment.interval.ms", I, 15000,
       "Largest consumer.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _ignored("group.consumer.assignor.offload.enable", B, True,
             "Run consumer group assignors off the coordinator thread.", None,
             why="Kafka 4.4.0 defines it but its consumer groups do not read it either: the "
                 "assignor runs inside the heartbeat, as kbroker's does"),
    _d("group.consumer.regex.refresh.interval.ms", I, 600000,
       "Longest time before a consumer group's regex subscriptions are resolved again.", MEDIUM,
       Range(10000)),
    _d("group.consumer.migration.policy", S, "bidirectional",
       "Online migration between classic and consumer groups: bidirectional, upgrade, downgrade "
       "or disabled.", MEDIUM, OneOf("bidirectional", "upgrade", "downgrade", "disabled",
                                     case_sensitive=False)),
    # share groups (KIP-932): the data path's settings
    _d("group.share.record.lock.duration.ms", I, 30000,
       "How long a share consumer holds the records it acquired before they go back.", MEDIUM,
       Range(1000, 3600000)),
    _d("group.share.delivery.count.limit", I, 5,
       "Deliveries of a record to share consumers before it is archived.", MEDIUM,
       Range(2, 10)),
    _d("group.share.partition.max.record.locks", I, 2000,
       "Most records of one share partition in flight at once.", MEDIUM, Range(100, 10000)),
    _d("group.share.max.share.sessions", I, 2000, "Most share sessions a broker keeps.", MEDIUM,
       _AT1),
    # share-group dead-letter queues (KIP-1191), read at each DLQ write
    _d("errors.deadletterqueue.auto.create.topics.enable", B, False,
       "Whether automatic creation of DLQ topics is enabled (KIP-1191). When a share group has a "
       "DLQ topic configured, this setting controls whether the broker will automatically create "
       "the topic if it does not exist.", MEDIUM, update_mode=CW),
    _d("errors.deadletterqueue.topic.name.prefix", S, "dlq.",
       "The required prefix of topic names used by dead-letter queue topics for share groups. "
       "When set to \"\", there is no restriction on the names used for dead-letter queue "
       "topics.", MEDIUM, update_mode=CW),
    # streams groups (KIP-1071)
    _d("group.streams.session.timeout.ms", I, 45000, "Session timeout of streams-protocol members.",
       MEDIUM, _AT1),
    _d("group.streams.min.session.timeout.ms", I, 45000,
       "Smallest streams.session.timeout.ms a group config may set.", MEDIUM, _AT1),
    _d("group.streams.max.session.timeout.ms", I, 60000,
       "Largest streams.session.timeout.ms a group config may set.", MEDIUM, _AT1),
    _d("group.streams.heartbeat.interval.ms", I, 5000,
       "Heartbeat interval of streams-protocol members.", MEDIUM, _AT1),
    _d("group.streams.min.heartbeat.interval.ms", I, 5000,
       "Smallest streams.heartbeat.interval.ms a group config may set.", MEDIUM, _AT1),
    _d("group.streams.max.heartbeat.interval.ms", I, 15000,
       "Largest streams.heartbeat.interval.ms a group config may set.", MEDIUM, _AT1),
    _d("group.streams.max.size", I, INT_MAX, "Most members of one streams group.", MEDIUM, _AT1),
    _d("group.streams.num.standby.replicas", I, 0, "Standby replicas of each stateful task.",
       MEDIUM, _AT0),
    _d("group.streams.max.standby.replicas", I, 2,
       "Largest streams.num.standby.replicas a group config may set.", MEDIUM, _AT0),
    _d("group.streams.initial.rebalance.delay.ms", I, 3000,
       "How long a new streams group waits for more members before its first assignment.",
       MEDIUM, _AT0),
    _d("group.streams.assignment.interval.ms", I, 1000,
       "Least time between two target assignments of a streams group (KIP-1263).", MEDIUM, _AT0),
    _d("group.streams.min.assignment.interval.ms", I, 0,
       "Smallest streams.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _d("group.streams.max.assignment.interval.ms", I, 15000,
       "Largest streams.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _d("group.streams.assignors", LS, ["sticky"],
       "Task assignors of streams groups, the default first: Kafka's built-in sticky assignor.",
       MEDIUM, ListOf("sticky")),
    _d("group.streams.rack.aware.assignment.tags", LS, [],
       "Client tag keys the members of streams groups must send (MISSING_CLIENT_TAGS "
       "otherwise); a change starts a new assignment.", LOW),
    _ignored("group.streams.assignor.offload.enable", B, True,
             "Run streams group assignors off the coordinator thread.", None,
             why="Kafka 4.4.0 defines it but its streams groups do not read it either: the "
                 "assignor runs inside the heartbeat, as kbroker's does"),
    _d("group.streams.task.offset.interval.ms", I, 60000,
       "How often members send their tasks' changelog offsets (handed out in the heartbeat).",
       MEDIUM, _AT1),
    _d("group.streams.min.task.offset.interval.ms", I, 15000,
       "Smallest streams.task.offset.interval.ms a group config may set.", MEDIUM, _AT1),
    _ignored("group.streams.num.warmup.replicas", I, 2, "Most warm-up replicas of a task.", _AT0,
             why="Kafka 4.4.0's assignment refiner, which would hand out warm-up tasks, returns "
                 "the target assignment unchanged; kbroker's does the same"),
    _d("group.streams.max.warmup.replicas", I, 20,
       "Largest streams.num.warmup.replicas a group config may set.", MEDIUM, _AT0),
    _d("group.streams.topology.description.plugin.class", C, None,
       "StreamsGroupTopologyDescriptionPlugin class (KIP-1331); unset: the feature is off.",
       MEDIUM, unsupported=PLUGINS),
    _d("group.streams.acceptable.recovery.lag", L, 10000,
       "Largest changelog lag of a caught-up member (handed out in the heartbeat).", MEDIUM,
       _AT0),
    # share groups (KIP-932): the group coordinator's side
    _d("group.share.session.timeout.ms", I, 45000, "Session timeout of share-group members.",
       MEDIUM, _AT1),
    _d("group.share.min.session.timeout.ms", I, 45000,
       "Smallest share.session.timeout.ms a group config may set.", MEDIUM, _AT1),
    _d("group.share.max.session.timeout.ms", I, 60000,
       "Largest share.session.timeout.ms a group config may set.", MEDIUM, _AT1),
    _d("group.share.heartbeat.interval.ms", I, 5000,
       "Heartbeat interval of share-group members.", MEDIUM, _AT1),
    _d("group.share.min.heartbeat.interval.ms", I, 5000,
       "Smallest share.heartbeat.interval.ms a group config may set.", MEDIUM, _AT1),
    _d("group.share.max.heartbeat.interval.ms", I, 15000,
       "Largest share.heartbeat.interval.ms a group config may set.", MEDIUM, _AT1),
    _d("group.share.max.size", I, 200, "Most members of one share group.", MEDIUM, Range(1, 1000)),
    _d("group.share.assignors", LS, ["simple"],
       "Partition assignors of share groups: Kafka's built-in simple assignor.", MEDIUM,
       ListOf("simple")),
    _d("group.share.assignment.interval.ms", I, 1000,
       "Least time between two target assignments of a share group (KIP-1263).", MEDIUM, _AT0),
    _d("group.share.min.assignment.interval.ms", I, 0,
       "Smallest share.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _d("group.share.max.assignment.interval.ms", I, 15000,
       "Largest share.assignment.interval.ms a group config may set.", MEDIUM, _AT0),
    _ignored("group.share.assignor.offload.enable", B, True,
             "Run share group assignors off the coordinator thread.", None,
             why="the assignor runs inside the heartbeat, as Kafka 4.4.0's share groups do"),
    # share groups: the bounds of the share.* group configs the share partitions read
    _d("group.share.min.record.lock.duration.ms", I, 15000,
       "Smallest share.record.lock.duration.ms a group config may set.", MEDIUM,
       Range(1000, 30000)),
    _d("group.share.max.record.lock.duration.ms", I, 60000,
       "Largest share.record.lock.duration.ms a group config may set.", MEDIUM,
       Range(30000, 3600000)),
    _d("group.share.min.delivery.count.limit", I, 2,
       "Smallest share.delivery.count.limit a group config may set.", MEDIUM, Range(2, 5)),
    _d("group.share.max.delivery.count.limit", I, 10,
       "Largest share.delivery.count.limit a group config may set.", MEDIUM, Range(5, 25)),
    _d("group.share.min.partition.max.record.locks", I, 100,
       "Smallest share.partition.max.record.locks a group config may set.", MEDIUM,
       Range(100, 2000)),
    _d("group.share.max.partition.max.record.locks", I, 4000,
       "Largest share.partition.max.record.locks a group config may set.", MEDIUM,
       Range(2000, 10000)),
    _d("group.share.initialize.retry.interval.ms", I, 30000,
       "How long a share partition's state initialization may stay pending before the group "
       "coordinator asks the persister again.", MEDIUM, _AT1),
    # share coordinator (KIP-932): __share_group_state
    _d("share.coordinator.state.topic.num.partitions", I, 50,
       "Partitions of __share_group_state (should not change after deployment).", HIGH, _AT1),
    _d("share.coordinator.state.topic.replication.factor", SH, 1,
       "Replication factor of __share_group_state.", HIGH, _AT1),
    _d("share.coordinator.state.topic.min.isr", SH, 1, "min.insync.replicas of __share_group_state.",
       HIGH, _AT1),
    _d("share.coordinator.state.topic.segment.bytes", I, 104857600,
       "Segment size of __share_group_state.", HIGH, _AT1),
    _d("share.coordinator.snapshot.update.records.per.snapshot", I, 500,
       "ShareUpdate records written for a share partition between two ShareSnapshot records.",
       MEDIUM, Range(0, 500)),
    _d("share.coordinator.state.topic.compression.codec", I, 0,
       "Compression codec id of __share_group_state writes.", HIGH,
       unsupported=only(0, "compressed share coordinator writes")),
    _d("share.coordinator.write.timeout.ms", I, 5000,
       "How long a share coordinator write waits for the replicas.", HIGH, _AT1,
       unsupported=only(5000, "a share coordinator write timeout other than the default")),
    _d("share.coordinator.append.linger.ms", I, -1,
       "How long share coordinator writes wait to be batched (-1: adaptive).", MEDIUM, Range(-1),
       unsupported=only(-1, "lingering share coordinator writes")),
    _d("share.coordinator.load.buffer.size", I, 5242880,
       "Read size when loading share partition states.", HIGH, _AT1,
       unsupported=only(5242880, "a share coordinator load buffer size other than the default")),
    _d("share.coordinator.state.topic.prune.interval.ms", I, 300000,
       "How often the share coordinator deletes the __share_group_state records below every "
       "share partition's latest snapshot (internal).", LOW, _AT1),
    _d("share.coordinator.cold.partition.snapshot.interval.ms", I, 300000,
       "How long a share partition stays without a snapshot before it gets a fresh one, so that "
       "it does not hold back pruning (internal).", LOW, _AT1),
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
       "Verify a partition is in the transaction before a transactional append.", LOW, update_mode=CW),
    _d("producer.id.expiration.ms", I, 86400000, "Idle producer ids expire after this.", LOW, _AT1,
       update_mode=CW, log_field="producer_id_expiration_ms"),
    _d("producer.id.expiration.check.interval.ms", I, 600000, "How often producer ids expire.", LOW, _AT1),
    # client telemetry (KIP-714; kbroker.telemetry, docs/observability.md)
    _d("telemetry.max.bytes", I, 1048576, "The maximum size (after compression if compression is "
       "used) of telemetry metrics pushed from a client to the broker.", MEDIUM, _AT1),
    _d("kbroker.telemetry.max.series", I, 20000, "kbroker extension: most client metric series "
       "(metric name and attributes, per client instance) kept for the console and /metrics; a "
       "push's series past the limit are dropped and counted, so clients cannot grow the "
       "exporter without bound.", LOW, _AT0),
    _d("kbroker.telemetry.max.series.per.client", I, 2000, "kbroker extension: most metric "
       "series kept for one client instance.", LOW, _AT0),
    # the state-change log (kbroker.metadata.state_change; Kafka's is log4j's state-change.log)
    _d("kbroker.state.change.log.file", S, None, "kbroker extension: a file of its own for the "
       "state-change log (every leadership, ISR and replica change, never rate-limited), "
       "rotated by size. Unset: those lines go to the broker's log.", LOW),
    _d("kbroker.state.change.log.max.bytes", L, 104857600, "kbroker extension: size at which the "
       "state-change log file is rotated.", LOW, Range(1024)),
    _d("kbroker.state.change.log.backups", I, 10, "kbroker extension: rotated state-change log "
       "files kept.", LOW, _AT0),
    # dev/CI tooling (kbroker extensions; docs/observability.md)
    _d("dev.mode", B, False, "kbroker extension: a development broker. Enables fault injection "
       "(kbroker.fault.<name>) and the HTTP port by default.", LOW),
    _d("http.port", I, None, "kbroker extension: port of the HTTP server (/healthz, /readyz, "
       "/metrics, the web console); 0 picks a free one. Unset means off, or a free port in dev "
       "mode.", LOW, Range(0, 65535)),
    _d("http.host", S, None, "kbroker extension: address the HTTP server binds; defaults to the "
       "first listener's host.", LOW),
    # the schema registry (kbroker.schema_registry, docs/schema-registry.md)
    _d("schema.registry.listeners", LS, [], "kbroker extension: http:// or https:// URLs "
       "(host:port) the schema registry's REST API (Confluent's) listens on; port 0 picks a free "
       "one. Empty means off, except in dev mode, which serves it on http://<http host>:8081, or "
       "a free port when 8081 is taken.", LOW, _RegistryListeners()),
    _d("schema.registry.topic", S, "_schemas", "kbroker extension: the compacted topic the "
       "schema registry stores schemas, configs and modes in (Confluent's kafkastore.topic and "
       "record format).", LOW),
    _d("schema.registry.topic.replication.factor", SH, 1, "kbroker extension: replication "
       "factor of the schema registry's topic when it is created (Confluent's "
       "kafkastore.topic.replication.factor; 3 in a cluster).", LOW, _AT1),
    _d("schema.registry.compatibility.level", S, "BACKWARD", "kbroker extension: the "
       "compatibility level of subjects without one, until PUT /config sets a global one "
       "(Confluent's schema.compatibility.level).", LOW,
       OneOf("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
             "FULL_TRANSITIVE")),
    _d("schema.registry.max.request.bytes", I, 8388608, "kbroker extension: largest request body "
       "the schema registry reads; a larger one is answered 413.", LOW, _AT1),
    _d("schema.registry.forward.timeout.ms", I, 30000, "kbroker extension: how long a broker "
       "that does not lead the schema registry's topic waits for the leader to answer a request "
       "it forwards (50003 after that).", LOW, _AT1),
    _d("schema.registry.authentication", S, "none", "kbroker extension: none, or basic (HTTP basic "
       "authentication against kbroker's SCRAM credentials and PLAIN users; 40101 without "
       "valid credentials).", LOW, OneOf("none", "basic")),
    _d("kbroker.trace", S, "off", "kbroker extension: log every request and response decoded "
       "(logger kbroker.trace) as text or json; off costs nothing.", LOW,
       OneOf("off", "text", "json"), update_mode=CW),
    _d("kbroker.trace.apis", LS, [], "kbroker extension: trace only these APIs (names as in "
       "Kafka's protocol, e.g. Produce,Fetch); empty means all.", LOW, update_mode=CW),
    _d("kbroker.trace.client.ids", LS, [], "kbroker extension: trace only requests from these "
       "client ids; empty means all.", LOW, update_mode=CW),
    # security: TLS and SASL (GSSAPI, PLAIN, SCRAM, OAUTHBEARER) work per listener
    # (kbroker.security); each key below may also be set for one listener as
    # listener.name.<listener>.<key>. Changing them at run time is refused (the listener would
    # keep its old settings).
    _d("sasl.enabled.mechanisms", LS, ["GSSAPI"],
       "SASL mechanisms offered on SASL listeners: GSSAPI (Kerberos, with the listener's "
       "Krb5LoginModule keytab), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's "
       "unsecured JWS validator, or signed tokens checked against a JWKS).", MEDIUM, update_mode=PB,
       unsupported=_sasl_mechanisms, update_refused=_SECURITY_AT_RUN_TIME),
    _d("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism brokers authenticate "
       "to each other with on a SASL inter-broker listener: GSSAPI (the principal and keytab of the "
       "listener's Krb5LoginModule entry), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the username and "
       "password of that listener's JAAS entry for the mechanism).", MEDIUM,
       update_mode=PB, unsupported=_inter_broker_mechanism, update_refused=_SECURITY_AT_RUN_TIME),
    _d("sasl.jaas.config", P, None, "JAAS login context; a broker reads it only with a listener "
       "and mechanism prefix (listener.name.<l>.<mechanism>.sasl.jaas.config).", MEDIUM,
       update_mode=PB, unsupported=not_implemented_if_set(
           "an unprefixed sasl.jaas.config (set listener.name.<listener>.<mechanism>."
           "sasl.jaas.config, as Kafka brokers require)")),
    # OAUTHBEARER with signed tokens (KIP-768): the broker's validator, used on a listener whose
    # listener.name.<l>.oauthbearer.sasl.server.callback.handler.class is Kafka's
    # OAuthBearerValidatorCallbackHandler (kbroker.security.sasl.jwt). Each may also be set as
    # listener.name.<l>.sasl.oauthbearer.<key> or listener.name.<l>.oauthbearer.sasl.oauthbearer.<key>.
    _d("sasl.oauthbearer.jwks.endpoint.url", S, None, "Where the identity provider publishes "
       "its signing keys (a JWKS): http://, https:// or file://. Read at start-up, then every "
       "sasl.oauthbearer.jwks.endpoint.refresh.ms and at once when a token names a key id the "
       "set lacks (at most once a minute per key id).", MEDIUM),
    _d("sasl.oauthbearer.jwks.endpoint.refresh.ms", L, 3600000, "How often the JWKS is read "
       "again.", LOW, _AT1),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", L, 100, "First wait before retrying a "
       "failed JWKS read.", LOW, _AT0),
    _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", L, 10000, "Longest wait between "
       "retries of a failed JWKS read; a refresh gives up (keeping the keys it has) after it.",
       LOW, _AT0),
    _d("sasl.oauthbearer.expected.audience", LS, [], "Audiences a token's aud claim must "
       "include one of; empty: a token with an aud claim is refused, as Kafka does.", LOW),
    _d("sasl.oauthbearer.expected.issuer", S, None, "The iss claim a token must carry; unset: "
       "any issuer.", LOW),
    _d("sasl.oauthbearer.clock.skew.seconds", I, 30, "Leeway for the exp, nbf and iat checks.",
       LOW, _AT0),
    _d("sasl.oauthbearer.scope.claim.name", S, "scope", "The claim holding the token's scopes.",
       LOW),
    _d("sasl.oauthbearer.sub.claim.name", S, "sub", "The claim holding the principal name.", LOW),
    _d("sasl.oauthbearer.jwt.validator.class", C,
       "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
       "The broker's JWT validator: Kafka's DefaultJwtValidator (or BrokerJwtValidator, which it "
       "uses when a JWKS endpoint is set).", LOW, unsupported=_jwt_validator),
    # GSSAPI (Kerberos): the listener's Krb5LoginModule JAAS entry names the keytab and principal
    # (kbroker.security.sasl.gssapi, on MIT Kerberos through the gssapi package).
    _d("sasl.kerberos.service.name", S, None, "The Kerberos service name brokers run as (the "
       "first component of their principal, e.g. kafka); required with GSSAPI, as in Kafka.",
       MEDIUM, update_mode=PB, update_refused=_SECURITY_AT_RUN_TIME),
    _d("sasl.kerberos.principal.to.local.rules", LS, ["DEFAULT"], "Rules mapping a Kerberos "
       "principal to the short name of User:<name> (DEFAULT, RULE:[n:format](match)s/from/to/g "
       "/L /U), first match wins.", MEDIUM, KerberosRules(), update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _ignored("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", "Kerberos kinit command path.",
             why=KEYTAB_LOGIN, update_mode=PB),
    _ignored("sasl.kerberos.min.time.before.relogin", L, 60000, "Login thread sleep time "
             "between refresh attempts.", why=KEYTAB_LOGIN, update_mode=PB),
    _ignored("sasl.kerberos.ticket.renew.jitter", D, 0.05, "Random jitter added to the renewal "
             "time.", why=KEYTAB_LOGIN, update_mode=PB),
    _ignored("sasl.kerberos.ticket.renew.window.factor", D, 0.8, "Share of the ticket's lifetime "
             "after which it is renewed.", why=KEYTAB_LOGIN, update_mode=PB),
    _d("sasl.server.max.receive.size", I, 524288,
       "The largest request a client may send before and during SASL authentication.", LOW, _AT1),
    _d("connection.failed.authentication.delay.ms", I, 100,
       "How long the answer to a failed authentication is held back before the connection "
       "closes (slows password guessing).", LOW, Range(0)),
    _d("ssl.keystore.location", S, None, "Key store file (PEM or PKCS12).", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.keystore.password", P, None, "Key store password.", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.keystore.type", S, "JKS", "Key store format: PEM or PKCS12 (a JKS-typed file is read "
       "if it is PKCS12, as Java does; a real JKS file is refused).", MEDIUM,
       OneOf("JKS", "PKCS12", "PEM"), update_mode=PB, update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.key.password", P, None, "Private key password.", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.keystore.key", P, None, "PEM private key (PKCS#8).", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.keystore.certificate.chain", P, None, "PEM certificate chain.", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.truststore.location", S, None, "Trust store file (PEM or PKCS12).", MEDIUM,
       update_mode=PB, update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.truststore.password", P, None, "Trust store password.", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.truststore.type", S, "JKS", "Trust store format: PEM or PKCS12.", MEDIUM,
       OneOf("JKS", "PKCS12", "PEM"), update_mode=PB, update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.truststore.certificates", P, None, "PEM trusted certificates.", MEDIUM, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.client.auth", S, "none", "Client certificate requirement.", MEDIUM,
       OneOf("required", "requested", "none"), update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], "TLS versions offered.", MEDIUM,
       ListOf("TLSv1.2", "TLSv1.3"), update_mode=PB, update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.cipher.suites", LS, [], "TLS 1.2 cipher suites offered (OpenSSL or IANA names); empty "
       "means the defaults. TLS 1.3 suites are always OpenSSL's.", LOW, update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.endpoint.identification.algorithm", S, "https",
       "Host name check of the broker a broker connects to over TLS (inter-broker); empty turns "
       "it off.", LOW, OneOf("https", "", case_sensitive=False), update_mode=PB,
       update_refused=_SECURITY_AT_RUN_TIME),
    _d("ssl.principal.mapping.rules", S, "DEFAULT",
       "Rules mapping a client certificate's distinguished name to a principal name.", LOW),
    _d("principal.builder.class", C, None, "Builds the principal of a connection.", MEDIUM,
       update_mode=PB, unsupported=PLUGINS),
    _d("authorizer.class.name", S, "", "Authorizer; empty disables ACL checks.", LOW,
       unsupported=_authorizer),
    _d("super.users", S, None, "Semicolon-separated principals that pass every ACL check.", LOW),
    _d("allow.everyone.if.no.acl.found", B, False, "Allow access to resources without ACLs.", LOW),
    _d("delegation.token.secret.key", P, None, "Secret key that makes and checks delegation "
       "tokens (KIP-48): a token's HMAC is HMAC-SHA512 of its id under this key. Every broker "
       "must have the same key. Unset or empty: the delegation token API answers "
       "DELEGATION_TOKEN_AUTH_DISABLED.", MEDIUM),
    _d("delegation.token.max.lifetime.ms", L, 604800000, "Longest life of a delegation token: "
       "it cannot be renewed past this, from its creation.", MEDIUM, _AT1),
    _d("delegation.token.expiry.time.ms", L, 86400000, "How long a delegation token lives "
       "without renewal (the default renew period).", MEDIUM, _AT1),
    _d("delegation.token.expiry.check.interval.ms", L, 3600000, "How often expired delegation "
       "tokens are removed.", LOW, _AT1),
    _d("connections.max.reauth.ms", L, 0, "Longest SASL session (KIP-368): clients (SaslAuthenticate "
       "v1+) are told to re-authenticate within it, and a connection that has not is closed at its "
       "next request. 0 means no limit (an OAUTHBEARER token's expiry still bounds a session). "
       "Also per listener and mechanism: listener.name.<l>.<mechanism>.connections.max.reauth.ms.",
       MEDIUM),
    _d("create.topic.policy.class.name", C, None, "CreateTopics policy class.", LOW,
       unsupported=PLUGINS),
    _d("alter.config.policy.class.name", C, None, "AlterConfigs policy class.", LOW,
       unsupported=PLUGINS),
)

FAULT_PREFIX = "kbroker.fault."


class _BrokerTable(dict):
    """The table, plus one definition shared by the open family of ``kbroker.fault.<name>`` keys
    (fault-injection rules: the user picks the names). Iterating lists only the fixed keys."""

    def get(self, name, default=None):
        definition = dict.get(self, name)
        if definition is None and _is_fault_key(name):
            return fault_rule_def(name)
        return default if definition is None else definition

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or _is_fault_key(name)

    def __missing__(self, name):
        if _is_fault_key(name):
            return fault_rule_def(name)
        raise KeyError(name)


def _is_fault_key(name) -> bool:
    return isinstance(name, str) and name.startswith(FAULT_PREFIX) and len(name) > len(FAULT_PREFIX)


def _check_fault_rule(value: str) -> None:
    from kbroker.config.fault_rules import parse_rule  # imports the protocol tables: only when used

    parse_rule(value)


def fault_rule_def(name: str) -> ConfigDef:
    return ConfigDef(name, S, None, "kbroker extension, dev mode only: a fault-injection rule, "
                     "e.g. 'api=Produce error=NOT_LEADER_OR_FOLLOWER count=3' "
                     "(docs/observability.md).", LOW, _check_fault_rule, update_mode=CW)


BROKER_CONFIGS: dict[str, ConfigDef] = _BrokerTable((d.name, d) for d in _BROKER_TABLE)

# Keys outside the table that still name a security feature: the rest of the ssl.* / sasl.*
# families (and per-listener keys the config layer does not accept). They are refused rather than
# kept as unknown keys.
SECURITY_PREFIXES = {"sasl.oauthbearer.": "this OAUTHBEARER setting (a broker validates tokens; "
                                         "the client side, token endpoints and credentials, is "
                                         "for OAUTHBEARER between brokers)",
                     "ssl.": "this TLS setting", "sasl.": "this SASL setting",
                     "listener.name.": "this per-listener setting"}


def security_feature(name: str) -> str | None:
    """The unimplemented feature an unknown key belongs to, or None."""
    for prefix, feature in SECURITY_PREFIXES.items():
        if name.startswith(prefix):
            return feature
    return None
