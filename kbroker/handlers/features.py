"""Feature flags (KIP-584): what ApiVersions v3+ advertises, and UpdateFeatures (key 57), v0-2.

- ``metadata.version`` 30 (Apache Kafka 4.3.1's level), the only level supported: Java's admin
  tools read it (``kafka-features.sh describe``); clients do not gate anything on it.
- ``transaction.version`` supported 0-2, finalized 2 as on a new Kafka 4.3.1 cluster. Clients
  read the finalized level: at 2 a Java 4.x producer uses transactions v2 (KIP-890 part 2: EndTxn
  v5, no AddPartitionsToTxn, Produce v12+); below 2 it keeps to v1. The broker serves both
  whatever the level (as Kafka). The level lives in the transaction coordinator
  (``TransactionCoordinator.transaction_version``); at 0 it is not listed as finalized (Kafka
  leaves out level-0 features). It is kept in memory only: a restart finalizes 2 again.
Not listed (their APIs are not served): ``group.version`` (KIP-848 consumer groups),
``share.version``, ``streams.version``, ``eligible.leader.replicas.version``, ``kraft.version``.
Kafka 4.3.1 lists them too, finalized.

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
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.features")

METADATA_VERSION = 30
# name -> (min supported, max supported)
SUPPORTED = {
    "metadata.version": (METADATA_VERSION, METADATA_VERSION),
    "transaction.version": (0, 2),
}
DEFAULT_TRANSACTION_VERSION = 2
UPGRADE = 1


def _coordinator(ctx):
    # A context built without broker services (dispatch tests) has no coordinator.
    return getattr(ctx, "txn", None)


def finalized_levels(ctx) -> dict[str, int]:
    """Every feature's finalized level (0 for a feature switched off)."""
    txn = _coordinator(ctx)
    level = txn.transaction_version if txn is not None else DEFAULT_TRANSACTION_VERSION
    return {"metadata.version": METADATA_VERSION, "transaction.version": level}


def finalized_epoch(ctx) -> int:
    txn = _coordinator(ctx)
    return txn.features_epoch if txn is not None else 1


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
def handle_update_features(ctx, request):
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
        for update in request.feature_updates:
            if update.feature == "transaction.version" and _coordinator(ctx) is not None:
                if ctx.txn.transaction_version != update.max_version_level:
                    log.info("transaction.version finalized at %d (was %d), asked by %s",
                             update.max_version_level, ctx.txn.transaction_version,
                             ctx.client_id)
                ctx.txn.transaction_version = update.max_version_level
                ctx.txn.features_epoch += 1
    results = [] if ctx.api_version >= 2 else [
        R.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message="NONE")
        for u in request.feature_updates]
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)
