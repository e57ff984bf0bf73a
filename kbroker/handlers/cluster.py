"""DescribeCluster (key 60), v0-2 (KIP-700).

A single node: it is the only broker and the controller, and is never fenced. A cluster
(ZooKeeper): every live broker (registered in ``/brokers/ids``) with its rack and its endpoint
on the request's listener, and the active controller (-1 while none is elected).
- v1+ ``endpoint_type`` (KIP-919): 1 asks for brokers, the only kind served here. As Kafka's
  AuthHelper: 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, any other value
  UNSUPPORTED_ENDPOINT_TYPE; the refusal carries only the code and message.
- v2 ``include_fenced_brokers`` (KIP-1073) changes nothing: no broker is ever fenced.
- Authorized operations are not computed (no ACLs): ``cluster_authorized_operations`` is
  Kafka's "not requested" value, -2147483648, even when asked for.
The host and port are the advertised ones of the listener the request came in on.
"""

from __future__ import annotations

from kbroker.handlers import handles
from kbroker.handlers.metadata import broker_endpoint
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import ResourceType, authorized_operations

NOT_REQUESTED = -(2**31)
BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@handles("DescribeCluster")
def handle_describe_cluster(ctx, request):
    from kbroker.protocol.messages.describe_cluster import DescribeClusterResponse as R

    endpoint_type = request.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT
    if endpoint_type not in (BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT):
        return R(error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE.code,
                 error_message=f"Unsupported endpoint type {endpoint_type}", cluster_id="")
    if endpoint_type == CONTROLLERS_ENDPOINT:
        return R(error_code=Errors.MISMATCHED_ENDPOINT_TYPE.code,
                 error_message="The request was sent to an endpoint of type BROKER, but we "
                               "wanted an endpoint of type CONTROLLER", cluster_id="")
    response = R(throttle_time_ms=0, error_code=Errors.NONE.code, error_message=None,
                 endpoint_type=BROKERS_ENDPOINT, cluster_id=ctx.metadata.cluster_id,
                 controller_id=ctx.node_id, brokers=[],
                 cluster_authorized_operations=authorized_operations(ctx, ResourceType.CLUSTER)
                 if request.include_cluster_authorized_operations else NOT_REQUESTED)
    image = ctx.metadata
    if image.brokers:
        response.controller_id = image.controller_id if image.controller_id is not None else -1
        for broker in image.brokers.values():
            endpoint = broker_endpoint(broker, ctx.listener)
            if endpoint is not None:
                response.brokers.append(R.DescribeClusterBroker(
                    broker_id=broker.node_id, host=endpoint[0], port=endpoint[1],
                    rack=broker.rack, is_fenced=False))
        return response
    host, port = ctx.advertised_endpoint()
    response.brokers.append(R.DescribeClusterBroker(broker_id=ctx.node_id, host=host,
                                                    port=port, rack=ctx.cluster.rack,
                                                    is_fenced=False))
    return response

