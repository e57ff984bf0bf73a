"""Feature flags (KIP-584): what ApiVersions v3+ advertises, and UpdateFeatures (key 57), v0-2.

kbroker supports exactly one level of each feature it lists, and that level is finalized:
- ``metadata.version`` 30 (Apache Kafka 4.3.1's level): Java's admin tools read it
  (``kafka-features.sh describe``); clients do not gate anything on it.
- ``transaction.version`` 1: transactions v1 (EndTxn up to v4, AddPartitionsToTxn from the
  client). Level 2 (KIP-890 part 2: EndTxn v5 with an epoch bump per transaction and implicit
  AddPartitions from Produce) is not implemented, so a Java or librdkafka producer keeps to v1.
Not listed (their APIs are not served): ``group.version`` (KIP-848 consumer groups),
``share.version``, ``streams.version``, ``eligible.leader.replicas.version``, ``kraft.version``.
Kafka 4.3.1 lists them too, finalized.

The finalized epoch is constant: no level can change, so clients never need to see a newer one.
ApiVersions v3 leaves out supported features whose minimum is 0 (Kafka: older clients fail on
them); ours have none.

UpdateFeatures answers as Kafka's controller does: without ALTER on the cluster it is
CLUSTER_AUTHORIZATION_FAILED (top level, no results); an update to the finalized level succeeds
(nothing changes; ``validate_only`` is the same), any other level or an unknown feature fails the
whole request with INVALID_UPDATE_VERSION and Kafka's message. v0-1 list each feature's result
(message "NONE" on success, no results on failure); v2 answers only the top-level error.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors

log = logging.getLogger("kbroker.features")

# name -> (min supported, max supported, finalized level); one level each (see above).
FEATURES = {
    "metadata.version": (30, 30, 30),
    "transaction.version": (1, 1, 1),
}
FINALIZED_FEATURES_EPOCH = 1


def supported_features(response_cls, api_version: int) -> list:
    return [response_cls.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi, _) in FEATURES.items() if api_version >= 4 or lo > 0]


def finalized_features(response_cls) -> list:
    return [response_cls.FinalizedFeatureKey(name=name, min_version_level=level,
                                             max_version_level=level)
            for name, (_, _, level) in FEATURES.items()]


def _check(update, node_id: int) -> str | None:
    """Kafka's error message for one feature update, None when it is accepted."""
    known = FEATURES.get(update.feature)
    prefix = (f"Invalid update version {update.max_version_level} for feature "
              f"{update.feature}. Local controller {node_id}")
    if known is None:
        return f"{prefix} does not support this feature."
    lo, hi, _ = known
    if not lo <= update.max_version_level <= hi:
        return f"{prefix} only supports versions {lo}-{hi}"
    return None


@handles("UpdateFeatures")
def handle_update_features(ctx, request):
    from kbroker.protocol.messages.update_features import UpdateFeaturesResponse as R
    from kbroker.security.authorizer import Op, ResourceType, allowed

    if not allowed(ctx, Op.ALTER, ResourceType.CLUSTER):  # Kafka's controller checks it first
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code,
                 error_message="Cluster authorization failed.", results=[])
    for update in request.feature_updates:
        message = _check(update, ctx.node_id)
        if message is not None:
            log.info("UpdateFeatures from %s refused: %s", ctx.client_id, message)
            return R(throttle_time_ms=0, error_code=Errors.INVALID_UPDATE_VERSION.code,
                     error_message="The update failed for all features since the following "
                                   f"feature had an error: {message}", results=[])
    results = [] if ctx.api_version >= 2 else [
        R.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message="NONE")
        for u in request.feature_updates]
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)
