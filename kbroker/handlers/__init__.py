"""Request handlers: one thin module per API (or API family), registered by api key.

A handler is ``handle(ctx, request) -> response | awaitable | None``: it gets the decoded request and
a :class:`~kbroker.server.dispatch.RequestContext`, and returns the response object, an awaitable
of it (long-poll fetch, produce with acks=all), or None when no response is sent (acks=0).

One registry drives both dispatch and ApiVersions: ``@handles("Produce")`` registers a handler; the
version range it serves is the one our manifest advertises (schemas/manifest.json, generated into
``kbroker.protocol.messages.ADVERTISED``). :func:`load_all` (tests/server/test_dispatch.py)
fails if the two disagree, so an API is never advertised without a handler, nor handled without
being advertised.
"""

from __future__ import annotations

import importlib

from kbroker.protocol.messages import ADVERTISED, API_BY_KEY, API_KEY_BY_NAME


# The module holding each API's handler. A module registers its handlers when imported, which
# happens on its first request (the broker starts without the code and the message classes of
# the APIs nobody calls); :func:`load_all` imports them all and checks this table.
MODULES = {
    "api_versions": ("ApiVersions",),
    "features": ("UpdateFeatures",),
    "metadata": ("Metadata",),
    "produce": ("Produce",),
    "fetch": ("Fetch",),
    "list_offsets": ("ListOffsets",),
    "offset_for_leader_epoch": ("OffsetForLeaderEpoch",),
    "init_producer_id": ("InitProducerId",),
    "topics": ("CreateTopics", "DeleteTopics", "CreatePartitions"),
    "configs": ("DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs"),
    "delete_records": ("DeleteRecords",),
    "cluster": ("DescribeCluster",),
    "describe_topic_partitions": ("DescribeTopicPartitions",),
    "elect_leaders": ("ElectLeaders",),
    "reassignments": ("AlterPartitionReassignments", "ListPartitionReassignments"),
    "log_dirs": ("DescribeLogDirs", "AlterReplicaLogDirs"),
    "find_coordinator": ("FindCoordinator",),
    "groups": (
        "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "DescribeGroups", "ListGroups",
        "DeleteGroups",
    ),
    "offsets": ("OffsetCommit", "OffsetFetch", "OffsetDelete"),
    "consumer_group_heartbeat": ("ConsumerGroupHeartbeat",),
    "consumer_group_describe": ("ConsumerGroupDescribe",),
    "streams_group_heartbeat": ("StreamsGroupHeartbeat",),
    "streams_group_describe": ("StreamsGroupDescribe",),
    "streams_group_topology_description_update": ("StreamsGroupTopologyDescriptionUpdate",),
    "share_group_heartbeat": ("ShareGroupHeartbeat",),
    "share_group_describe": ("ShareGroupDescribe",),
    "share_group_offsets": (
        "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets",
    ),
    "add_partitions_to_txn": ("AddPartitionsToTxn",),
    "add_offsets_to_txn": ("AddOffsetsToTxn",),
    "end_txn": ("EndTxn",),
    "write_txn_markers": ("WriteTxnMarkers",),
    "txn_offset_commit": ("TxnOffsetCommit",),
    "describe_transactions": ("DescribeTransactions",),
    "list_transactions": ("ListTransactions",),
    "describe_producers": ("DescribeProducers",),
    "sasl": ("SaslHandshake", "SaslAuthenticate"),
    "scram_credentials": ("DescribeUserScramCredentials", "AlterUserScramCredentials"),
    "delegation_tokens": (
        "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken",
        "DescribeDelegationToken",
    ),
    "acls": ("CreateAcls", "DescribeAcls", "DeleteAcls"),
    "client_quotas": ("DescribeClientQuotas", "AlterClientQuotas"),
    "client_metrics": ("ListConfigResources", "GetTelemetrySubscriptions", "PushTelemetry"),
    "share_group_state": (
        "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
        "DeleteShareGroupState", "ReadShareGroupStateSummary",
    ),
    "share_fetch": ("ShareFetch",),
    "share_acknowledge": ("ShareAcknowledge",),
}
MODULE_OF_KEY = {API_KEY_BY_NAME[api]: module for module, apis in MODULES.items() for api in apis}


class Handlers(dict):
    """api key -> handler, each handler module imported on the first request of one of its APIs.

    ``in`` answers from the table (what is served), without importing anything."""

    def __missing__(self, api_key):
        module = MODULE_OF_KEY.get(api_key)
        if module is None:
            raise KeyError(api_key)
        importlib.import_module(f"{__name__}.{module}")
        return dict.__getitem__(self, api_key)

    def __contains__(self, api_key) -> bool:
        return api_key in MODULE_OF_KEY

    def get(self, api_key, default=None):
        return self[api_key] if api_key in self else default


HANDLERS = Handlers()


def handles(api_name: str, eager: bool = False):
    """Register the decorated function as the handler of ``api_name`` (e.g. "Produce").

    ``eager``: the dispatcher runs the handler's coroutine at once, in the read callback, up to
    its first real suspension; one that never suspends (the usual case) is answered without a
    task and its response written in the same callback. For a coroutine that may run outside a
    task until it first waits (it must not use ``asyncio.timeout`` or ``current_task`` before
    then); others get a task, as before."""
    api_key = API_KEY_BY_NAME[api_name]

    def register(fn):
        if dict.__contains__(HANDLERS, api_key):
            raise RuntimeError(f"two handlers registered for {api_name} (api key {api_key})")
        HANDLERS[api_key] = fn
        if eager:
            fn.eager = True
        return fn

    return register


def load() -> dict:
    """The registry, each handler module imported on its first request."""
    return HANDLERS


def load_all() -> dict:
    """Import every handler module and check the registry against the table and the advertised
    manifest (tests/server/test_dispatch.py): an API is never advertised without a handler, nor
    handled without being advertised, nor registered by a module the table does not name."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
    registered = set(dict.keys(HANDLERS))
    misplaced = sorted(API_BY_KEY[k].name for k in registered ^ set(MODULE_OF_KEY))
    missing = sorted(API_BY_KEY[k].name for k in ADVERTISED if k not in registered)
    unadvertised = sorted(API_BY_KEY[k].name for k in registered if k not in ADVERTISED)
    if missing or unadvertised or misplaced:
        raise RuntimeError(f"handler registry and manifest disagree: advertised without a handler "
                           f"{missing}, handled but not advertised {unadvertised}, registered "
                           f"against the module table {misplaced}")
    return HANDLERS
