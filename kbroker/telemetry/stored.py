"""Where client-metrics subscriptions are kept, and the image listener that follows them.

Kafka keeps a subscription as a CLIENT_METRICS config resource; kbroker stores each one beside
the cluster-default dynamic broker configs, under ``kbroker.client.metrics:<name>`` (a JSON
object of its configs), so that both modes' metadata stores carry them with no new record type.
:class:`ClientMetricsFollower` hands the stored subscriptions to the
:class:`~kbroker.telemetry.manager.ClientMetricsManager` whenever they change in the image.
"""

from __future__ import annotations

import json
import logging

from kbroker.protocol.errors import KafkaError
from kbroker.telemetry import subscriptions

log = logging.getLogger("kbroker.telemetry")

PREFIX = "kbroker.client.metrics:"


def stored_subscriptions(image) -> dict[str, dict]:
    """Subscription name -> its configs, from the metadata image."""
    found = {}
    for key, value in image.broker_configs(cluster_default=True).items():
        if key.startswith(PREFIX):
            try:
                found[key[len(PREFIX):]] = dict(json.loads(value))
            except (ValueError, TypeError):
                log.warning("ignoring the unreadable client metrics subscription %r", key)
    return found


def broker_configs_only(configs: dict) -> dict:
    """Dynamic broker configs without the subscriptions kept beside them."""
    return {k: v for k, v in configs.items() if not k.startswith(PREFIX)}


def subscriptions_kept(image) -> dict:
    """The entries holding subscriptions, to write back with a change of broker configs."""
    return {k: v for k, v in image.broker_configs(cluster_default=True).items()
            if k.startswith(PREFIX)}


class ClientMetricsFollower:
    """Image listener: subscriptions, as stored, become the manager's."""

    def __init__(self, manager):
        self.manager = manager

    def apply(self, old, new, delta=None):
        """``old`` None: the subscriptions stored so far (at start-up)."""
        if old is None or (delta.broker_configs and old.broker_configs(cluster_default=True)
                           != new.broker_configs(cluster_default=True)):
            parsed = {}
            for name, configs in stored_subscriptions(new).items():
                try:
                    subscription = subscriptions.validate(name, configs)
                except KafkaError as exc:
                    log.warning("client metrics subscription %r not applied: %s", name, exc)
                    continue
                if subscription is not None:
                    parsed[name] = subscription
            self.manager.set_subscriptions(parsed)
        return iter(())
