"""Request handlers: one thin module per API (or API family), registered by api key.

A handler is ``handle(ctx, request) -> response | awaitable | None``: it gets the decoded request and
a :class:`~kbroker.server.dispatch.RequestContext`, and returns the response object, an awaitable
of it (long-poll fetch, produce with acks=all), or None when no response is sent (acks=0).

One registry drives both dispatch and ApiVersions: ``@handles("Produce")`` registers a handler; the
version range it serves is the one our manifest advertises (schemas/manifest.json, generated into
``kbroker.protocol.messages.ADVERTISED``). :func:`load` fails if the two disagree, so an API is
never advertised without a handler, nor handled without being advertised.
"""

from __future__ import annotations

import importlib

from kbroker.protocol.messages import ADVERTISED, API_BY_KEY, API_KEY_BY_NAME

HANDLERS: dict = {}

# Modules holding handlers; each registers itself when imported.
MODULES = (
    "api_versions",
    "features",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "init_producer_id",
    "topics",
    "configs",
    "delete_records",
    "cluster",
    "elect_leaders",
    "reassignments",
    "log_dirs",
    "find_coordinator",
    "groups",
    "offsets",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "streams_group_heartbeat",
    "streams_group_describe",
    "streams_group_topology_description_update",
    "share_group_heartbeat",
    "share_group_describe",
    "share_group_offsets",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "sasl",
    "scram_credentials",
    "delegation_tokens",
    "acls",
    "client_quotas",
    "client_metrics",
    "share_group_state",
    "share_fetch",
    "share_acknowledge",
)


def handles(api_name: str, eager: bool = False):
    """Register the decorated function as the handler of ``api_name`` (e.g. "Produce").

    ``eager``: the dispatcher runs the handler's coroutine at once, in the read callback, up to
    its first real suspension; one that never suspends (the usual case) is answered without a
    task and its response written in the same callback. For a coroutine that may run outside a
    task until it first waits (it must not use ``asyncio.timeout`` or ``current_task`` before
    then); others get a task, as before."""
    api_key = API_KEY_BY_NAME[api_name]

    def register(fn):
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers registered for {api_name} (api key {api_key})")
        HANDLERS[api_key] = fn
        if eager:
            fn.eager = True
        return fn

    return register


def load() -> dict:
    """Import every handler module and check the registry against the advertised manifest."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
    missing = sorted(API_BY_KEY[k].name for k in ADVERTISED if k not in HANDLERS)
    unadvertised = sorted(API_BY_KEY[k].name for k in HANDLERS if k not in ADVERTISED)
    if missing or unadvertised:
        raise RuntimeError(f"handler registry and manifest disagree: advertised without a handler "
                           f"{missing}, handled but not advertised {unadvertised}")
    return HANDLERS
