"""Feature flags (KIP-584): what ApiVersions v3+ advertises, and UpdateFeatures (key 57), v0-2.

- ``metadata.version`` 33 (``4.4-IV2``, the level a new Apache Kafka 4.4.0 cluster finalizes),
  the only level supported: Java's admin tools read it (``kafka-features.sh describe``); clients
  do not gate anything on it.
- ``transaction.version`` supported 0-2, finalized 2 as on a new Kafka 4.4.0 cluster. Clients
  read the finalized level: at 2 a Java 4.x producer uses transactions v2 (KIP-890 part 2: EndTxn
  v5, no AddPartitionsToTxn, Produce v12+); below 2 it keeps to v1. The broker serves both
  whatever the level (as Kafka). At 0 it is not listed as finalized (Kafka leaves out level-0
  features). A level set by UpdateFeatures is kept by the controller in the metadata store (the
  single node's metadata file; Kafka's ``/feature`` znode in cluster mode, read by every
  broker), so it survives restarts and every broker of a cluster answers the same.
- ``share.version`` supported 0-2, finalized 2 as on a new Kafka 4.4.0 cluster (KIP-932 share
  groups). At 0 the share-group APIs stay advertised but answer UNSUPPORTED_VERSION, as Kafka
  4.4.0's do (:func:`share_groups_enabled`); stored like ``transaction.version``.
- ``group.version`` supported 0-1, finalized 1 (KIP-848 consumer groups) and ``streams.version``
  supported 0-1, finalized 1 (KIP-1071 streams groups), as on a new Kafka 4.4.0 cluster. At 0
  ConsumerGroupHeartbeat/ConsumerGroupDescribe (StreamsGroupHeartbeat/StreamsGroupDescribe) stay
  advertised and answer UNSUPPORTED_VERSION, as Kafka's KafkaApis does when the protocol is
  off (:func:`consumer_groups_enabled`, :func:`streams_groups_enabled`; the broker setting
  ``group.coordinator.rebalance.protocols`` switches them off alike). Groups already there stay
  in the coordinator; their members get the error at their next heartbeat.
Not listed: ``eligible.leader.replicas.version`` and ``kraft.version`` (KRaft-only; kbroker's
cluster mode is ZooKeeper's).

The finalized epoch grows with every accepted change, so a client can tell a newer answer.
ApiVersions v3 leaves out supported features whose minimum is 0 (Kafka: older clients fail on
them), so v3 lists ``metadata.version`` only, as Kafka's.

UpdateFeatures answers as Kafka's controller does: without ALTER on the cluster it is
CLUSTER_AUTHORIZATION_FAILED (top level, no results); a level outside the supported range or an
unknown feature fails the whole request with INVALID_UPDATE_VERSION and Kafka's message; a lower
level needs ``upgrade_type`` SAFE_DOWNGRADE or UNSAFE_DOWNGRADE (v1+) or ``allow_downgrade``
(v0). ``validate_only`` checks without changing. v0-1 list each feature's result (message "NONE"
on success, no results on failure); v2 answers only the top-level error.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.metadata.store import StaleMetadataError
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.features")

METADATA_VERSION = 33
# name -> (min supported, max supported)
SUPPORTED = {
    "metadata.version": (METADATA_VERSION, METADATA_VERSION),
    "group.version": (0, 1),
    "share.version": (0, 2),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
}
# The levels a new Kafka 4.4.0 cluster finalizes.
DEFAULTS = {"group.version": 1, "share.version": 2, "streams.version": 1,
            "transaction.version": 2}
# The features UpdateFeatures may change (metadata.version has one level).
CHANGEABLE = tuple(DEFAULTS)
UPGRADE = 1


def _image(ctx):
    # A context built without broker services (dispatch tests) has no metadata.
    return getattr(ctx, "metadata", None)


def finalized_levels(ctx) -> dict[str, int]:
    """Every feature's finalized level (0 for a feature switched off)."""
    image = _image(ctx)
    levels = dict(image.finalized_features) if image is not None else {}
    return {"metadata.version": METADATA_VERSION,
            **{name: levels.get(name, default) for name, default in DEFAULTS.items()}}


