"""The ACL authorizer: Kafka's StandardAuthorizer semantics over the ACLs in the metadata image.

Turned on by ``authorizer.class.name`` set to ``org.apache.kafka.metadata.authorizer.
StandardAuthorizer`` (or Kafka 3.x's ``kafka.security.authorizer.AclAuthorizer``, an alias).

A decision for (principal, host, operation, resource), as Kafka makes it:

1. a principal in ``super.users`` is allowed everything;
2. the ACLs that apply are those whose pattern covers the resource: LITERAL with the same name or
   the wildcard ``*``, PREFIXED with a prefix of the name; and whose principal (or ``User:*``)
   and host (or ``*``) match;
3. any matching DENY for the operation (or ALL) denies — deny wins;
4. otherwise a matching ALLOW for the operation, ALL, or an operation that implies it (READ,
   WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. otherwise, if no ACL at all (anyone's) covers the resource, ``allow.everyone.if.no.acl.found``
   decides; else deny.

ACLs are stored as tuples ``(resource_type, name, pattern_type, principal, host, operation,
permission)`` of Kafka's wire codes. An :class:`AclIndex` is built once per metadata image (the
ACL tuple is the cache key) so a check is a dict lookup plus a scan of the prefixed ACLs of
that resource type.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Iterable, NamedTuple

AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Op(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
# Decisions remembered per ACL set (forgotten wholesale when full or when the ACLs change).
MAX_CACHED_DECISIONS = 100_000

# Operation -> the operations whose ALLOW also allows it (Kafka's implied operations).
_ALLOWED_BY = {op: frozenset({op, Op.ALL}) for op in Op}
_ALLOWED_BY[Op.DESCRIBE] = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL})
_ALLOWED_BY[Op.DESCRIBE_CONFIGS] = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL})

# The operations each resource type has (for validation and authorized-operations bit sets).
OPERATIONS = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DELETE, Op.DESCRIBE),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


class Acl(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def _known(enum, code) -> bool:
    return code in enum._value2member_map_ and code != 0


def validate(acl: Acl) -> str | None:
    """Why Kafka refuses to create ``acl`` (INVALID_REQUEST), or None — the checks of Kafka's
    AclControlManager.validateNewAcl, and only those (it accepts any operation on any type)."""
    if not _known(ResourceType, acl.resource_type) or acl.resource_type == ResourceType.ANY:
        return f"Invalid resourceType {acl.resource_type}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type}"
    if not _known(Op, acl.operation) or acl.operation == Op.ANY:
        return f"Invalid operation {acl.operation}"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {acl.permission}"
    if not acl.name:
        return "Resource name should not be empty"
    if ":" not in (acl.principal or ""):
        return (f"Could not parse principal from `{acl.principal}` (no colon is present "
                f"separating the principal type from the principal name)")
    return None


def validate_filter(f: Acl) -> str | None:
    """Kafka refuses a DeleteAcls filter with an unknown pattern or entry part."""
    if not _known(ResourceType, f.resource_type) or not _known(PatternType, f.pattern_type):
        return "Unknown patternFilter."
    if not _known(Op, f.operation) or not _known(Permission, f.permission):
        return "Unknown entryFilter."
    return None


def matches_filter(acl: Acl, f: Acl) -> bool:
    """Whether ``acl`` matches a DescribeAcls / DeleteAcls filter (None fields match anything;
    ANY codes match anything; MATCH pattern matches whatever would apply to the named resource)."""
    if f.resource_type != ResourceType.ANY and acl.resource_type != f.resource_type:
        return False
    if f.pattern_type == PatternType.MATCH:
        if f.name is not None and not (
                (acl.pattern_type == PatternType.LITERAL and acl.name in (f.name, WILDCARD)) or
                (acl.pattern_type == PatternType.PREFIXED and f.name.startswith(acl.name))):
            return False
    else:
        if f.pattern_type != PatternType.ANY and acl.pattern_type != f.pattern_type:
            return False
        if f.name is not None and acl.name != f.name:
            return False
    return ((f.principal is None or acl.principal == f.principal) and
            (f.host is None or acl.host == f.host) and
            (f.operation == Op.ANY or acl.operation == f.operation) and
            (f.permission == Permission.ANY or acl.permission == f.permission))


class AclIndex:
    """The ACLs of one image: literal ones by (type, name), prefixed ones by (type, prefix) plus
    the set of prefix lengths per type, so finding the prefixes of a name costs one dict lookup
    per distinct prefix length instead of a scan of every prefixed ACL."""

    def __init__(self, acls: Iterable[Acl]):
        self.literal: dict[tuple[int, str], list[Acl]] = {}
        self.prefixed: dict[tuple[int, str], list[Acl]] = {}
        self.prefix_lengths: dict[int, list[int]] = {}
        lengths: dict[int, set[int]] = {}
        for acl in acls:
            acl = Acl(*acl)  # the image keeps plain tuples
            if acl.pattern_type == PatternType.LITERAL:
                self.literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            else:
                self.prefixed.setdefault((acl.resource_type, acl.name), []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.name))
        self.prefix_lengths = {t: sorted(n) for t, n in lengths.items()}

    def covering(self, resource_type: int, name: str) -> list[Acl]:
        literal = self.literal
        out = literal.get((resource_type, name), []) + literal.get((resource_type, WILDCARD), [])
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found = self.prefixed.get((resource_type, name[:length]))
            if found:
                out += found
        return out


class Authorizer:
    def __init__(self, super_users: Iterable[str], allow_if_no_acl: bool):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._index_for: tuple = ()
        self._index = AclIndex(())
        # Decisions of the current ACL set: a client repeats the same checks on every request.
        self._decisions: dict[tuple, bool] = {}

    @classmethod
    def from_config(cls, config) -> "Authorizer | None":
        name = config.get("authorizer.class.name") or ""
        if not name:
            return None
        users = [u.strip() for u in (config.get("super.users") or "").split(";") if u.strip()]
        return cls(users, bool(config.get("allow.everyone.if.no.acl.found")))

    def index(self, acls: tuple) -> AclIndex:
        if acls is not self._index_for:
            self._index, self._index_for = AclIndex(acls), acls
            self._decisions = {}
        return self._index

    def authorize(self, acls: tuple, principal: str, host: str, op: int, resource_type: int,
                  name: str) -> bool:
        if acls is not self._index_for:
            self.index(acls)
        key = (principal, host, op, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions = {}
            decision = self._decisions[key] = self._decide(principal, host, op, resource_type,
                                                           name)
        return decision

    def _decide(self, principal: str, host: str, op: int, resource_type: int,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        covering = self._index.covering(resource_type, name)
        if not covering:
            return self.allow_if_no_acl
        allowed = False
        allowing = _ALLOWED_BY[op]
        for acl in covering:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or \
                    acl.host not in (host, WILDCARD):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (op, Op.ALL):
                    return False
            elif acl.operation in allowing:
                allowed = True
        return allowed


# --- the helper handlers call ----------------------------------------------------------------

_authorizers: dict[int, tuple] = {}


def authorizer_of(config) -> Authorizer | None:
    """The authorizer of this broker config (built once per config object), None when off."""
    cached = _authorizers.get(id(config))
    if cached is None or cached[0] is not config:
        cached = (config, Authorizer.from_config(config))
        _authorizers[id(config)] = cached
    return cached[1]


def allowed(ctx, op: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
    """Whether the request's principal may do ``op`` on the resource; True when no authorizer."""
    authorizer = authorizer_of(ctx.config)
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.metadata.acls, ctx.principal, ctx.client_host, op,
                                resource_type, name)


