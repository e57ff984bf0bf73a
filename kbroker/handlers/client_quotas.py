"""DescribeClientQuotas (v0-1) and AlterClientQuotas (v0-1), KIP-546: what
``kafka-configs.sh --entity-type users|clients|ips`` sends.

Entities are sets of (type, name) with types ``user``, ``client-id`` and ``ip``; a null name is
the ``<default>`` entity. Behaviour follows Kafka's KRaft controller (``ClientQuotasImage``,
``ClientQuotaControlManager``), messages included:

- Describe: each filter component matches a type EXACTly (a name), its DEFAULT entity, or any
  SPECIFIED name (default included); a type twice, an empty or unknown type, a match string with
  DEFAULT/SPECIFIED or none with EXACT, or ``ip`` combined with ``user``/``client-id`` is refused
  for the whole request (INVALID_REQUEST; an unknown type UNSUPPORTED_VERSION). Without
  ``strict`` an entity matches if it has the filtered types (and maybe more); with ``strict`` it
  must have exactly them; no components and no ``strict`` lists every entity.
- Alter: per entity, with INVALID_REQUEST and Kafka's message for an empty entity, a type twice,
  an unknown type, an empty name, a combination Kafka does not allow (``ip`` with anything, or
  nothing), an unresolvable ip, an unknown key ("Invalid configuration key"), a fractional value
  for a long key, a key twice, the same entity twice; ``controller_mutation_rate`` (KIP-599) is
  refused as not implemented. An entity with any error changes nothing;
  the others are applied in one persisted change through the controller, unless
  ``validate_only``. Removing a key that is not set is not an error.

With an authorizer: Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS
(CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging

from kbroker.handlers import handles
from kbroker.protocol.errors import Errors, KafkaError
from kbroker.security.authorizer import Op, ResourceType, allowed
from kbroker.security.quotas import (CLIENT_ID, CLIENT_KEYS, CONTROLLER_MUTATION_RATE,
                                     ENTITY_TYPES, IP, IP_KEYS, USER, describe_entity,
                                     entity_key)

log = logging.getLogger("kbroker.quotas")
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# Kafka's check of an ip entity is InetAddress.getByName: an address, or a host that resolves.
_RESOLVE_TIMEOUT_S = 5.0


class _Refused(Exception):
    def __init__(self, error: Errors, message: str):
        self.error, self.message = error, message


@handles("DescribeClientQuotas")
def describe_client_quotas(ctx, request):
    from kbroker.protocol.messages.describe_client_quotas import \
        DescribeClientQuotasResponse as R

    if not allowed(ctx, Op.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code,
                 error_message=f"Principal {ctx.principal} may not describe client quotas.",
                 entries=None)
    try:
        exact, specified = _parse_filter(request.components)
    except _Refused as exc:
        log.info("DescribeClientQuotas from %s refused: %s", ctx.client_host, exc.message)
        return R(throttle_time_ms=0, error_code=exc.error.code, error_message=exc.message,
                 entries=None)
    entries = []
    for entity, values in ctx.metadata.client_quotas.items():
        if _matches(dict(entity), exact, specified, request.strict):
            entries.append(R.EntryData(
                entity=[R.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())]))
    return R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def _parse_filter(components) -> tuple[dict, set]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise _Refused(Errors.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise _Refused(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _Refused(Errors.INVALID_REQUEST,
                               "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise _Refused(Errors.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, "
                                                       "but also specified a match string.")
            exact[kind] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise _Refused(Errors.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, "
                                                       "but also specified a match string.")
            specified.add(kind)
        else:
            raise _Refused(Errors.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    kinds = set(exact) | specified
    if IP in kinds and kinds & {USER, CLIENT_ID}:
        raise _Refused(Errors.INVALID_REQUEST,
                       "Invalid entity filter component combination. IP filter component should "
                       "not be used with user or clientId filter component.")
    return exact, specified


def _matches(entity: dict, exact: dict, specified: set, strict: bool) -> bool:
    if not exact and not specified:
        return not strict
    for kind, name in exact.items():
        if kind not in entity or entity[kind] != name:
            return False
    if any(kind not in entity for kind in specified):
        return False
    return not strict or len(entity) == len(exact) + len(specified)


@handles("AlterClientQuotas")
async def alter_client_quotas(ctx, request):
    hosts = {e.entity_name for entry in request.entries for e in entry.entity
             if e.entity_type == IP and e.entity_name and not _is_address(e.entity_name)}
    if hosts and allowed(ctx, Op.ALTER_CONFIGS, ResourceType.CLUSTER):
        # ip entities naming hosts: resolve them without holding the event loop
        return await _resolve_then_alter(ctx, request, hosts)
    return await _alter(ctx, request, set())


async def _resolve_then_alter(ctx, request, hosts: set[str]):
    loop = asyncio.get_running_loop()

    async def resolves(host: str) -> bool:
        try:
            async with asyncio.timeout(_RESOLVE_TIMEOUT_S):
                await loop.getaddrinfo(host, None)
            return True
        except (OSError, UnicodeError, asyncio.TimeoutError):
            return False

    hosts = sorted(hosts)
    ok = await asyncio.gather(*(resolves(h) for h in hosts))
    return await _alter(ctx, request, {h for h, good in zip(hosts, ok) if good})


async def _alter(ctx, request, resolvable: set[str]):
    from kbroker.protocol.messages.alter_client_quotas import AlterClientQuotasResponse as R

    may_alter = allowed(ctx, Op.ALTER_CONFIGS, ResourceType.CLUSTER)
    results: dict[tuple, tuple[Errors, str | None]] = {}
    echo: dict[tuple, list] = {}  # the entity as the request named it, for the response
    changes: dict[tuple, dict] = {}
    seen: set[tuple] = set()
    for entry in request.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        key = entity_key(pairs) if len({k for k, _ in pairs}) == len(pairs) else tuple(pairs)
        echo.setdefault(key, entry.entity)
        if key in seen:
            results[key] = (Errors.INVALID_REQUEST,
                            f"Ignoring duplicate entity {describe_entity(key)}")
            changes.pop(key, None)
            continue
        seen.add(key)
        try:
            if not may_alter:
                raise _Refused(Errors.CLUSTER_AUTHORIZATION_FAILED,
                               f"Principal {ctx.principal} may not alter client quotas.")
            changes[key] = _validate(pairs, entry.ops, key, resolvable)
            results[key] = (Errors.NONE, None)
        except _Refused as exc:
            results[key] = (exc.error, exc.message)
            if exc.error is not Errors.CLUSTER_AUTHORIZATION_FAILED:
                log.info("AlterClientQuotas from %s: %s refused: %s", ctx.client_host,
                         describe_entity(key), exc.message)
    if changes and not request.validate_only:
        try:
            await ctx.controller.alter_client_quotas(changes)
        except KafkaError as exc:  # not persisted: every entity that was valid fails with it
            log.warning("AlterClientQuotas from %s not stored: %s", ctx.client_host, exc.message)
            for key in changes:
                results[key] = (exc.error, exc.message)
    entries = []
    for key, (error, message) in results.items():
        entries.append(R.EntryData(error_code=error.code, error_message=message, entity=[
            R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in echo[key]]))
    return R(throttle_time_ms=0, entries=entries)


def _validate(pairs, ops, key, resolvable: set[str]) -> dict:
    """``{quota key: value, or None to remove}`` for a valid alteration, else _Refused."""
    if not pairs:
        raise _Refused(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in names:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"Invalid empty client quota entity, duplicate entity entry {kind}")
        if kind not in ENTITY_TYPES:
            raise _Refused(Errors.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _Refused(Errors.INVALID_REQUEST, f"Empty {kind} not supported")
        names[kind] = name
    if IP in names:
        if len(names) > 1:
            raise _Refused(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
        ip = names[IP]
        if ip is not None and not _is_address(ip) and ip not in resolvable:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"{names[IP]} is not a valid IP or resolvable host.")
        keys = IP_KEYS
    else:
        keys = CLIENT_KEYS
    alterations: dict[str, float | None] = {}
    for op in ops:
        if op.key in alterations:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"Duplicate quota key {op.key} not updating quota for this entity "
                           f"{describe_entity(key)}")
        if op.remove:
            alterations[op.key] = None
            continue
        kind = keys.get(op.key)
        if kind is None:
            raise _Refused(Errors.INVALID_REQUEST, f"Invalid configuration key {op.key}")
        if op.key == CONTROLLER_MUTATION_RATE:  # a Kafka key, but not enforced: refused
            raise _Refused(Errors.INVALID_REQUEST,
                           f"{op.key} (KIP-599 controller mutation quotas) is not implemented "
                           f"by kbroker yet")
        value = op.value
        if value != value or value in (float("inf"), float("-inf")):
            raise _Refused(Errors.INVALID_REQUEST, f"Configuration {op.key} must be a number")
        if kind in ("LONG", "INT") and abs(round(value) - value) > 1e-6:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"Configuration {op.key} must be a "
                           f"{'Long' if kind == 'LONG' else 'Int'} value")
        if kind == "INT" and not 0 <= value <= 2**31 - 1:
            raise _Refused(Errors.INVALID_REQUEST,
                           f"Invalid value {round(value)} for configuration {op.key}: Value must be at "
                           f"least 0")
        alterations[op.key] = float(round(value)) if kind in ("LONG", "INT") else value
    return alterations


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False
