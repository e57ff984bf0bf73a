"""Client telemetry (KIP-714): GetTelemetrySubscriptions (key 71) v0, PushTelemetry (key 72) v0,
ListConfigResources (key 74) v0-1, and the CLIENT_METRICS (16) config resource of
DescribeConfigs / AlterConfigs / IncrementalAlterConfigs.

- GetTelemetrySubscriptions and PushTelemetry are answered by the broker's
  :class:`~kbroker.telemetry.manager.ClientMetricsManager` (its docstring has Kafka's rules and
  errors). Kafka advertises them only when a telemetry exporter plugin is configured; kbroker
  always has one (its console and ``/metrics``), so it always advertises them.
- ListConfigResources: v0 lists client-metrics subscriptions only (the API was
  ListClientMetricsResources); v1 (KIP-1142) lists the types asked for, or every type it knows
  when none is named (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP); a type outside those
  is UNSUPPORTED_VERSION. GROUP lists the groups that have group configs (the image's, first, as
  Kafka lists its GroupConfigManager's ids). Needs DESCRIBE_CONFIGS on the cluster
  (CLUSTER_AUTHORIZATION_FAILED).
- CLIENT_METRICS resources (``kafka-client-metrics.sh``, ``kafka-configs.sh --entity-type
  client-metrics``): keys ``metrics``, ``interval.ms`` and ``match``, checked against the whole
  resulting set as Kafka's ``ClientMetricsConfigs.validate`` does (an unknown key or an interval
  outside 100 ms..1 h is INVALID_REQUEST; a bad value or match pattern INVALID_CONFIG; APPEND and
  SUBTRACT are INVALID_CONFIG "Can't APPEND to key K because its type is not LIST.", even for the
  list keys, as Kafka 4.4.0's controller answers, its config schema lacking this type). Describing
  a subscription that does not exist lists the defaults, as Kafka does; an empty name is
  INVALID_REQUEST. Deleting every key removes the subscription.

Storage: Kafka keeps a subscription as a config resource in its metadata. kbroker's controller
has no resource type for it (yet), so each subscription is one entry of the cluster-wide dynamic
broker configs (``/config/brokers/<default>`` in ZooKeeper), key ``kbroker.client.metrics:NAME``,
value the resource's configs as JSON, written through ``Controller.alter_broker_configs``.
:func:`broker_configs_only` keeps those entries out of the broker's settings, and
:class:`ClientMetricsFollower` hands every change (from this broker or, in a cluster, another) to
the manager.
"""

from __future__ import annotations

import json
import logging

from kbroker.config import ConfigEntry, ConfigSource, ConfigSynonym, ConfigType
from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, check
from kbroker.telemetry import subscriptions
from kbroker.telemetry.stored import (PREFIX, broker_configs_only,  # noqa: F401
                                      stored_subscriptions, subscriptions_kept)
from kbroker.telemetry.manager import ClientInfo

log = logging.getLogger("kbroker.configs")

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TYPES = {subscriptions.METRICS: ConfigType.LIST, subscriptions.INTERVAL_MS: ConfigType.INT,
          subscriptions.MATCH: ConfigType.LIST}


# --- DescribeConfigs and (Incremental)AlterConfigs of CLIENT_METRICS ---------------------------

def describe(ctx, name: str, names, include_synonyms: bool, include_documentation: bool) -> list:
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Client metrics subscription name must not be "
                                                 "empty")
    overrides = stored_subscriptions(ctx.metadata).get(name, {})
    entries = []
    for key in subscriptions.NAMES:
        if names is not None and key not in names:
            continue
        value = _canonical(key, overrides.get(key, subscriptions.DEFAULTS[key]))
        synonyms = [ConfigSynonym(key, value, ConfigSource.CLIENT_METRICS_CONFIG)] \
            if key in overrides else []
        entries.append(ConfigEntry(
            name=key, value=value,
            source=ConfigSource.CLIENT_METRICS_CONFIG if key in overrides else
            ConfigSource.DEFAULT_CONFIG,
            is_sensitive=False, read_only=False, config_type=_TYPES[key],
            documentation=subscriptions.DOCUMENTATION[key] if include_documentation else None,
            synonyms=synonyms if include_synonyms else []))
    return entries


def _canonical(key: str, value: str) -> str:
    """As Kafka shows a parsed value: lists joined by ',' without spaces (each item once), ints
    as numbers."""
    if _TYPES[key] is ConfigType.LIST:
        items = [item.strip() for item in value.split(",")] if value.strip() else []
        return ",".join(dict.fromkeys(items))
    return str(int(value.strip()))


async def alter(ctx, name: str, changes: dict, replace_all: bool, validate_only: bool) -> None:
    current = stored_subscriptions(ctx.metadata).get(name, {})
    if replace_all:
        new = {k: v for k, v in changes.items() if v is not None}
    else:
        new = dict(current)
        for key, (op, value) in changes.items():
            if op == SET:
                new[key] = value
            elif op == DELETE:
                new.pop(key, None)
            else:  # Kafka's controller knows no LIST key of this resource type
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {key} "
                                 f"because its type is not LIST.")
    subscriptions.validate(name, new)
    if validate_only or new == current:
        return
    configs = ctx.metadata.broker_configs(cluster_default=True)
    key = PREFIX + name
    if new:
        configs[key] = json.dumps(new, sort_keys=True)
    else:
        configs.pop(key, None)
    await ctx.controller.alter_broker_configs(configs, cluster_default=True)
    log.info("client metrics subscription %s is now %s", name, new or "gone")


# --- ListConfigResources ------------------------------------------------------------------------

@handles("ListConfigResources")
def handle_list_config_resources(ctx, request):
    from kbroker.protocol.messages.list_config_resources import ListConfigResourcesResponse as R

    try:
        check(ctx, Op.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
    except KafkaError as exc:
        return R(error_code=exc.code)
    supported = {CLIENT_METRICS} if ctx.api_version == 0 else \
        {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}
    wanted = set(request.resource_types or ()) or supported
    if not wanted <= supported:
        return R(error_code=Errors.UNSUPPORTED_VERSION.code)
    found = []
    if GROUP in wanted:
        found += [(name, GROUP) for name in sorted(ctx.metadata.group_configs)]
    if CLIENT_METRICS in wanted:
        found += [(name, CLIENT_METRICS) for name in sorted(stored_subscriptions(ctx.metadata))]
    nodes = sorted(ctx.metadata.brokers) or [ctx.node_id]
    if BROKER_LOGGER in wanted:
        found += [(str(node), BROKER_LOGGER) for node in nodes]
    if BROKER in wanted:
        found += [(str(node), BROKER) for node in nodes]
    if TOPIC in wanted:
        found += [(name, TOPIC) for name in sorted(ctx.metadata.topics())]
    return R(error_code=0, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=kind) for name, kind in found])


# --- GetTelemetrySubscriptions and PushTelemetry ------------------------------------------------

def _client_info(ctx) -> ClientInfo:
    connection = ctx.connection
    software = getattr(connection, "client_software", None) or (None, None)
    return ClientInfo(ctx.client_id, software[0], software[1],
                      None if ctx.client_host == "?" else ctx.client_host,
                      getattr(connection, "port", None))


@handles("GetTelemetrySubscriptions")
def handle_get_telemetry_subscriptions(ctx, request):
    return ctx.client_metrics.get_subscriptions(request, _client_info(ctx), ctx.connection)


@handles("PushTelemetry")
def handle_push_telemetry(ctx, request):
    return ctx.client_metrics.push(request, _client_info(ctx), ctx.connection)
