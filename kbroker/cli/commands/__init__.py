"""rpk-style admin commands: ``kbroker topic|group|cluster|acl|user|completion ...``, against any
broker.

Spelled as Redpanda's ``rpk`` spells them (``-X brokers=HOST:PORT`` or ``--brokers``, default
``localhost:9092``, or ``$KBROKER_BROKERS``; TLS and SASL as ``-X tls.ca=... -X user=...``, see
:mod:`.connection`), before or after the subcommand. Each module registers its subcommands on the
parser tree and sets ``run``; the tree also drives shell completion.

Exit codes: 0 success, 1 the broker refused or could not be reached (one line:
``kbroker: <ERROR_NAME>: <what>``), 2 bad usage (one line naming the closest valid flag/command).
"""

from __future__ import annotations

import sys

from kbroker.cli.parser import Parser, fail

COMMANDS = ("topic", "group", "cluster", "acl", "user", "completion")
EXIT_ERROR = 1


def build_parser() -> Parser:
    from kbroker.cli.commands import acl, cluster, common, completion, group, topic, user
    from kbroker.cli.version import VERSION

    parser = Parser(prog="kbroker", description="A Kafka-compatible broker and its admin CLI.",
                    examples="""
kbroker dev                                  # a broker on localhost:9092 with the dev profile
kbroker topic create orders -p 3 -c retention.ms=3600000
echo hello | kbroker topic produce orders -k user1
kbroker topic consume orders -o start -n 1
kbroker group describe my-group              # lag per partition
kbroker user create alice -p secret --mechanism SCRAM-SHA-512
kbroker acl create --allow-principal User:alice --operation read --topic orders
kbroker cluster info -X brokers=kafka:9092   # any Kafka-compatible broker
kbroker -X brokers=kafka:9093 -X tls.ca=ca.pem -X sasl.mechanism=SCRAM-SHA-512 \
    -X user=alice -X pass=secret topic list  # a secured one (kbroker -X list: all -X keys)
""")
    parser.add_argument("--version", "-V", action="version", version=f"kbroker {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.add_parser("serve", help="run the broker (kbroker serve --help)")
    sub.add_parser("dev", help="run the broker with the dev profile (kbroker dev --help)")
    shared = common.connection_flags()
    for module in (topic, group, cluster, acl, user, completion):
        module.register(sub, shared)
    return parser


def is_admin_command(argv: list[str]) -> bool:
    """``topic ...``, or connection flags first (``-X brokers=h:p topic ...``, ``-X list``)."""
    from kbroker.cli.commands.connection import hoist_leading_flags

    rest, flags = hoist_leading_flags(argv)
    return bool(rest and rest[0] in COMMANDS) or (bool(flags) and not rest)


OFFSET_FLAGS = ("-o", "--offset", "--to")


def _attach_negative_offsets(argv: list[str]) -> list[str]:
    """``-o -10:end`` as rpk takes it: argparse would read ``-10:end`` as an unknown flag."""
    result, i = [], 0
    while i < len(argv):
        if argv[i] in OFFSET_FLAGS and i + 1 < len(argv) and argv[i + 1][:1] == "-":
            result.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            result.append(argv[i])
            i += 1
    return result


def main(argv: list[str]) -> int:
    from kbroker.cli.commands.common import CommandError
    from kbroker.cli.commands.connection import OptionError, hoist_leading_flags, x_keys_help

    rest, flags = hoist_leading_flags(argv)
    if any(flag in ("-Xlist", "-Xhelp") for flag in flags) or any(
            a == "-X" and b in ("list", "help") for a, b in zip(flags, flags[1:])):
        print(x_keys_help())  # rpk -X list
        return 0
    if flags and not rest:  # ``kbroker -X brokers=h:p`` and no command: say what there is
        build_parser().print_help()
        return 2
    args = build_parser().parse_args(_attach_negative_offsets(rest) + flags)
    if getattr(args, "run", None) is None:  # ``kbroker topic`` alone: show what it offers
        args.help_parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except CommandError as exc:
        return fail(str(exc), exc.code)
    except OptionError as exc:
        return fail(str(exc), 2)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ``kbroker topic consume t | head``
        sys.stderr.close()
        return 0
    except Exception as exc:  # a client-side or broker error: one line, never a traceback
        from kbroker.cli.commands.common import describe_error

        return fail(describe_error(exc), EXIT_ERROR)
