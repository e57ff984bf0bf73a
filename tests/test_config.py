import logging
import subprocess
import sys

import pytest

from kbroker.config import (
    BROKER_CONFIGS,
    ConfigDef,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Endpoint,
    TopicConfig,
    describe_broker_configs,
    load_config,
    parse_properties,
    validate_topic_configs,
)

LONG_MAX = 2**63 - 1


# --- properties files ---


def test_properties_separators_comments_and_blanks():
    text = """
# a comment
! another comment
   # indented comment
a=1
b : 2
c 3
d=
e
  f = spaced value  
"""
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "", "e": "", "f": "spaced value  "}


def test_properties_continuations():
    text = "listeners=PLAINTEXT://:9092,\\\n    SSL://:9093\nx=a\\\\\ny=b\n# comment ends with \\\nz=c\n"
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://:9092,SSL://:9093"
    assert props["x"] == "a\\"  # an even run of backslashes does not continue the line
    assert props["y"] == "b"
    assert props["z"] == "c"  # comment lines never continue


def test_properties_escapes_and_crlf():
    text = "key\\ with\\=odd\\:chars=v\\tx\\u0041\\n\r\nlast=\\q\r\n"
    assert parse_properties(text) == {"key with=odd:chars": "v\txA\n", "last": "q"}


def test_properties_later_key_wins():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_load_config_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/a, /b\n")
    cfg = load_config(str(path), ["num.partitions=5", "auto.create.topics.enable=false"])
    assert cfg.get("num.partitions") == 5
    assert cfg.log_dirs == ["/a", "/b"]
    assert cfg.auto_create_topics_enable is False
    assert cfg.originals == {"num.partitions": "5", "log.dirs": "/a, /b", "auto.create.topics.enable": "false"}


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path / "missing.properties"))
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["num.partitions"])


# --- defaults and resolution ---


