"""DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2, IncrementalAlterConfigs (key 44) v0-1.

Resources: TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16, KIP-714: client-metrics
subscriptions, kbroker.handlers.client_metrics) and GROUP (32, KIP-848 / KIP-1071 group configs:
the consumer.* and streams.* configs of :mod:`kbroker.coordinator.group.group_configs`, set with
IncrementalAlterConfigs SET/DELETE, APPEND/SUBTRACT for the LIST one; AlterConfigs on a GROUP is
INVALID_REQUEST); any other type is INVALID_REQUEST
("Unsupported resource type: N"). A resource named twice in one alter request is INVALID_REQUEST
("Duplicate resource.").

DescribeConfigs: ``configuration_keys`` null means every key; unknown keys are skipped, as Kafka
does. Each entry carries value (null when sensitive), read_only, config_source (v1+),
is_sensitive, synonyms (v1+, only with ``include_synonyms``), config_type and documentation (v3+,
KIP-569; documentation only with ``include_documentation``). Values, sources and synonym chains come
from kbroker.config (topic override -> broker synonyms in Kafka's order -> default).
- TOPIC: an illegal name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
- BROKER: our node id describes every broker config (read_only unless dynamically updatable);
  "" describes the cluster-wide dynamic defaults; another id is INVALID_REQUEST.
- BROKER_LOGGER (KIP-412): this process's Python loggers (``root`` and ``kbroker*``) with Kafka's
  level names, source DYNAMIC_BROKER_LOGGER_CONFIG.

AlterConfigs replaces the whole set of a topic's overrides; IncrementalAlterConfigs (KIP-339)
applies SET (0), DELETE (1), APPEND (2) and SUBTRACT (3, list configs only: "Can't APPEND to key K
because its type is not LIST." otherwise). A config given twice for one resource, a null value for
anything but DELETE, or an unknown operation is INVALID_REQUEST; a value that fails validation is
INVALID_CONFIG with a message naming the key; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION
("The topic 'T' does not exist."). ``validate_only`` checks without changing anything. A topic
change is stored (metadata.set_topic_configs) and applied to its partition logs at once.

Dynamic broker configs: every key Kafka 4 updates dynamically (``DynamicBrokerConfig``), per broker
(our node id) or cluster-wide (""), checked by kbroker.config.dynamic with Kafka's messages
(INVALID_REQUEST "Cannot update these configs dynamically: Set(...)" for a read-only key, the
per-listener and cluster-level refusals, thread-pool bounds), then applied to every topic's logs
at once; a key kbroker accepts without effect says so in its DescribeConfigs documentation. Like Kafka (which keeps them
in its metadata log) they survive restarts: the metadata store keeps them and start-up re-applies
them over server.properties. Loggers (BROKER_LOGGER) can be changed with IncrementalAlterConfigs only (SET a
level, DELETE to reset to the root level); AlterConfigs on them is INVALID_REQUEST, as in Kafka.
Not supported: AlterConfigPolicy plugins, authorization.
"""

from __future__ import annotations

import logging

from kbroker.config import (BROKER_CONFIGS, TOPIC_CONFIGS, ConfigEntry, ConfigError, ConfigSource,
                            ConfigType, TopicConfig, describe_broker_configs,
                            validate_topic_configs)
from kbroker.config.dynamic import DynamicUpdateError, check_update
from kbroker.handlers import client_metrics, handles
from kbroker.metadata.dynamic_configs import apply_dynamic
from kbroker.metadata.image import topic_name_problem
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, check_configs

log = logging.getLogger("kbroker.configs")

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


# --- helpers shared with CreateTopics ----------------------------------------------------------

def validate_overrides(config, configs: dict) -> dict:
    """Check topic overrides (name -> string); the strings to store, or INVALID_CONFIG."""
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        raise KafkaError(Errors.INVALID_CONFIG, str(exc)) from None
    return dict(configs)


def describe_topic_configs(config, overrides: dict, names=None, *, include_synonyms=False,
                           include_documentation=False) -> list:
    """A topic's effective configs as :class:`kbroker.config.ConfigEntry`, sorted by name."""
    entries = TopicConfig(overrides, config).describe(
        names, include_synonyms=include_synonyms, include_documentation=include_documentation)
    return sorted(entries, key=lambda e: e.name)


# --- DescribeConfigs ---------------------------------------------------------------------------

