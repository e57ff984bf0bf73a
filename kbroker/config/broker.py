"""A broker's configuration: static values from ``server.properties`` and overrides, dynamic
layers from AlterConfigs, and the values a topic takes without overrides.

``load_config(path, overrides)`` reads a Java-properties file plus ``key=value`` overrides and
returns a :class:`BrokerConfig`. Every value is parsed and validated by its table entry
(:mod:`kbroker.config.broker_table`); a value asking for an unimplemented feature is refused
there, and cross-key rules (listeners, node ids, session timeouts) are checked here. Unknown keys
are logged and kept in ``originals``, as Kafka does -- except unknown ``ssl.*`` and ``sasl.*`` keys,
which are refused: they would configure security kbroker lacks.

Per-listener settings use Kafka's prefix: ``listener.name.<listener>.<ssl.* or sasl.* key>``
overrides that key for one listener (:meth:`BrokerConfig.listener_get`), and
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` holds a SASL mechanism's JAAS entry
(:meth:`BrokerConfig.jaas_config`). Only the keys kbroker acts on are accepted there.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from kbroker.config.broker_table import (BROKER_CONFIGS, FAULT_PREFIX, INTER_BROKER_MECHANISMS,
                                         security_feature)
from kbroker.config.listeners import (CALLBACK_KEY, OAUTHBEARER_CALLBACK_HANDLERS, REAUTH_KEY, SASL_MECHANISMS, SECURITY_PROTOCOLS, Endpoint,
                                      jaas_mechanism, parse_listeners, reauth_mechanism,
                                      split_listener_key, uses_sasl, uses_tls)
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
        # listener name (upper case) -> {key: parsed value}; JAAS entries under "<MECH>.jaas"
        self._per_listener: dict[str, dict[str, Any]] = {}
        for key, raw in self.originals.items():
            if split_listener_key(key) is not None:
                self._set_listener_key(key, raw)
                continue
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

    def listener_get(self, listener: str, name: str) -> Any:
        """``name`` as it applies to one listener: its ``listener.name.<listener>.`` override,
        else the broker-wide value."""
        overrides = self._per_listener.get(listener.upper(), {})
        return overrides[name] if name in overrides else self.get(name)

    def listener_is_set(self, listener: str, name: str) -> bool:
        return name in self._per_listener.get(listener.upper(), {}) or self.is_set(name)

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """``listener.name.<listener>.<mechanism>.sasl.jaas.config``, or None."""
        return self._per_listener.get(listener.upper(), {}).get(f"{mechanism.upper()}.jaas")

    def mechanism_get(self, listener: str, mechanism: str, name: str) -> Any:
        """``name`` for one mechanism on one listener: ``listener.name.<l>.<mechanism>.<name>``,
        then ``listener.name.<l>.<name>``, then the broker-wide value (Kafka's prefixes)."""
        overrides = self._per_listener.get(listener.upper(), {})
        key = f"{mechanism.upper()}.{name}"
        return overrides[key] if key in overrides else self.listener_get(listener, name)

    def callback_handler(self, listener: str, mechanism: str) -> str | None:
        """``listener.name.<l>.<mechanism>.sasl.server.callback.handler.class``, or None."""
        return self._per_listener.get(listener.upper(), {}).get(f"{mechanism.upper()}."
                                                                f"{CALLBACK_KEY}")

    def mechanism_is_set(self, listener: str, mechanism: str, name: str) -> bool:
        return f"{mechanism.upper()}.{name}" in self._per_listener.get(listener.upper(), {}) \
            or self.listener_is_set(listener, name)

    def max_reauth_ms(self, listener: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for one mechanism on one listener, as Kafka resolves it:
        ``listener.name.<l>.<mechanism>.``, then ``listener.name.<l>.``, then the broker-wide
        value."""
        overrides = self._per_listener.get(listener.upper(), {})
        key = f"{mechanism.upper()}.{REAUTH_KEY}"
        return overrides[key] if key in overrides else self.listener_get(listener, REAUTH_KEY)

    def _set_listener_key(self, key: str, raw: Any) -> None:
        listener, rest = split_listener_key(key)
        overrides = self._per_listener.setdefault(listener, {})
        mechanism = jaas_mechanism(rest)
        if mechanism is not None:
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"refused '{key}': SASL mechanism {mechanism} is not implemented "
                                  f"by kbroker (it serves {', '.join(SASL_MECHANISMS)})", key)
            overrides[f"{mechanism}.jaas"] = str(raw)
            return
        if rest.endswith("sasl.server.callback.handler.class"):
            if rest.lower() != "oauthbearer." + CALLBACK_KEY or str(raw).strip() not in \
                    OAUTHBEARER_CALLBACK_HANDLERS:
                raise ConfigError(
                    f"refused '{key}': loading Java callback handler classes is not implemented "
                    f"by kbroker (for OAUTHBEARER it serves Kafka's own "
                    f"{' and '.join(OAUTHBEARER_CALLBACK_HANDLERS)})", key)
            overrides[f"OAUTHBEARER.{CALLBACK_KEY}"] = str(raw).strip()
            return
        mechanism, _, name = rest.partition(".")
        if mechanism.upper() in SASL_MECHANISMS and name.startswith(("sasl.oauthbearer.",
                                                                     "sasl.kerberos.")):
            # Kafka's mechanism prefix (listener.name.<l>.<mechanism>.<key>) for a mechanism's
            # own settings (ConfigurationUtils, SaslChannelBuilder).
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise ConfigError(f"refused '{key}': the per-listener setting '{name}' is not "
                                  f"implemented by kbroker yet", key)
            try:
                overrides[f"{mechanism.upper()}.{name}"] = definition.parse(raw)
            except ConfigError as exc:
                raise ConfigError(str(exc).replace(f"'{name}'", f"'{key}'"), key) from None
            return
        mechanism = reauth_mechanism(rest)
        if mechanism is not None:
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"refused '{key}': SASL mechanism {mechanism} is not implemented "
                                  f"by kbroker (it serves {', '.join(SASL_MECHANISMS)})", key)
            rest, store_as = REAUTH_KEY, f"{mechanism}.{REAUTH_KEY}"
        else:
            store_as = rest
        definition = BROKER_CONFIGS.get(rest)
        if definition is None or not rest.startswith(("ssl.", "sasl.", REAUTH_KEY)) \
                or rest in ("sasl.jaas.config", "sasl.mechanism.inter.broker.protocol"):
            hint = (" (a broker reads JAAS entries per mechanism: listener.name.<listener>."
                    "<mechanism>.sasl.jaas.config)" if rest == "sasl.jaas.config" else "")
            raise ConfigError(f"refused '{key}': the per-listener setting '{rest}' is not "
                              f"implemented by kbroker yet{hint}", key)
        try:
            overrides[store_as] = definition.parse(raw)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(f"'{rest}'", f"'{key}'"), key) from None

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

    @property
    def inter_broker_listener_name(self) -> str | None:
        """The listener brokers use to reach each other: ``inter.broker.listener.name``, else
        the listener named after ``security.inter.broker.protocol`` (Kafka's default), else the
        first listener."""
        named = self.get("inter.broker.listener.name")
        if named:
            return named.upper()
        names = [endpoint.name for endpoint in self.listeners]
        by_protocol = (self.get("security.inter.broker.protocol") or "PLAINTEXT").upper()
        if by_protocol in names:
            return by_protocol
        return names[0] if names else None

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
        if self.get("zookeeper.connect"):  # before the listeners' own files are looked at
            self._check_cluster_security()
        names = set()
        for endpoint in self.listeners:
            names.add(endpoint.name)
            if endpoint.name not in protocols:
                raise ConfigError(f"invalid value for 'listeners': listener name {endpoint.name} is not "
                                  "in 'listener.security.protocol.map'", "listeners")
            self._check_listener_security(endpoint, protocols[endpoint.name])
        for listener in self._per_listener:
            if listener == "SCHEMA_REGISTRY":  # the registry's https listener (its ssl.* keys)
                if not any(url.startswith("https://")
                           for url in self.get("schema.registry.listeners")):
                    raise ConfigError("invalid per-listener config: listener.name."
                                      "schema_registry.* keys need an https:// URL in "
                                      "'schema.registry.listeners'",
                                      "schema.registry.listeners")
                continue
            if listener not in names:
                raise ConfigError(f"invalid per-listener config: listener {listener} (from a "
                                  f"'listener.name.{listener.lower()}.' key) is not in 'listeners'",
                                  "listeners")
        for endpoint in self.advertised_listeners:
            if endpoint.name not in names:
                raise ConfigError(f"invalid value for 'advertised.listeners': listener name "
                                  f"{endpoint.name} is not in 'listeners'", "advertised.listeners")
            if endpoint.host in ("0.0.0.0", "::"):
                raise ConfigError("invalid value for 'advertised.listeners': cannot advertise the "
                                  f"non-routable address {endpoint.host}", "advertised.listeners")
        inter_broker = self.get("inter.broker.listener.name")
        if inter_broker is not None and inter_broker.upper() not in names:
            raise ConfigError(f"invalid value for 'inter.broker.listener.name': {inter_broker} "
                              "is not a listener name in 'listeners'", "inter.broker.listener.name")
        if self.is_set("security.inter.broker.protocol"):
            # Kafka's AbstractKafkaConfig / KafkaConfig rules for the alternative key.
            if inter_broker is not None:
                raise ConfigError("Only one of inter.broker.listener.name and "
                                  "security.inter.broker.protocol should be set.",
                                  "security.inter.broker.protocol")
            by_protocol = self.get("security.inter.broker.protocol").upper()
            advertised = [e.name for e in self.advertised_listeners]
            if by_protocol not in advertised:
                raise ConfigError(
                    f"inter.broker.listener.name must be a listener name defined in "
                    f"advertised.listeners. The valid options based on currently configured "
                    f"listeners are {','.join(advertised)} (security.inter.broker.protocol="
                    f"{by_protocol} names the listener {by_protocol})",
                    "security.inter.broker.protocol")
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("'group.min.session.timeout.ms' must not exceed "
                              "'group.max.session.timeout.ms'", "group.min.session.timeout.ms")
        from kbroker.config import share_groups
        share_groups.check(self.get)
        faults = sorted(n for n in self._static if n.startswith(FAULT_PREFIX))
        if faults and not self.get("dev.mode"):
            raise ConfigError(f"refused '{faults[0]}': fault injection works only in dev mode "
                              "(dev.mode=true)", faults[0])
        if not self.log_dirs:
            raise ConfigError("invalid value for 'log.dirs': at least one directory is required", "log.dirs")


    def _check_cluster_security(self) -> None:
        """What a cluster cannot do yet is refused by name, never half done. Brokers reach each
        other over the inter-broker listener's protocol (kbroker.security.inter_broker): on SASL
        with ``sasl.mechanism.inter.broker.protocol``, which must be one the client speaks and
        the listener enables (Kafka's own rule). (An authorizer works: ACLs live in ZooKeeper;
        the brokers' own principal needs CLUSTER_ACTION or a place in super.users, as in
        Kafka.)"""
        name = self.inter_broker_listener_name
        protocol = self.listener_security_protocols.get(name or "", "PLAINTEXT")
        if uses_sasl(protocol):
            mechanism = self.get("sasl.mechanism.inter.broker.protocol").upper()
            key = "sasl.mechanism.inter.broker.protocol"
            if mechanism not in INTER_BROKER_MECHANISMS:
                raise ConfigError(f"refused inter-broker listener {name} ({protocol}) with SASL "
                                  f"mechanism {mechanism} (the value of {key}"
                                  f"{', by default' if not self.is_set(key) else ''}): brokers "
                                  "authenticate to each other with "
                                  f"{', '.join(INTER_BROKER_MECHANISMS)} only; set {key}", key)
            enabled = [m.upper() for m in self.listener_get(name, "sasl.enabled.mechanisms")]
            if mechanism not in enabled:
                raise ConfigError(f"{key}={mechanism} must be included in sasl.enabled.mechanisms "
                                  f"of the inter-broker listener {name} (it enables "
                                  f"{', '.join(enabled)})", key)

    def _check_listener_security(self, endpoint: Endpoint, protocol: str) -> None:
        """The settings a listener's protocol needs are there (files are read at start-up)."""
        name = endpoint.name
        prefix = f"listener.name.{name.lower()}."
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value for 'listener.security.protocol.map': listener {name} "
                              f"has unknown security protocol {protocol} (expected one of "
                              f"{', '.join(SECURITY_PROTOCOLS)})", "listener.security.protocol.map")
        if uses_tls(protocol):
            has_store = self.listener_get(name, "ssl.keystore.location") is not None
            has_pem = self.listener_get(name, "ssl.keystore.certificate.chain") is not None
            if not has_store and not has_pem:
                raise ConfigError(f"listener {endpoint} ({protocol}) needs a key store: set "
                                  f"ssl.keystore.location (or {prefix}ssl.keystore.location), or "
                                  "ssl.keystore.certificate.chain and ssl.keystore.key with "
                                  "ssl.keystore.type=PEM", "ssl.keystore.location")
        if uses_sasl(protocol):
            mechanisms = [m.upper() for m in self.listener_get(name, "sasl.enabled.mechanisms")]
            unsupported = [m for m in mechanisms if m not in SASL_MECHANISMS]
            if unsupported or not mechanisms:
                raise ConfigError(f"refused 'sasl.enabled.mechanisms' for listener {endpoint}: "
                                  f"{', '.join(unsupported) or 'an empty list'} "
                                  f"{'is' if len(unsupported) == 1 else 'are'} not implemented by "
                                  f"kbroker (set sasl.enabled.mechanisms or {prefix}"
                                  f"sasl.enabled.mechanisms to some of "
                                  f"{', '.join(SASL_MECHANISMS)})", "sasl.enabled.mechanisms")
            if "GSSAPI" in mechanisms:
                if self.jaas_config(name, "GSSAPI") is None:
                    raise ConfigError(
                        f"listener {endpoint} enables SASL GSSAPI but has no Kerberos login: set "
                        f"{prefix}gssapi.sasl.jaas.config (com.sun.security.auth.module."
                        "Krb5LoginModule required useKeyTab=true storeKey=true keyTab=\"...\" "
                        "principal=\"kafka/host@REALM\";)", f"{prefix}gssapi.sasl.jaas.config")
                if not self.mechanism_get(name, "GSSAPI", "sasl.kerberos.service.name"):
                    # Kafka's SaslChannelBuilder: "No serviceName defined in either JAAS or
                    # Kafka config"
                    raise ConfigError(f"listener {endpoint} enables SASL GSSAPI: No serviceName "
                                      "defined in either JAAS or Kafka config (set "
                                      "sasl.kerberos.service.name)", "sasl.kerberos.service.name")
            if "PLAIN" in mechanisms and self.jaas_config(name, "PLAIN") is None:
                raise ConfigError(f"listener {endpoint} enables SASL PLAIN but has no users: set "
                                  f"{prefix}plain.sasl.jaas.config (org.apache.kafka.common."
                                  "security.plain.PlainLoginModule required user_<name>="
                                  "\"<password>\";)", f"{prefix}plain.sasl.jaas.config")


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