def test_defaults():
    cfg = BrokerConfig()
    assert cfg.node_id == 1
    assert cfg.listeners == [Endpoint("PLAINTEXT", "localhost", 9092)]
    assert cfg.advertised_listeners == [("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.log_dirs == ["./kbroker-data"]
    assert cfg["num.partitions"] == 1
    assert cfg.get("default.replication.factor") == 1
    assert cfg.get("auto.create.topics.enable") is True
    assert cfg.get("message.max.bytes") == 1048588
    assert cfg.get("socket.request.max.bytes") == 104857600
    assert cfg.get("log.segment.bytes") == 1073741824
    assert cfg.get("log.index.interval.bytes") == 4096
    assert cfg.get("log.index.size.max.bytes") == 10485760
    assert cfg.get("log.retention.bytes") == -1
    assert cfg.get("log.retention.check.interval.ms") == 300000
    assert cfg.get("log.flush.interval.messages") == LONG_MAX
    assert cfg.get("log.flush.interval.ms") is None
    assert cfg.log_flush_interval_ms == LONG_MAX
    assert cfg.get("log.message.timestamp.type") == "CreateTime"
    assert cfg.get("log.message.timestamp.before.max.ms") == LONG_MAX
    assert cfg.get("log.message.timestamp.after.max.ms") == 3600000
    assert cfg.get("log.cleanup.policy") == ["delete"]
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.5
    assert cfg.get("offsets.topic.num.partitions") == 50
    assert cfg.get("offsets.topic.replication.factor") == 1
    assert cfg.get("offsets.retention.minutes") == 10080
    assert cfg.get("group.initial.rebalance.delay.ms") == 3000
    assert cfg.get("compression.type") == "producer"
    assert cfg.get("cluster.id") is None
    assert cfg.log_retention_ms == 168 * 3600 * 1000
    assert cfg.log_roll_ms == 168 * 3600 * 1000


def test_retention_precedence_ms_minutes_hours():
    assert BrokerConfig({"log.retention.hours": "2"}).log_retention_ms == 2 * 3600_000
    assert BrokerConfig({"log.retention.hours": "2", "log.retention.minutes": "3"}).log_retention_ms == 180_000
    cfg = BrokerConfig({"log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "5"})
    assert cfg.log_retention_ms == 5
    assert BrokerConfig({"log.retention.ms": "-1"}).log_retention_ms == -1
    assert BrokerConfig({"log.retention.hours": "-1"}).log_retention_ms == -1


def test_roll_and_flush_precedence():
    assert BrokerConfig({"log.roll.hours": "1"}).log_roll_ms == 3600_000
    assert BrokerConfig({"log.roll.hours": "1", "log.roll.ms": "10"}).log_roll_ms == 10
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "7"}).log_flush_interval_ms == 7
    cfg = BrokerConfig({"log.flush.scheduler.interval.ms": "7", "log.flush.interval.ms": "9"})
    assert cfg.log_flush_interval_ms == 9


def test_node_id_and_broker_id_are_synonyms():
    assert BrokerConfig({"broker.id": "4"}).node_id == 4
    assert BrokerConfig({"node.id": "4"}).node_id == 4
    assert BrokerConfig({"broker.id": "-1"}).node_id == 1
    assert BrokerConfig({"broker.id": "3", "node.id": "3"}).node_id == 3
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig({"broker.id": "3", "node.id": "4"})


def test_listeners_and_advertised_listeners():
    props = {"listeners": "PLAINTEXT://:9092,INTERNAL://0.0.0.0:9093,other://[::1]:0",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,OTHER:PLAINTEXT"}
    cfg = BrokerConfig(props)
    assert cfg.listeners == [("PLAINTEXT", "", 9092), ("INTERNAL", "0.0.0.0", 9093), ("OTHER", "::1", 0)]
    assert cfg.advertised_listeners == [("PLAINTEXT", "127.0.0.1", 9092), ("INTERNAL", "127.0.0.1", 9093),
                                        ("OTHER", "::1", 0)]
    assert cfg.listeners[0].bind_host is None
    assert Endpoint("PLAINTEXT", "localhost", 1).bind_host == "127.0.0.1"
    assert cfg.security_protocol("other") == "PLAINTEXT"
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://kafka:19092"})
    assert cfg.advertised_listeners == [("PLAINTEXT", "kafka", 19092)]


@pytest.mark.parametrize(
    "props, key",
    [
        ({"listeners": "PLAINTEXT:/localhost:9092"}, "listeners"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners"),
        ({"listeners": "INTERNAL://a:1"}, "listeners"),
        ({"advertised.listeners": "SSL://a:1"}, "advertised.listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ],
)
def test_bad_listeners(props, key):
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert info.value.key == key
    assert key in str(info.value)


@pytest.mark.parametrize(
    "key, value, reason",
    [
        ("num.partitions", "abc", "not an integer"),
        ("num.partitions", "0", "at least 1"),
        ("num.partitions", "1.5", "not an integer"),
        ("num.partitions", "3000000000", "out of range"),
        ("log.retention.ms", "x", "not a long"),
        ("auto.create.topics.enable", "yes", "not a boolean"),
        ("log.cleaner.min.cleanable.ratio", "2", "between 0 and 1"),
        ("log.cleaner.min.cleanable.ratio", "half", "not a number"),
        ("log.message.timestamp.type", "Now", "CreateTime"),
        ("log.cleanup.policy", "delete,shred", "shred"),
        ("compression.type", "brotli", "producer"),
        ("log.segment.bytes", "13", "at least 14"),
        ("offsets.topic.replication.factor", "40000", "short"),
    ],
)
def test_bad_values_name_the_key(key, value, reason):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"])
    message = str(info.value)
    assert f"'{key}'" in message and repr(value) in message and reason in message
    assert info.value.key == key


def test_exact_message_format():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["num.partitions=abc"])
    assert str(info.value) == "invalid value 'abc' for 'num.partitions': not an integer"


def test_values_are_trimmed_and_typed():
    cfg = BrokerConfig({"num.partitions": " 7 ", "delete.topic.enable": "FALSE", "log.cleaner.min.cleanable.ratio": "0.25"})
    assert cfg.num_partitions == 7
    assert cfg.delete_topic_enable is False
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.25


def test_unknown_keys_are_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        cfg = BrokerConfig({"some.plugin.setting": "x", "num.partitions": "2"})
    assert cfg.unknown == ["some.plugin.setting"]
    assert cfg.originals["some.plugin.setting"] == "x"
    assert "some.plugin.setting" in caplog.text
    with pytest.raises(KeyError):
        cfg.get("some.plugin.setting")
    assert cfg.get("some.plugin.setting", None) is None


def test_passwords_are_hidden():
    secret = ConfigDef("some.password", ConfigType.PASSWORD, None, "A secret.")
    value = secret.parse("s3cret")
    assert "s3cret" not in repr(value) and value.value == "s3cret"
    assert secret.is_sensitive
    with pytest.raises(ConfigError) as info:  # a refused password never shows in the message
        BrokerConfig({"sasl.jaas.config": "s3cret"})
    assert "sasl.jaas.config" in str(info.value) and "s3cret" not in str(info.value)


def test_table_shapes():
    assert BROKER_CONFIGS["num.io.threads"].ignored
    assert "without acting on it" in BROKER_CONFIGS["num.io.threads"].documentation
    for definition in list(BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()):
        if definition.default is not None:
            assert definition.parse(definition.default) == definition.default, definition.name
        for synonym, _ in definition.synonyms:
            assert synonym in BROKER_CONFIGS, synonym
    assert "message.downconversion.enable" not in TOPIC_CONFIGS  # removed in Kafka 4.0


# --- topic configs ---


def test_topic_config_resolution_order():
    broker = BrokerConfig({"log.retention.hours": "1", "message.max.bytes": "2000", "log.cleanup.policy": "compact"})
    tc = TopicConfig({"max.message.bytes": "500"}, broker)
    assert tc.get("max.message.bytes") == 500                       # topic override
    assert tc.retention_ms == 3600_000                              # broker synonym, unit-converted
    assert tc["cleanup.policy"] == ["compact"] and tc.compacted     # broker synonym
    assert tc.get("segment.bytes") == 1073741824                    # broker default
    assert tc.get("segment.ms") == 604800000
    assert tc.get("follower.replication.throttled.replicas") == []  # no broker synonym
    assert TopicConfig().get("retention.ms") == 604800000
    with pytest.raises(KeyError):
        tc.get("no.such.config")


def test_topic_config_sources_and_synonyms():
    broker = BrokerConfig({"message.max.bytes": "2000", "log.retention.ms": "100"})
    tc = TopicConfig({"max.message.bytes": "500"}, broker)
    assert tc.source("max.message.bytes") == ConfigSource.TOPIC_CONFIG
    assert [(s.name, s.value, s.source) for s in tc.synonyms("max.message.bytes")] == [
        ("max.message.bytes", "500", ConfigSource.TOPIC_CONFIG),
        ("message.max.bytes", "2000", ConfigSource.STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    assert tc.source("retention.ms") == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in tc.synonyms("retention.ms")] == [
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    assert tc.source("cleanup.policy") == ConfigSource.DEFAULT_CONFIG
    assert [(s.name, s.value) for s in tc.synonyms("cleanup.policy")] == [("log.cleanup.policy", "delete")]
    # Kafka quirk kept: the chain starts at log.retention.ms, so hours alone reports no synonyms.
    hours_only = TopicConfig({}, BrokerConfig({"log.retention.hours": "1"}))
    assert hours_only.retention_ms == 3600_000
    assert hours_only.source("retention.ms") == ConfigSource.DEFAULT_CONFIG
    assert hours_only.synonyms("retention.ms") == []


def test_topic_describe_entries():
    tc = TopicConfig({"cleanup.policy": "compact,delete", "retention.ms": -1})
    entries = {e.name: e for e in tc.describe(include_synonyms=True, include_documentation=True)}
    assert set(entries) == set(TOPIC_CONFIGS)
    policy = entries["cleanup.policy"]
    assert policy.value == "compact,delete"
    assert policy.source == ConfigSource.TOPIC_CONFIG
    assert policy.config_type == ConfigType.LIST
    assert not policy.read_only and not policy.is_sensitive and policy.documentation
    assert entries["retention.ms"].value == "-1"
    assert entries["preallocate"].value == "false"
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["segment.bytes"].is_default
    only = tc.describe(["retention.ms", "bogus"])
    assert [e.name for e in only] == ["retention.ms"] and only[0].synonyms == []


def test_with_overrides():
    tc = TopicConfig({"retention.ms": "5"})
    changed = tc.with_overrides({"retention.ms": None, "segment.bytes": "1024"})
    assert changed.originals == {"segment.bytes": "1024"}
    assert changed.retention_ms == 604800000 and tc.retention_ms == 5


@pytest.mark.parametrize(
    "configs, key",
    [
        ({"retention.ms": "abc"}, "retention.ms"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"cleanup.policy": "compress"}, "cleanup.policy"),
        ({"message.timestamp.type": "createtime"}, "message.timestamp.type"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"unknown.topic.thing": "1"}, "unknown.topic.thing"),
        ({"segment.ms": None}, "segment.ms"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
    ],
)
def test_validate_topic_configs_names_the_key(configs, key):
    with pytest.raises(ConfigError) as info:
        validate_topic_configs(configs)
    assert info.value.key == key
    assert key in str(info.value)


def test_validate_topic_configs_returns_typed_values():
    assert validate_topic_configs({"retention.ms": "10", "cleanup.policy": "compact"}) == {
        "retention.ms": 10, "cleanup.policy": ["compact"]}


# --- broker DescribeConfigs ---


def test_describe_broker_configs():
    cfg = BrokerConfig({"log.retention.minutes": "30", "node.id": "3"})
    entries = {e.name: e for e in describe_broker_configs(cfg, include_synonyms=True)}
    assert set(entries) == set(BROKER_CONFIGS)
    minutes = entries["log.retention.minutes"]
    assert minutes.value == "30" and minutes.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in minutes.synonyms] == [
        ("log.retention.minutes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG),
    ]
    assert minutes.read_only and not entries["log.retention.ms"].read_only  # as in Kafka 4
    assert entries["log.retention.ms"].value is None
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG and entries["num.partitions"].read_only
    password = entries["ssl.keystore.password"]
    assert password.is_sensitive and password.value is None and password.read_only is False
    assert entries["node.id"].value == "3" and entries["broker.id"].value == "3"
    assert describe_broker_configs(cfg, ["num.partitions"])[0].synonyms == []


def test_dynamic_broker_configs_take_precedence():
    cfg = BrokerConfig({"message.max.bytes": "2000"})
    cfg.set_dynamic("message.max.bytes", "3000", cluster_default=True)
    assert cfg.get("message.max.bytes") == 3000
    cfg.set_dynamic("message.max.bytes", "4000")
    assert cfg.source_of("message.max.bytes") == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert TopicConfig({}, cfg).get("max.message.bytes") == 4000
    entry = describe_broker_configs(cfg, ["message.max.bytes"], include_synonyms=True)[0]
    assert [s.source for s in entry.synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
    cfg.set_dynamic("message.max.bytes", None)
    assert cfg.get("message.max.bytes") == 3000
    with pytest.raises(ConfigError, match="read-only"):
        cfg.set_dynamic("num.partitions", "3")
    with pytest.raises(ConfigError, match="message.max.bytes"):
        cfg.set_dynamic("message.max.bytes", "big")


# --- CLI ---


def test_cli_bad_config_exits_2_naming_the_key():
    proc = subprocess.run(
        [sys.executable, "-m", "kbroker.cli.main", "serve", "--set", "num.partitions=abc"],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("kbroker: bad config: ")
    assert "num.partitions" in proc.stderr


def test_cli_without_subcommand_means_serve(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("log.retention.hours = lots\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kbroker.cli.main", "--config", str(path)],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "log.retention.hours" in proc.stderr


def test_cli_runs_broker_with_loaded_config(monkeypatch):
    import types

    from kbroker.cli import main as cli

    seen = {}
    fake = types.ModuleType("kbroker.server.broker")
    fake.run_broker = lambda config, on_ready=None: seen.setdefault("config", config)
    monkeypatch.setitem(sys.modules, "kbroker.server.broker", fake)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert cli.main(["serve", "--set", "num.partitions=4", "--log-level", "warning"]) == 0
        assert root.level == logging.WARNING
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
    assert seen["config"].num_partitions == 4


def test_cli_import_is_cheap():
    code = "import sys, kbroker.cli.main; print(sorted(m for m in sys.modules if m.startswith(('asyncio', 'kbroker.server'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "[]"


# --- the tables are the only list ---


def test_every_log_config_field_comes_from_one_table_entry():
    from dataclasses import fields

    from kbroker.replica.log_settings import BROKER_LOG_FIELDS, TOPIC_LOG_FIELDS
    from kbroker.log.partition_log import LogConfig

    assert not TOPIC_LOG_FIELDS.keys() & BROKER_LOG_FIELDS.keys()
    assert {f.name for f in fields(LogConfig)} == TOPIC_LOG_FIELDS.keys() | BROKER_LOG_FIELDS.keys()


def test_every_topic_key_reaches_the_log_or_is_refused_or_explained():
    for definition in TOPIC_CONFIGS.values():
        roles = [definition.log_field is not None, definition.unsupported is not None,
                 definition.no_effect is not None, definition.read_by is not None]
        assert roles.count(True) == 1, definition.name


def test_log_config_derived_from_overrides_and_broker_synonyms():
    from kbroker.replica.log_settings import log_config

    broker = BrokerConfig({"log.index.size.max.bytes": "4096", "producer.id.expiration.ms": "1000",
                           "log.roll.hours": "2"})
    lc = log_config({"min.insync.replicas": "2", "segment.bytes": "1000"}, broker)
    assert (lc.segment_index_bytes, lc.producer_id_expiration_ms, lc.segment_ms) == (4096, 1000, 7_200_000)
    assert (lc.min_insync_replicas, lc.segment_bytes) == (2, 1000)
    assert log_config({"segment.index.bytes": "8192"}, broker).segment_index_bytes == 8192


@pytest.mark.parametrize("key, value, words", [
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker"),
])
def test_topic_values_kbroker_cannot_honour_are_refused(key, value, words):
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({key: value})
    assert key in str(info.value) and words in str(info.value)
    default = TOPIC_CONFIGS[key].to_string(TOPIC_CONFIGS[key].default)
    validate_topic_configs({key: default})  # what kbroker does is always accepted


@pytest.mark.parametrize("props, key, feature", [
    ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-1"},
     "sasl.enabled.mechanisms", "SCRAM-SHA-1"),
    ({"sasl.oauthbearer.token.endpoint.url": "http://x"}, "sasl.oauthbearer.token.endpoint.url",
     "between brokers"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "x.Y"},
     "oauthbearer.sasl.server.callback.handler.class", "callback handler"),
    ({"listener.name.plaintext.ssl.engine.factory.class": "x"}, "ssl.engine.factory.class",
     "per-listener"),
    ({"authorizer.class.name": "com.example.CustomAuthorizer"},
     "authorizer.class.name", "plugin"),
])
def test_unimplemented_features_are_refused_at_start_up(props, key, feature):
    # Refusals name the key and what is missing; TLS/SASL listeners themselves now work.
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert key in str(info.value) and feature in str(info.value)
    assert "not implemented" in str(info.value)


def test_security_listeners_and_per_listener_overrides():
    cfg = BrokerConfig({
        "listeners": "PLAINTEXT://:9092,SSL://:9093,SASL_SSL://:9094,INTERNAL://:9095",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                                          "INTERNAL:SASL_PLAINTEXT",
        "ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    assert cfg.security_protocol("internal") == "SASL_PLAINTEXT"
    assert cfg.listener_get("SSL", "ssl.client.auth") == "required"
    assert cfg.listener_get("SASL_SSL", "ssl.client.auth") == "none"
    assert cfg.listener_get("INTERNAL", "sasl.enabled.mechanisms") == ["PLAIN"]
    assert cfg.listener_get("SASL_SSL", "sasl.enabled.mechanisms") == ["SCRAM-SHA-512"]
    assert 'user_a="b"' in cfg.jaas_config("internal", "plain")


def test_connections_max_reauth_ms_per_listener_and_mechanism():
    """Kafka's lookup: listener.name.<l>.<mechanism>., then listener.name.<l>., then broker-wide."""
    cfg = BrokerConfig({
        "listeners": "A://:9093,B://:9094", "listener.security.protocol.map":
            "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER",
        "connections.max.reauth.ms": "60000",
        "listener.name.a.connections.max.reauth.ms": "30000",
        "listener.name.a.oauthbearer.connections.max.reauth.ms": "3000"})
    assert cfg.max_reauth_ms("A", "OAUTHBEARER") == 3000
    assert cfg.max_reauth_ms("a", "PLAIN") == 30000
    assert cfg.max_reauth_ms("B", "OAUTHBEARER") == 60000


@pytest.mark.parametrize("props, words", [
    ({"listeners": "SSL://:9093"}, "needs a key store"),
    ({"listeners": "X://:9093", "listener.security.protocol.map": "X:TLS"}, "unknown security protocol"),
    ({"listeners": "SASL_PLAINTEXT://:1", "sasl.enabled.mechanisms": "PLAIN"}, "has no users"),
    ({"listener.name.other.ssl.client.auth": "required"}, "not in 'listeners'"),
    ({"listener.name.plaintext.ssl.client.auth": "sometimes"}, "listener.name.plaintext.ssl.client.auth"),
    ({"listener.name.plaintext.sasl.jaas.config": "x"}, "per mechanism"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
])
def test_security_listener_mistakes_are_named(props, words):
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert words in str(info.value)


def test_dynamic_modes_follow_kafka():
    from kbroker.config import CLUSTER_WIDE, PER_BROKER, READ_ONLY

    modes = {name: d.update_mode for name, d in BROKER_CONFIGS.items()}
    for name in ("log.retention.ms", "log.cleaner.threads", "num.io.threads", "max.connections",
                 "message.max.bytes", "producer.id.expiration.ms", "log.local.retention.ms",
                 "remote.log.reader.threads", "metric.reporters", "log.segment.delete.delay.ms"):
        assert modes[name] == CLUSTER_WIDE, name
    for name in ("listeners", "listener.security.protocol.map", "ssl.keystore.location",
                 "sasl.enabled.mechanisms"):
        assert modes[name] == PER_BROKER, name
    for name in ("log.retention.hours", "log.roll.hours", "advertised.listeners", "log.dirs",
                 "num.partitions", "log.flush.scheduler.interval.ms"):
        assert modes[name] == READ_ONLY, name


@pytest.mark.parametrize("changes, cluster_default, message", [
    ({"log.dirs": "/x", "num.partitions": "3"}, False,
     "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"),
    ({"ssl.keystore.location": "/k"}, False,
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ({"listeners": "PLAINTEXT://:9"}, True,
     "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"),
    ({"num.io.threads": "17"}, False,
     "Dynamic thread count update validation failed for num.io.threads=17, value should not be greater "
     "than double the current value 8"),
    ({"num.io.threads": "3"}, False, "value should be at least half the current value 8"),
    ({"no.such.key": "1"}, False, "Unknown broker configs: Set(no.such.key)"),
])
def test_dynamic_update_refusals_use_kafkas_words(changes, cluster_default, message):
    from kbroker.config.dynamic import DynamicUpdateError, check_update

    with pytest.raises(DynamicUpdateError) as info:
        check_update(BrokerConfig(), changes, cluster_default)
    assert message in str(info.value)


def test_every_dynamic_key_is_accepted_or_refused_with_a_reason():
    from kbroker.config.dynamic import DynamicUpdateError, check_update

    for name, definition in BROKER_CONFIGS.items():
        if not definition.dynamic or definition.default is None:
            continue
        try:
            check_update(BrokerConfig(), {name: definition.to_string(definition.default)}, False)
        except DynamicUpdateError as exc:  # only Kafka's per-listener rule or a named refusal
            assert name in str(exc) and ("per-listener" in str(exc) or "refused" in str(exc)), name


def test_keys_without_effect_say_so_in_their_documentation():
    (entry,) = describe_broker_configs(BrokerConfig(), ["log.cleaner.threads"], include_documentation=True)
    assert "without acting on it" in entry.documentation and "event loop" in entry.documentation
    (entry,) = TopicConfig({}).describe(["unclean.leader.election.enable"], include_documentation=True)
    assert "only replica" in entry.documentation


def test_cluster_mode_takes_secured_inter_broker_listeners_and_the_authorizer(tmp_path):
    cluster = {"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path)}
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="broker" password="broker-secret" user_broker="broker-secret";')
    secured = {**cluster, "listeners": "SASL_SSL://127.0.0.1:9093",
               "listener.security.protocol.map": "SASL_SSL:SASL_SSL",
               "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
               "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
               "listener.name.sasl_ssl.ssl.keystore.location": str(tmp_path / "missing.pem")}
    # GSSAPI, Kafka's default inter-broker mechanism, must be enabled on the listener.
    with pytest.raises(ConfigError, match="GSSAPI must be included in sasl.enabled.mechanisms "
                                          "of the inter-broker listener SASL_SSL") as info:
        BrokerConfig(secured)
    assert info.value.key == "sasl.mechanism.inter.broker.protocol"
    config = BrokerConfig({**secured, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert config.inter_broker_listener_name == "SASL_SSL"
    # Kafka's rule: the inter-broker mechanism is one the listener enables.
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        BrokerConfig({**secured, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    with pytest.raises(ConfigError, match="OAUTHBEARER is not implemented"):
        BrokerConfig({**secured, "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    ssl_internal = {**cluster, "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
                    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                    "ssl.keystore.location": str(tmp_path / "missing.pem"),
                    "inter.broker.listener.name": "EXTERNAL"}
    assert BrokerConfig(ssl_internal).inter_broker_listener_name == "EXTERNAL"
    assert BrokerConfig({**cluster, "listeners": "INTERNAL://127.0.0.1:9092",
                         "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}
                        ).inter_broker_listener_name == "INTERNAL"
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        BrokerConfig({**ssl_internal, "ssl.endpoint.identification.algorithm": "ldaps"})
    assert BrokerConfig({**ssl_internal, "ssl.endpoint.identification.algorithm": ""}) \
        .get("ssl.endpoint.identification.algorithm") == ""
    # The authorizer runs in a cluster too (ACLs in ZooKeeper's /kafka-acl), under either of
    # Kafka's names; a class we do not implement stays refused, as on a single node.
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"):
        assert BrokerConfig({**cluster, "authorizer.class.name": name}
                            ).get("authorizer.class.name") == name
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({**cluster, "authorizer.class.name": "com.example.CustomAuthorizer"})
    # A single node keeps both (no inter-broker traffic; ACLs in the local store).
    BrokerConfig({"log.dirs": str(tmp_path), "authorizer.class.name":
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})


def test_security_inter_broker_protocol_names_the_inter_broker_listener():
    """Kafka's alternative to inter.broker.listener.name: the listener named after the protocol;
    setting both, or naming a listener that does not exist, gets Kafka's words."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="b" '
            'password="s" user_b="s";')
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
                        "ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM",
                        "sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
                        "security.inter.broker.protocol": "SASL_SSL"})
    assert cfg.inter_broker_listener_name == "SASL_SSL"
    assert cfg.security_protocol(cfg.inter_broker_listener_name) == "SASL_SSL"
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                      "inter.broker.listener.name": "INTERNAL",
                      "security.inter.broker.protocol": "PLAINTEXT"})
    assert "Only one of inter.broker.listener.name and security.inter.broker.protocol should " \
           "be set." in str(info.value)
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"listeners": "PLAINTEXT://:9092", "security.inter.broker.protocol": "SSL"})
    assert "inter.broker.listener.name must be a listener name defined in advertised.listeners" \
        in str(info.value)


def test_inter_broker_client_follows_security_inter_broker_protocol(tmp_path):
    """kbroker.security.inter_broker reads the listener the protocol names (TLS client context
    and SASL credentials), as with inter.broker.listener.name."""
    from kbroker.security.inter_broker import from_config
    from kbroker.testing.certs import make_certificates

    certs = make_certificates(tmp_path)
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="broker" password="secret" user_broker="secret";')
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
                        "ssl.keystore.location": str(certs.server_keystore),
                        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(certs.ca_file),
                        "sasl.enabled.mechanisms": "PLAIN",
                        "sasl.mechanism.inter.broker.protocol": "PLAIN",
                        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
                        "security.inter.broker.protocol": "SASL_SSL"})
    security = from_config(cfg)
    assert (security.listener, security.protocol, security.mechanism, security.username) == \
        ("SASL_SSL", "SASL_SSL", "PLAIN", "broker")
    assert security.ssl_context is not None