def authorized_operations(ctx, resource_type: int, name: str = CLUSTER_NAME) -> int:
    """Kafka's authorized-operations bit set for the principal (bit i set = operation i)."""
    bits = 0
    for op in OPERATIONS[resource_type]:
        if allowed(ctx, op, resource_type, name):
            bits |= 1 << op
    return bits


_DENIAL = {ResourceType.TOPIC: "TOPIC_AUTHORIZATION_FAILED",
           ResourceType.GROUP: "GROUP_AUTHORIZATION_FAILED",
           ResourceType.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
           ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
           ResourceType.DELEGATION_TOKEN: "DELEGATION_TOKEN_AUTHORIZATION_FAILED"}


def denial(resource_type: int):
    """The error Kafka answers when an operation on this resource type is denied."""
    from kbroker.protocol.errors import Errors
    return getattr(Errors, _DENIAL[resource_type])


def check(ctx, op: int, resource_type: int, name: str = CLUSTER_NAME) -> None:
    """Raise the KafkaError Kafka gives (TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_
    FAILED) unless the request's principal may do ``op`` on the resource."""
    if not allowed(ctx, op, resource_type, name):
        from kbroker.protocol.errors import KafkaError
        raise KafkaError(denial(resource_type), f"Principal {ctx.principal} is not authorized "
                         f"to {Op(op).name} {ResourceType(resource_type).name} {name}.")


def fetch_allowed(ctx, follower: bool, topic: str) -> bool:
    """Fetch: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on the topic."""
    if follower:
        return allowed(ctx, Op.CLUSTER_ACTION, ResourceType.CLUSTER)
    return allowed(ctx, Op.READ, ResourceType.TOPIC, topic)


def may_create_topic(ctx, topic: str) -> bool:
    """CreateTopics and auto-creation: CREATE on the cluster, or else on the topic."""
    return allowed(ctx, Op.CREATE, ResourceType.CLUSTER) or \
        allowed(ctx, Op.CREATE, ResourceType.TOPIC, topic)


def may_write_idempotently(ctx) -> bool:
    """InitProducerId without a transactional id (Kafka 3+): IDEMPOTENT_WRITE on the cluster, or
    WRITE allowed on some topic — approximated, as Kafka's authorizeByResourceType does, by an
    ALLOW for WRITE (or ALL) on any topic pattern for this principal and host."""
    if allowed(ctx, Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
        return True
    for acl in ctx.metadata.acls:
        acl = Acl(*acl)
        if acl.resource_type == ResourceType.TOPIC and acl.permission == Permission.ALLOW and \
                acl.operation in (Op.WRITE, Op.ALL) and \
                acl.principal in (ctx.principal, WILDCARD_PRINCIPAL) and \
                acl.host in (ctx.client_host, WILDCARD):
            return True
    return False


# Config resource types (DescribeConfigs / AlterConfigs): TOPIC 2, BROKER 4, BROKER_LOGGER 8.
_CONFIG_TOPIC = 2


_CONFIG_GROUP = 32  # ConfigResource.Type.GROUP


def check_configs(ctx, op: int, config_resource_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a topic, on a group (GROUP configs, KIP-848), else on
    the cluster (brokers, loggers)."""
    if config_resource_type == _CONFIG_TOPIC:
        check(ctx, op, ResourceType.TOPIC, name)
    elif config_resource_type == _CONFIG_GROUP:
        check(ctx, op, ResourceType.GROUP, name)
    else:
        check(ctx, op, ResourceType.CLUSTER)
