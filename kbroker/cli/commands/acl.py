"""``kbroker acl create|list|delete``, spelled as ``rpk security acl`` (formerly ``rpk acl``).

An ACL is principal x host x operation x resource x permission; ``create`` makes the cross
product of the flags (``--allow-principal User:a --operation read,describe --topic t`` is two
ACLs), ``list`` and ``delete`` use the same flags as filters, anything left out matching all.
Through CreateAcls / DescribeAcls / DeleteAcls, so it works against any broker with an authorizer
(kbroker: ``authorizer.class.name``; without one the broker answers SECURITY_DISABLED).
"""

from __future__ import annotations

from kbroker.cli.commands.common import CommandError, admin, group_parser, leaf, table
from kbroker.suggest import did_you_mean

OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
              "DESCRIBE_TOKENS")
PATTERN_TYPES = ("literal", "prefixed", "match", "any")
CLUSTER_NAME = "kafka-cluster"


def _listed(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _add_acl_flags(p, filtering: bool) -> None:
    every = " (repeatable, comma-separated)"
    p.add_argument("--allow-principal", action="append", default=[], type=_listed,
                   metavar="PRINCIPAL", help="User:NAME allowed" + every)
    p.add_argument("--deny-principal", action="append", default=[], type=_listed,
                   metavar="PRINCIPAL", help="User:NAME denied" + every)
    p.add_argument("--allow-host", action="append", default=[], type=_listed, metavar="HOST",
                   help="host the allow applies to" + ("" if filtering else " (default *)"))
    p.add_argument("--deny-host", action="append", default=[], type=_listed, metavar="HOST",
                   help="host the deny applies to" + ("" if filtering else " (default *)"))
    p.add_argument("--operation", action="append", default=[], type=_listed, metavar="OP",
                   help=f"{', '.join(o.lower() for o in OPERATIONS)}" + every)
    p.add_argument("--topic", action="append", default=[], type=_listed, metavar="TOPIC")
    p.add_argument("--group", action="append", default=[], type=_listed, metavar="GROUP")
    p.add_argument("--transactional-id", action="append", default=[], type=_listed, metavar="ID")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="any" if filtering else "literal",
                   choices=PATTERN_TYPES if filtering else PATTERN_TYPES[:2],
                   help="how resource names match (default %(default)s)")


def register(sub, shared) -> None:
    _, acl = group_parser(sub, "acl", "create, list and delete ACLs")
    p = leaf(acl, "create", shared, "create ACLs: every principal x host x operation x resource",
             examples="""
kbroker acl create --allow-principal User:alice --operation read,describe --topic orders
kbroker acl create --allow-principal User:bob --operation all --topic logs- --resource-pattern-type prefixed
kbroker acl create --deny-principal User:eve --operation write --topic orders
kbroker acl create --allow-principal User:app --operation read --group app-""")
    _add_acl_flags(p, filtering=False)
    p.set_defaults(run=create)
    p = leaf(acl, "list", shared, "list ACLs matching the flags (all without flags)",
             aliases=["ls", "describe"], examples="""
kbroker acl list
kbroker acl list --topic orders
kbroker acl list --allow-principal User:alice""")
    _add_acl_flags(p, filtering=True)
    p.set_defaults(run=list_acls)
    p = leaf(acl, "delete", shared, "delete the ACLs matching the flags", examples="""
kbroker acl delete --allow-principal User:alice --topic orders
kbroker acl delete --deny-principal User:eve""")
    _add_acl_flags(p, filtering=True)
    p.set_defaults(run=delete)


def _flat(lists: list[list[str]]) -> list[str]:
    return [item for items in lists for item in items]


def _operations(args, default: str | None) -> list:
    from kafka.admin import ACLOperation

    names = _flat(args.operation) or ([default] if default else [])
    if not names:
        raise CommandError("name at least one --operation (e.g. --operation read)", 2)
    result = []
    for name in names:
        key = name.upper().replace("-", "_")
        if key not in OPERATIONS and key != "ANY":
            raise CommandError(f"--operation: unknown operation '{name}'"
                               f"{did_you_mean(key, OPERATIONS).lower()}", 2)
        result.append(ACLOperation[key])
    return result


