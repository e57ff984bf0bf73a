"""``kbroker user create|list|delete``: SCRAM users, spelled as ``rpk security user``.

Credentials go through AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as
``kafka-configs.sh --entity-type users`` does, so this works against Kafka too. PLAIN users are
not stored by the broker (they live in the listener's JAAS entry) and are not listed.
"""

from __future__ import annotations

from kbroker.cli.commands.common import CommandError, admin, group_parser, leaf, table
from kbroker.suggest import did_you_mean

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism(text: str) -> str:
    name = text.upper()
    if name not in MECHANISMS:
        raise CommandError(f"--mechanism {text}: expected {' or '.join(MECHANISMS)}"
                           f"{did_you_mean(name, MECHANISMS)}", 2)
    return name


def register(sub, shared) -> None:
    _, user = group_parser(sub, "user", "create, list and delete SCRAM users")
    p = leaf(user, "create", shared, "create a SCRAM user (or change its password)", examples="""
kbroker user create alice -p alice-secret
kbroker user create bob -p bob-secret --mechanism SCRAM-SHA-512""")
    p.add_argument("name", metavar="USER")
    p.add_argument("-p", "--password", required=True, help="the user's password")
    p.add_argument("--mechanism", default="SCRAM-SHA-256",
                   help="SCRAM-SHA-256 (default, as rpk) or SCRAM-SHA-512")
    p.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (default 4096)")
    p.set_defaults(run=create)
    p = leaf(user, "list", shared, "list SCRAM users and their mechanisms", aliases=["ls"],
             examples="kbroker user list")
    p.set_defaults(run=list_users)
    p = leaf(user, "delete", shared, "delete a SCRAM user's credentials", examples="""
kbroker user delete alice                            # every mechanism
kbroker user delete bob --mechanism SCRAM-SHA-512""")
    p.add_argument("name", metavar="USER")
    p.add_argument("--mechanism", help="only this mechanism (default: all)")
    p.set_defaults(run=delete)


def _alter(args, alterations) -> int:
    errors = admin(args).alter_user_scram_credentials(alterations)
    error = errors.get(args.name)
    print(table(["USER", "STATUS"], [[args.name, error or "OK"]]))
    return 1 if error else 0


def create(args) -> int:
    from kafka.admin import UserScramCredentialUpsertion

    if args.iterations < 4096:
        # Kafka refuses fewer (UNACCEPTABLE_CREDENTIAL): say so before asking
        raise CommandError(f"--iterations {args.iterations}: at least 4096", 2)
    upsertion = UserScramCredentialUpsertion(args.name, _mechanism(args.mechanism), args.password,
                                             iterations=args.iterations)
    return _alter(args, [upsertion])


def _described(client, users=None) -> dict:
    return client.describe_user_scram_credentials(users)


def list_users(args) -> int:
    described = _described(admin(args))
    rows = [[name, ",".join(sorted(c["mechanism"].name.replace("_", "-")
                                   for c in info["credential_infos"]))]
            for name, info in sorted(described.items()) if not info["error"]]
    print(table(["USER", "MECHANISMS"], rows))
    return 0


def delete(args) -> int:
    from kafka.admin import UserScramCredentialDeletion

    client = admin(args)
    if args.mechanism:
        mechanisms = [_mechanism(args.mechanism)]
    else:
        info = _described(client, [args.name]).get(args.name, {})
        if info.get("error") or not info.get("credential_infos"):
            raise CommandError(f"RESOURCE_NOT_FOUND: user {args.name} has no SCRAM credentials")
        mechanisms = [c["mechanism"] for c in info["credential_infos"]]
    return _alter(args, [UserScramCredentialDeletion(args.name, m) for m in mechanisms])
