"""rpk-style admin commands: ``kbroker topic|group|cluster|completion ...``, against any broker.

Spelled as Redpanda's ``rpk`` spells them (``-X brokers=HOST:PORT`` or ``--brokers``, default
``localhost:9092``, or ``$KBROKER_BROKERS``). Each module registers its subcommands on the parser
tree and sets ``run``; the tree also drives shell completion.

Exit codes: 0 success, 1 the broker refused or could not be reached (one line:
``kbroker: <ERROR_NAME>: <what>``), 2 bad usage (one line naming the closest valid flag/command).
"""

from __future__ import annotations

import sys

from kbroker.cli.parser import Parser, fail

COMMANDS = ("topic", "group", "cluster", "completion")
EXIT_ERROR = 1


def build_parser() -> Parser:
    from kbroker.cli.commands import cluster, common, completion, group, topic
    from kbroker.cli.version import VERSION

    parser = Parser(prog="kbroker", description="A Kafka-compatible broker and its admin CLI.",
                    examples="""
kbroker dev                                  # a broker on localhost:9092 with the dev profile
kbroker topic create orders -p 3 -c retention.ms=3600000
echo hello | kbroker topic produce orders -k user1
kbroker topic consume orders -o start -n 1
kbroker group describe my-group              # lag per partition
kbroker cluster info -X brokers=kafka:9092   # any Kafka-compatible broker
""")
    parser.add_argument("--version", "-V", action="version", version=f"kbroker {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.add_parser("serve", help="run the broker (kbroker serve --help)")
    sub.add_parser("dev", help="run the broker with the dev profile (kbroker dev --help)")
    shared = common.connection_flags()
    for module in (topic, group, cluster, completion):
        module.register(sub, shared)
    return parser


def main(argv: list[str]) -> int:
    from kbroker.cli.commands.common import CommandError

    args = build_parser().parse_args(argv)
    if getattr(args, "run", None) is None:  # ``kbroker topic`` alone: show what it offers
        args.help_parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except CommandError as exc:
        return fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ``kbroker topic consume t | head``
        sys.stderr.close()
        return 0
    except Exception as exc:  # a client-side or broker error: one line, never a traceback
        from kbroker.cli.commands.common import describe_error

        return fail(describe_error(exc), EXIT_ERROR)
