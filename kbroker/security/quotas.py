"""Client quotas, the pure part: Kafka's quota keys and which quota entity applies to a client.

Keys (Kafka's ``QuotaConfigs``): for ``user`` and ``client-id`` entities (and their pairs)
``producer_byte_rate`` and ``consumer_byte_rate`` (longs, bytes per second),
``request_percentage`` and ``controller_mutation_rate`` (doubles); for ``ip`` entities
``connection_creation_rate`` (an int, connections per second).

Resolution is Kafka's ``DefaultQuotaCallback``: for one quota type (produce, fetch or request)
the first level defining that key wins, highest precedence first::

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

The level also decides who shares the rate: a quota on ``users/<user>`` (or the default user) is
one rate for all of that user's clients, a quota on ``clients/...`` one rate per client id
whatever the user, a user+client quota one rate per pair. That is Kafka's metric tags
(``user``, ``client-id``), an empty tag meaning "shared"; :func:`resolve` returns them.
"""

from __future__ import annotations

from typing import Mapping

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> Kafka's ConfigDef type, per kind of entity
CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
               REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}


def entity_key(pairs) -> tuple:
    """The image's form of an entity: (type, name or None) pairs sorted by type."""
    return tuple(sorted(pairs))


def describe_entity(entity) -> str:
    """As Kafka's ``ClientQuotaEntity.toString`` prints it (messages name the entity so)."""
    entries = ", ".join(f"{kind}={name if name is not None else 'null'}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


def _levels(user: str, client_id: str):
    """(entity, metric tags) in Kafka's precedence order."""
    return (
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )


def resolve(quotas: Mapping[tuple, Mapping[str, float]], key: str, user: str,
            client_id: str) -> tuple[float | None, tuple[str, str]]:
    """The quota bound for ``key`` that applies to (``user``, ``client_id``) and the metric tags
    of the rate it is measured on; (None, ...) when no entity sets it (no quota)."""
    if not quotas:
        return None, ("", client_id)
    for entity, tags in _levels(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None, ("", client_id)


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" -> "alice"), as Kafka's ``getName``."""
    return principal.split(":", 1)[1] if ":" in principal else principal
