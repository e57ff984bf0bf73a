"""Checks on a dynamic broker config update (AlterConfigs / IncrementalAlterConfigs on a BROKER
resource), in Kafka's order and with Kafka's messages (``DynamicBrokerConfig.validateConfigs``,
``DynamicThreadPool.validateReconfiguration``).

Kafka answers every failure here with INVALID_REQUEST (``ConfigAdminManager`` wraps the
ConfigException, KAFKA-13609), and names sets the Scala way: ``Set(a, b)``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from kbroker.config.broker import BrokerConfig
from kbroker.config.broker_table import BROKER_CONFIGS, FAULT_PREFIX, security_feature
from kbroker.config.types import PER_BROKER, ConfigError

# SslConfigs.RECONFIGURABLE_CONFIGS: Kafka updates these only per listener (listener.name.X.*).
LISTENER_ONLY_SECURITY_CONFIGS = frozenset((
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"))

# DynamicThreadPool.RECONFIGURABLE_CONFIGS: a new size must stay within half and double the old.
THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                       "background.threads")


class DynamicUpdateError(ConfigError):
    """A dynamic update Kafka would refuse; the handler answers INVALID_REQUEST."""


def scala_set(names: Iterable[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def check_update(config: BrokerConfig, changes: Mapping[str, Any], cluster_default: bool) -> None:
    """Raise DynamicUpdateError unless setting (value) or removing (None) every key of
    ``changes`` in one dynamic layer is allowed; values are parsed and validated too."""
    names = set(changes)
    unknown = {n for n in names if n not in BROKER_CONFIGS}
    security = {n for n in unknown if security_feature(n) is not None}
    if unknown - security:
        raise DynamicUpdateError(f"Unknown broker configs: {scala_set(unknown - security)}; kbroker "
                                 "loads no plugins that could use custom configs")
    _refuse({n for n in names - unknown if not BROKER_CONFIGS[n].dynamic},
            "Cannot update these configs dynamically")
    _refuse(names & LISTENER_ONLY_SECURITY_CONFIGS,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix")
    if security:
        name = min(security)
        raise DynamicUpdateError(f"refused '{name}': {security_feature(name)} is not implemented "
                                 "by kbroker yet", name)
    faults = sorted(n for n in names if n.startswith(FAULT_PREFIX) and changes[n] is not None)
    if faults and not config.get("dev.mode"):
        raise DynamicUpdateError(f"refused '{faults[0]}': fault injection works only on a broker "
                                 "in dev mode (start it with dev.mode=true, e.g. kbroker serve "
                                 "--dev)", faults[0])
    for name, value in changes.items():
        definition = BROKER_CONFIGS[name]
        if value is not None:
            try:
                definition.parse(value)
            except ConfigError as exc:
                raise DynamicUpdateError(str(exc), name) from None
    if cluster_default:
        _refuse({n for n in names if BROKER_CONFIGS[n].update_mode == PER_BROKER},
                "Cannot update these configs at default cluster level, broker id must be specified")
    for name in sorted(names):
        reason = BROKER_CONFIGS[name].update_refused
        if reason is not None:
            raise DynamicUpdateError(f"refused dynamic update of '{name}': {reason}", name)
    for name in THREAD_POOL_CONFIGS:
        if changes.get(name) is not None:
            _check_thread_count(name, BROKER_CONFIGS[name].parse(changes[name]), config.get(name))


def _refuse(names: set[str], message: str) -> None:
    if names:
        raise DynamicUpdateError(f"{message}: {scala_set(names)}", min(names))


def _check_thread_count(name: str, new: int, old: int) -> None:
    if new == old:
        return
    error = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        raise DynamicUpdateError(f"{error}, value should be at least 1", name)
    if new < old / 2:
        raise DynamicUpdateError(f"{error}, value should be at least half the current value {old}",
                                 name)
    if new > old * 2:
        raise DynamicUpdateError(f"{error}, value should not be greater than double the current "
                                 f"value {old}", name)