def _resources(args, filtering: bool) -> list:
    from kafka.admin import ACLResourcePatternType, ResourcePattern, ResourcePatternFilter, ResourceType

    pattern = ACLResourcePatternType[args.resource_pattern_type.upper()]
    named = ([(ResourceType.TOPIC, n) for n in _flat(args.topic)]
             + [(ResourceType.GROUP, n) for n in _flat(args.group)]
             + [(ResourceType.TRANSACTIONAL_ID, n) for n in _flat(args.transactional_id)]
             + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if args.cluster else []))
    if filtering:
        if not named:
            return [ResourcePatternFilter(ResourceType.ANY, None, pattern)]
        return [ResourcePatternFilter(kind, name, pattern) for kind, name in named]
    if not named:
        raise CommandError("name a resource: --topic, --group, --transactional-id or --cluster", 2)
    return [ResourcePattern(kind, name, pattern) for kind, name in named]


def _principals(args, filtering: bool) -> list[tuple[object, str | None, list[str | None]]]:
    """(permission, principal, hosts) for each principal flag; filters without one match all."""
    from kafka.admin import ACLPermissionType

    default_hosts = [None] if filtering else ["*"]
    result = []
    for permission, principals, hosts in (
            (ACLPermissionType.ALLOW, args.allow_principal, args.allow_host),
            (ACLPermissionType.DENY, args.deny_principal, args.deny_host)):
        for principal in _flat(principals):
            if ":" not in principal:
                raise CommandError(f"principal '{principal}': expected TYPE:NAME, e.g. User:{principal}", 2)
            result.append((permission, principal, _flat(hosts) or default_hosts))
    if not result and filtering:
        result.append((ACLPermissionType.ANY, None, [None]))
    if not result:
        raise CommandError("name a principal: --allow-principal User:NAME or --deny-principal User:NAME", 2)
    return result


def _rows(acls) -> list[list]:
    return [[a.principal, a.host, a.resource_pattern.resource_type.name,
             a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name,
             a.operation.name, a.permission_type.name] for a in acls]


HEADERS = ["PRINCIPAL", "HOST", "RESOURCE-TYPE", "RESOURCE-NAME", "RESOURCE-PATTERN-TYPE",
           "OPERATION", "PERMISSION"]


def create(args) -> int:
    from kafka.admin import ACL

    acls = [ACL(principal, host, operation, permission, resource)
            for permission, principal, hosts in _principals(args, filtering=False)
            for host in hosts for operation in _operations(args, None)
            for resource in _resources(args, filtering=False)]
    result = admin(args).create_acls(acls)
    # kafka-python lists failures without their ACL: match them up by order
    failed = result["failed"]
    rows = [row + ["OK"] for row in _rows(result["succeeded"])]
    rows += [row + [error.message if hasattr(error, "message") else str(error)]
             for row, error in zip(_rows(a for a in acls if a not in result["succeeded"]), failed)]
    print(table(HEADERS + ["STATUS"], rows))
    return 1 if failed else 0


def _filters(args) -> list:
    from kafka.admin import ACLFilter, ACLOperation

    operations = _operations(args, "ANY") if args.operation else [ACLOperation.ANY]
    return [ACLFilter(principal, host, operation, permission, resource)
            for permission, principal, hosts in _principals(args, filtering=True)
            for host in hosts for operation in operations
            for resource in _resources(args, filtering=True)]


def list_acls(args) -> int:
    client = admin(args)
    found = []
    for acl_filter in _filters(args):
        acls, _ = client.describe_acls(acl_filter)
        found += [a for a in acls if a not in found]
    print(table(HEADERS, sorted(_rows(found))))
    return 0


def delete(args) -> int:
    if not (args.allow_principal or args.deny_principal or args.topic or args.group
            or args.transactional_id or args.cluster):
        raise CommandError("name what to delete: a principal or a resource (kbroker acl list "
                           "shows them)", 2)
    rows, failed = [], False
    for _, matched, error in admin(args).delete_acls(_filters(args)):
        if error.errno:
            failed = True
            rows += [["-", "-", "-", "-", "-", "-", "-", error.message]]
        rows += [row + ["DELETED"] for row in _rows(matched)]
    print(table(HEADERS + ["STATUS"], rows))
    return 1 if failed else 0
