"""A broker's configuration: static values from ``server.properties`` and overrides, dynamic
layers from AlterConfigs, and the values a topic takes without overrides.

``load_config(path, overrides)`` reads a Java-properties file plus ``key=value`` overrides and
returns a :class:`BrokerConfig`. Every value is parsed and validated by its table entry
(:mod:`kbroker.config.broker_table`); a value asking for an unimplemented feature is refused
there, and cross-key rules (listeners, node ids, session timeouts) are checked here. Unknown keys
are logged and kept in ``originals``, as Kafka does -- except ``ssl.*``, ``sasl.*`` and
``listener.name.*`` keys, which are refused: they would configure security kbroker lacks.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from kbroker.config.broker_table import BROKER_CONFIGS, FAULT_PREFIX, security_feature
from kbroker.config.listeners import Endpoint, parse_listeners
from kbroker.config.properties import parse_properties
from kbroker.config.topic_table import TOPIC_CONFIGS
from kbroker.config.types import MS_PER_MINUTE, ConfigDef, ConfigError, ConfigSource

log = logging.getLogger("kbroker.config")

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
        self._watchers: list = []
        for key, raw in self.originals.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                feature = security_feature(key)
                if feature is not None:
                    raise ConfigError(f"refused '{key}': {feature} is not implemented by kbroker "
                                      "yet", key)
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
        for watcher in self._watchers:
            watcher(name)

    def watch(self, callback) -> None:
        """Call ``callback(name)`` after each successful dynamic change (the server re-reads
        the trace and fault-injection settings this way instead of polling on every request)."""
        self._watchers.append(callback)

    def fault_rule_names(self) -> list[str]:
        """The ``kbroker.fault.<name>`` keys set in any layer, sorted."""
        names = set()
        for layer in (self._dynamic_broker, self._dynamic_default, self._static):
            names.update(n for n in layer if n.startswith(FAULT_PREFIX))
        return sorted(names)

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
            if protocols[endpoint.name] != "PLAINTEXT":
                raise ConfigError(f"refused 'listeners': listener {endpoint} uses security protocol "
                                  f"{protocols[endpoint.name]}; TLS and SASL are not implemented by "
                                  "kbroker yet (use PLAINTEXT)", "listeners")
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
        faults = sorted(n for n in self._static if n.startswith(FAULT_PREFIX))
        if faults and not self.get("dev.mode"):
            raise ConfigError(f"refused '{faults[0]}': fault injection works only in dev mode "
                              "(dev.mode=true)", faults[0])
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

