"""Dynamic broker configs kept in the metadata (AlterConfigs on a BROKER resource): put back into
this broker's :class:`~kbroker.config.BrokerConfig` at start-up, and followed when they change
through the metadata (an image listener).
"""

from __future__ import annotations

import logging

from kbroker.config import ConfigError
from kbroker.telemetry.stored import broker_configs_only

log = logging.getLogger("kbroker.configs")


def apply_dynamic(config, current: dict, new: dict, cluster_default: bool) -> None:
    for key in current.keys() - new.keys():
        config.set_dynamic(key, None, cluster_default=cluster_default)
    for key, value in new.items():
        config.set_dynamic(key, value, cluster_default=cluster_default)


def restore_dynamic_configs(config, store) -> None:
    """At start-up: re-apply the dynamic broker configs the metadata store kept."""
    for cluster_default in (True, False):
        stored = broker_configs_only(store.broker_configs(cluster_default=cluster_default))
        apply_dynamic(config, {}, stored, cluster_default)


class DynamicConfigFollower:
    """Dynamic broker configs that reach the image from elsewhere (in cluster mode, another
    broker's AlterConfigs of the cluster default, or of this broker's own /config/brokers/N)
    become this broker's settings, as Kafka's brokers follow /config/changes. Subscribed before
    the replica manager, which re-derives topic settings from them. A change made here was
    applied before it was stored, so its own image is no change at all."""

    def __init__(self, config):
        self.config = config

    def apply(self, old, new, delta):
        if delta.broker_configs and old.dynamic_broker_configs != new.dynamic_broker_configs:
            for cluster_default in (True, False):
                current = self.config.dynamic_configs(cluster_default=cluster_default)
                wanted = broker_configs_only(
                    new.broker_configs(cluster_default=cluster_default))
                if current == wanted:
                    continue
                try:
                    apply_dynamic(self.config, current, wanted, cluster_default)
                except ConfigError as exc:
                    apply_dynamic(self.config,
                                   self.config.dynamic_configs(cluster_default=cluster_default),
                                   current, cluster_default)
                    log.warning("dynamic %s broker configs from the metadata not applied: %s",
                                "cluster-default" if cluster_default else "per-broker", exc)
                    continue
                log.info("dynamic %s broker configs are now %s (from the metadata)",
                         "cluster-default" if cluster_default else "per-broker", wanted)
        return iter(())
