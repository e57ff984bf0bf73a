"""StreamsGroupTopologyDescriptionUpdate (key 93), v0 (KIP-1331): a streams group member pushes
its full topology description, for the broker's topology description plugin to store.

Kafka 4.4.0 hands the description to the StreamsGroupTopologyDescriptionPlugin of
``group.streams.topology.description.plugin.class`` and records the stored epoch in the group's
StreamsGroupMetadata record. The setting has no default: without a plugin the feature is off, no
heartbeat ever asks a member to push (TopologyDescriptionRequired stays false), and a push is
answered UNSUPPORTED_VERSION. kbroker loads no Java plugin classes (the setting is refused at
startup), so it is always in that state, answering as Kafka does: READ on the group first
(GROUP_AUTHORIZATION_FAILED), then UNSUPPORTED_VERSION with Kafka's message, before the request's
fields are validated or the group is looked up.
"""

from __future__ import annotations

import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors
from kbroker.security.authorizer import Op, ResourceType, allowed

log = logging.getLogger("kbroker.streams_group_topology_description_update")

NO_PLUGIN = "The broker has no streams group topology description plugin configured."


@handles("StreamsGroupTopologyDescriptionUpdate")
def handle_streams_group_topology_description_update(ctx, request):
    from kbroker.protocol.messages.streams_group_topology_description_update import \
        StreamsGroupTopologyDescriptionUpdateResponse as R

    if not allowed(ctx, Op.READ, ResourceType.GROUP, request.group_id):
        # Kafka leaves the message null when it is the code's standard one.
        return R(throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED.code,
                 error_message=None)
    log.info("StreamsGroupTopologyDescriptionUpdate of member %r of group %r (topology epoch "
             "%d) from %s: UNSUPPORTED_VERSION (no topology description plugin)",
             request.member_id, request.group_id, request.topology_epoch, ctx.client_id)
    return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_VERSION.code,
             error_message=NO_PLUGIN)
