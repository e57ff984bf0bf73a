"""ApiVersions (key 18), v0-5.

Advertises exactly what the handler registry serves, with the ranges of our manifest. Quirks:
- KIP-511: a version newer than we know is answered in v0 format with UNSUPPORTED_VERSION and our
  ranges (done in the dispatcher, before decoding); the response header is always v0.
- v3+ carries the client's software name and version; Kafka rejects values that do not match
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` with INVALID_REQUEST, and so do we.
- v5 (KIP-1242, misrouted connections): a client that knows which broker it meant to reach sends
  that broker's cluster id and node id. Both must be given or neither (INVALID_REQUEST); a cluster
  id or node id other than ours is REBOOTSTRAP_REQUIRED, and the client rebootstraps. An error
  answer carries nothing else (no ranges, no features, epoch -1), as Kafka's; the connection
  stays open.
- Produce is advertised from v0 although v0-2 are rejected (KAFKA-18659: librdkafka stops
  compressing when it does not see v0 advertised). That range lives in schemas/manifest.json.
- v3+ carries the supported and finalized feature flags of :mod:`kbroker.handlers.features`
  (``metadata.version``, ``transaction.version``, finalized at 2 unless UpdateFeatures changed it).
"""

from __future__ import annotations

import re

from kbroker.handlers import HANDLERS, handles
from kbroker.handlers.features import finalized_epoch, finalized_features, supported_features
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages import ADVERTISED

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_api_versions(response_cls) -> list:
    return [
        response_cls.ApiVersion(api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in sorted(ADVERTISED.items())
        if key in HANDLERS
    ]


def _request_error(ctx, request) -> Errors:
    if ctx.api_version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name or "")
        and _SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        return Errors.INVALID_REQUEST
    if ctx.api_version >= 5:
        # -1 and null are "not given" (the fields' defaults).
        given = (request.cluster_id is not None, request.node_id != -1)
        if given == (True, True):
            if (request.cluster_id, request.node_id) != (ctx.metadata.cluster_id, ctx.node_id):
                return Errors.REBOOTSTRAP_REQUIRED
        elif any(given):
            return Errors.INVALID_REQUEST
    return Errors.NONE


@handles("ApiVersions")
def handle_api_versions(ctx, request):
    from kbroker.protocol.messages.api_versions import ApiVersionsResponse

    error = _request_error(ctx, request)
    if error is not Errors.NONE:
        return ApiVersionsResponse(error_code=error.code, throttle_time_ms=0)
    return ApiVersionsResponse(
        error_code=error.code,
        api_keys=supported_api_versions(ApiVersionsResponse),
        throttle_time_ms=0,
        supported_features=supported_features(ApiVersionsResponse, ctx.api_version),
        finalized_features_epoch=finalized_epoch(ctx),
        finalized_features=finalized_features(ApiVersionsResponse, ctx),
    )