def share_groups_enabled(ctx) -> bool:
    """Whether share groups are on (``share.version`` >= 1): the share-group APIs answer
    UNSUPPORTED_VERSION otherwise, as Kafka 4.4.0's do."""
    return finalized_levels(ctx)["share.version"] >= 1


def consumer_groups_enabled(ctx) -> bool:
    """Whether the consumer group protocol is on: ``group.version`` >= 1 and ``consumer`` in
    ``group.coordinator.rebalance.protocols`` (Kafka's isConsumerGroupProtocolEnabled)."""
    return finalized_levels(ctx)["group.version"] >= 1 and _protocol_on(ctx, "consumer")


def streams_groups_enabled(ctx) -> bool:
    """Whether the streams group protocol is on: ``streams.version`` >= 1 and ``streams`` in
    ``group.coordinator.rebalance.protocols``."""
    return finalized_levels(ctx)["streams.version"] >= 1 and _protocol_on(ctx, "streams")


def _protocol_on(ctx, protocol: str) -> bool:
    config = getattr(ctx, "config", None)
    return config is None or protocol in config.get("group.coordinator.rebalance.protocols")


def finalized_epoch(ctx) -> int:
    image = _image(ctx)
    return image.features_epoch if image is not None else 1


def supported_features(response_cls, api_version: int) -> list:
    return [response_cls.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in SUPPORTED.items() if api_version >= 4 or lo > 0]


def finalized_features(response_cls, ctx) -> list:
    return [response_cls.FinalizedFeatureKey(name=name, min_version_level=level,
                                             max_version_level=level)
            for name, level in finalized_levels(ctx).items() if level > 0]


def _check(ctx, update, downgrade_allowed: bool) -> str | None:
    """Kafka's error message for one feature update, None when it is accepted."""
    known = SUPPORTED.get(update.feature)
    level = update.max_version_level
    prefix = f"Invalid update version {level} for feature {update.feature}."
    if known is None:
        return f"{prefix} Local controller {ctx.node_id} does not support this feature."
    lo, hi = known
    if not lo <= level <= hi:
        return f"{prefix} Local controller {ctx.node_id} only supports versions {lo}-{hi}"
    if level < finalized_levels(ctx)[update.feature] and not downgrade_allowed:
        return (f"{prefix} Can't downgrade the version of this feature without setting the "
                f"upgrade type to either safe or unsafe downgrade.")
    return None


@handles("UpdateFeatures")
async def handle_update_features(ctx, request):
    from kbroker.protocol.messages.update_features import UpdateFeaturesResponse as R
    from kbroker.security.authorizer import Op, ResourceType, allowed

    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):  # Kafka's controller checks it first
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code,
                 error_message="Cluster authorization failed.", results=[])
    for update in request.feature_updates:
        downgrade = update.allow_downgrade if ctx.api_version == 0 \
            else update.upgrade_type != UPGRADE
        message = _check(ctx, update, downgrade)
        if message is not None:
            log.info("UpdateFeatures from %s refused: %s", ctx.client_id, message)
            return R(throttle_time_ms=0, error_code=Errors.INVALID_UPDATE_VERSION.code,
                     error_message="The update failed for all features since the following "
                                   f"feature had an error: {message}", results=[])
    if not (ctx.api_version >= 1 and request.validate_only):
        before = finalized_levels(ctx)
        levels = {u.feature: u.max_version_level for u in request.feature_updates
                  if u.feature in CHANGEABLE}
        try:
            await ctx.controller.update_features(levels)
        except StaleMetadataError as exc:
            log.info("UpdateFeatures from %s failed: %s", ctx.client_id, exc)
            return R(throttle_time_ms=0, error_code=Errors.FEATURE_UPDATE_FAILED.code,
                     error_message=str(exc), results=[])
        for name, level in levels.items():
            if before[name] != level:
                log.info("%s finalized at %d (was %d), asked by %s", name, level, before[name],
                         ctx.client_id)
    results = [] if ctx.api_version >= 2 else [
        R.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message="NONE")
        for u in request.feature_updates]
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)