@handles("DescribeConfigs")
def handle_describe_configs(ctx, request):
    from kbroker.protocol.messages.describe_configs import DescribeConfigsResponse as R

    results = []
    for resource in request.resources:
        result = R.DescribeConfigsResult(error_code=Errors.NONE.code, error_message="",
                                         resource_type=resource.resource_type,
                                         resource_name=resource.resource_name, configs=[])
        try:
            check_configs(ctx, Op.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
            entries = _describe(ctx, resource, request.include_synonyms,
                                ctx.api_version >= 3 and request.include_documentation)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
            continue
        for e in entries:
            result.configs.append(R.DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=e.read_only,
                config_source=int(e.source), is_sensitive=e.is_sensitive,
                synonyms=[R.DescribeConfigsSynonym(name=s.name, value=s.value,
                                                   source=int(s.source)) for s in e.synonyms],
                config_type=int(e.config_type), documentation=e.documentation))
        results.append(result)
    return R(throttle_time_ms=0, results=results)


def _describe(broker, resource, include_synonyms: bool, include_documentation: bool) -> list:
    names = resource.configuration_keys
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        topic = _existing_topic(broker, name)
        return describe_topic_configs(broker.config, topic.configs, names,
                                      include_synonyms=include_synonyms,
                                      include_documentation=include_documentation)
    if kind == BROKER:
        if name == "":
            names = [n for n in broker.config.dynamic_configs(cluster_default=True)
                     if names is None or n in names]
            entries = describe_broker_configs(broker.config, names,
                                              include_synonyms=include_synonyms,
                                              include_documentation=include_documentation)
            return [_with_source(e, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) for e in entries]
        _check_node_id(broker, name, allow_empty=True)
        return describe_broker_configs(broker.config, names, include_synonyms=include_synonyms,
                                       include_documentation=include_documentation)
    if kind == BROKER_LOGGER:
        _check_node_id(broker, name, allow_empty=False)
        return _describe_loggers(names)
    if kind == GROUP:
        return _describe_group(broker, name, names, include_synonyms, include_documentation)
    if kind == CLIENT_METRICS:
        return client_metrics.describe(broker, name, names, include_synonyms,
                                       include_documentation)
    raise KafkaError(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")


def _describe_group(broker, group_id: str, names, include_synonyms: bool,
                    include_documentation: bool) -> list:
    """A group's consumer.*, share.* and streams.* configs: its override (GROUP_CONFIG) or the broker's
    synonym; Kafka's internal ones only once set."""
    from kbroker.config import ConfigSynonym
    from kbroker.coordinator.group.group_configs import GROUP_CONFIGS, default_value, render
    if not group_id:
        raise KafkaError(Errors.INVALID_REQUEST, "Group name must not be empty")
    overrides = broker.metadata.group_config(group_id)
    entries = []
    for name, definition in GROUP_CONFIGS.items():
        if names is not None and name not in names:
            continue
        if definition.internal and name not in overrides:
            continue
        broker_entry = None  # a config without a broker synonym has Kafka's fixed default
        if definition.synonym is not None:
            broker_entry = describe_broker_configs(broker.config, [definition.synonym])[0]
        default = render(definition, default_value(broker.config, definition))
        value = overrides[name] if name in overrides else default  # stored rendered
        source = ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
        synonyms = []
        if include_synonyms:
            if name in overrides:
                synonyms.append(ConfigSynonym(name, value, ConfigSource.GROUP_CONFIG))
            if broker_entry is not None:
                synonyms.append(ConfigSynonym(definition.synonym, broker_entry.value,
                                              broker_entry.source))
        entries.append(ConfigEntry(name, value, source, False, False,
                                   ConfigType[definition.type],
                                   definition.doc if include_documentation else None, synonyms))
    return entries


def _with_source(entry: ConfigEntry, source: ConfigSource) -> ConfigEntry:
    from dataclasses import replace
    return replace(entry, source=source)


def _existing_topic(broker, name: str):
    problem = topic_name_problem(name)
    if problem is not None:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, problem)
    topic = broker.metadata.topic(name)
    if topic is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return topic


def _check_node_id(broker, name: str, allow_empty: bool) -> None:
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Node id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        expected = f"{broker.node_id} or empty string" if allow_empty else f"{broker.node_id}"
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Unexpected broker id, expected {expected}, but received {name}")


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------------

@handles("AlterConfigs")
async def handle_alter_configs(ctx, request):
    from kbroker.protocol.messages.alter_configs import AlterConfigsResponse as R

    def changes_of(resource):
        if resource.resource_type == BROKER_LOGGER:
            raise KafkaError(Errors.INVALID_REQUEST, "AlterConfigs does not support the resource "
                                                     "type BROKER_LOGGER; use "
                                                     "IncrementalAlterConfigs")
        configs = {}
        for c in resource.configs:
            if c.name in configs:
                raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            configs[c.name] = c.value
        return configs, True  # the whole set: keys not named go back to their defaults

    return R(throttle_time_ms=0,
             responses=await _alter(ctx, request, R.AlterConfigsResourceResponse, changes_of))


@handles("IncrementalAlterConfigs")
async def handle_incremental_alter_configs(ctx, request):
    from kbroker.protocol.messages.incremental_alter_configs import \
        IncrementalAlterConfigsResponse as R

    def changes_of(resource):
        ops = {}
        for c in resource.configs:
            if c.name in ops:
                raise KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            if c.config_operation not in OPERATIONS:
                raise KafkaError(Errors.INVALID_REQUEST,
                                 f"Unknown operation type {c.config_operation}")
            if c.value is None and c.config_operation != DELETE:
                raise KafkaError(Errors.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            ops[c.name] = (c.config_operation, c.value)
        return ops, False

    return R(throttle_time_ms=0,
             responses=await _alter(ctx, request, R.AlterConfigsResourceResponse, changes_of))


async def _alter(ctx, request, Result, changes_of) -> list:
    broker = ctx
    keys = [(r.resource_type, r.resource_name) for r in request.resources]
    responses, reported = [], set()
    for resource, key in zip(request.resources, keys):
        if key in reported:  # a duplicated resource is answered once
            continue
        out = Result(error_code=Errors.NONE.code, error_message=None,
                     resource_type=resource.resource_type, resource_name=resource.resource_name)
        responses.append(out)
        try:
            if keys.count(key) > 1:
                reported.add(key)
                raise KafkaError(Errors.INVALID_REQUEST, "Duplicate resource.")
            check_configs(ctx, Op.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            changes, replace_all = changes_of(resource)
            await _apply(broker, resource, changes, replace_all, request.validate_only)
        except KafkaError as exc:
            log.info("altering configs of resource %d/%r for %s failed: %s",
                     resource.resource_type, resource.resource_name, ctx.client_id, exc)
            out.error_code, out.error_message = exc.code, exc.message
    return responses


async def _apply(broker, resource, changes: dict, replace_all: bool, validate_only: bool) -> None:
    kind, name = resource.resource_type, resource.resource_name
    if kind == TOPIC:
        topic = _existing_topic(broker, name)
        if replace_all:
            new = {k: v for k, v in changes.items() if v is not None}
        else:
            new = _incremental(TopicConfig(topic.configs, broker.config), topic.configs, changes)
        new = validate_overrides(broker.config, new)
        if validate_only or new == topic.configs:
            return
        await broker.controller.alter_topic_configs(name, new)
        log.info("configs of topic %s are now %s", name, new)
    elif kind == BROKER:
        if name != "":
            _check_node_id(broker, name, allow_empty=True)
        await _alter_broker(broker, name == "", changes, replace_all, validate_only)
    elif kind == BROKER_LOGGER:
        _check_node_id(broker, name, allow_empty=False)
        _alter_loggers(changes, validate_only)
    elif kind == GROUP and not replace_all:
        await _alter_group(broker, name, changes, validate_only)
    elif kind == CLIENT_METRICS:
        await client_metrics.alter(broker, name, changes, replace_all, validate_only)
    else:
        raise KafkaError(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")


async def _alter_group(broker, group_id: str, changes: dict, validate_only: bool) -> None:
    """IncrementalAlterConfigs on a GROUP (SET and DELETE; APPEND and SUBTRACT only for the
    LIST config streams.rack.aware.assignment.tags), through the controller: group configs are
    metadata (the image's ``group_configs``), stored as Kafka renders them."""
    from kbroker.coordinator.group import group_configs
    if not group_id:
        raise KafkaError(Errors.INVALID_REQUEST, "Group name must not be empty")

    def decide(current: dict) -> dict:
        new = dict(current)
        for key, (op, value) in changes.items():
            if op == SET:
                new[key] = value
            elif op == DELETE:
                new.pop(key, None)
            else:
                definition = group_configs.GROUP_CONFIGS.get(key)
                if definition is None or definition.type != group_configs.LIST:
                    raise KafkaError(Errors.INVALID_CONFIG, f"Can't {OPERATIONS[op]} to key "
                                                            f"{key} because its type is not LIST.")
                items = [v for v in new.get(key, group_configs.render(
                    definition, group_configs.default_value(broker.config, definition)))
                    .split(",") if v]
                for item in (value or "").split(","):
                    if op == APPEND and item and item not in items:
                        items.append(item)
                    elif op == SUBTRACT and item in items:
                        items.remove(item)
                new[key] = ",".join(items)
        checked = group_configs.check(broker.config, new)
        return {name: group_configs.render(group_configs.GROUP_CONFIGS[name], value)
                for name, value in checked.items()}

    await broker.controller.alter_group_configs(group_id, decide, validate_only)


def _incremental(effective: TopicConfig, overrides: dict, ops: dict) -> dict:
    new = dict(overrides)
    for key, (op, value) in ops.items():
        if op == SET:
            new[key] = value
        elif op == DELETE:
            new.pop(key, None)
        else:
            definition = TOPIC_CONFIGS.get(key)
            if definition is None or definition.type != ConfigType.LIST:
                raise KafkaError(Errors.INVALID_CONFIG, f"Can't {OPERATIONS[op]} to key {key} "
                                                        "because its type is not LIST.")
            current = list(effective.get(key)) if key not in new else \
                [v for v in new[key].split(",") if v]
            for item in value.split(","):
                if op == APPEND and item not in current:
                    current.append(item)
                elif op == SUBTRACT and item in current:
                    current.remove(item)
            new[key] = ",".join(current)
    return new


async def _alter_broker(broker, cluster_default: bool, changes: dict, replace_all: bool,
                  validate_only: bool) -> None:
    config = broker.config
    current = config.dynamic_configs(cluster_default=cluster_default)
    if replace_all:
        new = {k: v for k, v in changes.items() if v is not None}
    else:
        new = dict(current)
        for key, (op, value) in changes.items():
            if op == SET:
                new[key] = value
            elif op == DELETE:
                new.pop(key, None)
            else:
                definition = BROKER_CONFIGS.get(key)
                if definition is None or definition.type != ConfigType.LIST:
                    raise KafkaError(Errors.INVALID_CONFIG, f"Can't {OPERATIONS[op]} to key {key} "
                                                            "because its type is not LIST.")
                items = [v for v in new.get(key, "").split(",") if v] if key in new else \
                    list(config.get(key) or [])
                for item in value.split(","):
                    if op == APPEND and item not in items:
                        items.append(item)
                    elif op == SUBTRACT and item in items:
                        items.remove(item)
                new[key] = ",".join(items)
    changed = {k: new.get(k) for k in new.keys() | current.keys() if new.get(k) != current.get(k)}
    try:
        check_update(config, changed, cluster_default)
    except DynamicUpdateError as exc:
        raise KafkaError(Errors.INVALID_REQUEST, str(exc)) from None
    if validate_only:
        return
    try:
        apply_dynamic(config, current, new, cluster_default)
    except ConfigError as exc:  # a cross-key check failed: put the layer back as it was
        apply_dynamic(config, config.dynamic_configs(cluster_default=cluster_default), current,
                       cluster_default)
        raise KafkaError(Errors.INVALID_CONFIG, str(exc)) from None
    # Kept in the metadata store, like Kafka's dynamic configs, so a restart keeps them (with the
    # client-metrics subscriptions stored beside the cluster default's).
    stored = dict(new)
    if cluster_default:
        stored.update(client_metrics.subscriptions_kept(broker.metadata))
    try:
        await broker.controller.alter_broker_configs(stored, cluster_default=cluster_default)
    except KafkaError:  # not stored: the change is refused, so this broker does not keep it
        apply_dynamic(config, config.dynamic_configs(cluster_default=cluster_default), current,
                       cluster_default)
        raise
    log.info("dynamic %s broker configs are now %s",
             "cluster-default" if cluster_default else "per-broker", new)


# --- loggers (BROKER_LOGGER) -------------------------------------------------------------------

# Kafka (log4j) level names and the Python levels they map to.
LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
          "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG,
          "TRACE": 5, "ALL": 1}
ROOT_LOGGER = "root"


def _level_name(level: int) -> str:
    for name, value in sorted(LEVELS.items(), key=lambda kv: kv[1]):
        if level <= value:
            return name
    return "OFF"


def _loggers() -> dict:
    found = {ROOT_LOGGER: logging.getLogger()}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if name.startswith("kbroker") and isinstance(logger, logging.Logger):
            found[name] = logger
    return found


def _describe_loggers(names) -> list:
    entries = []
    for name, logger in _loggers().items():
        if names is not None and name not in names:
            continue
        entries.append(ConfigEntry(name=name, value=_level_name(logger.getEffectiveLevel()),
                                   source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                                   is_sensitive=False, read_only=False,
                                   config_type=ConfigType.STRING, documentation=None))
    return entries


def _alter_loggers(ops: dict, validate_only: bool) -> None:
    known = _loggers()
    for name, (op, value) in ops.items():
        if name not in known:
            raise KafkaError(Errors.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == SET and value.upper() not in LEVELS:
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"Cannot set the log level of {name} to {value} as it is not a "
                             f"supported log level. Valid log4j levels are {', '.join(LEVELS)}")
        if op in (APPEND, SUBTRACT):
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"{OPERATIONS[op]} operation is not allowed for the BROKER_LOGGER "
                             "resource")
        if op == DELETE and name == ROOT_LOGGER:
            raise KafkaError(Errors.INVALID_REQUEST, "Removing the log level of the root logger "
                                                     "is not allowed")
    if validate_only:
        return
    for name, (op, value) in ops.items():
        logger = known[name]
        if op == SET:
            logger.setLevel(LEVELS[value.upper()])
        else:
            logger.setLevel(logging.NOTSET)  # back to the parent's (root's) level
        log.info("log level of %s is now %s", name, _level_name(logger.getEffectiveLevel()))
