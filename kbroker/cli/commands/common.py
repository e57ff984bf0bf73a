"""Connection flags shared by every admin command, and error wording."""

from __future__ import annotations

import argparse
import os

from kbroker.cli.suggest import did_you_mean

DEFAULT_BROKERS = "localhost:9092"
# -X keys we understand (rpk's names); anything else is refused with the closest one.
X_KEYS = ("brokers", "client.id")
# How long to try the bootstrap servers before "cannot reach" (kafka-python waits 30 s).
BOOTSTRAP_TIMEOUT_MS = 5000


class CommandError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def connection_flags() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("-X", dest="x_options", metavar="KEY=VALUE", action="append", default=[],
                       help="client option, rpk style: -X brokers=HOST:PORT[,HOST:PORT]")
    flags.add_argument("--brokers", help=f"bootstrap servers (default $KBROKER_BROKERS or "
                                         f"{DEFAULT_BROKERS})")
    return flags


def client_options(args: argparse.Namespace) -> dict[str, str]:
    options = {}
    for item in args.x_options:
        key, sep, value = item.partition("=")
        if not sep:
            raise CommandError(f"-X {item}: expected KEY=VALUE", 2)
        if key not in X_KEYS:
            raise CommandError(f"-X: unknown option '{key}'{did_you_mean(key, X_KEYS)}", 2)
        options[key] = value
    brokers = args.brokers or options.get("brokers") or os.environ.get("KBROKER_BROKERS")
    options["brokers"] = brokers or DEFAULT_BROKERS
    options.setdefault("client.id", "kbroker-cli")
    return options


def admin(args: argparse.Namespace):
    from kbroker.cli.kafka_admin import admin_client

    options = client_options(args)
    return connect(lambda: admin_client(options["brokers"], client_id=options["client.id"],
                                        request_timeout_ms=10000,
                                        bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS), options["brokers"])


def connect(factory, brokers: str):
    """Build a kafka-python client; a broker that cannot be reached is one line, not a trace."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    try:
        return factory()
    except (KafkaTimeoutError, KafkaConnectionError):
        raise CommandError(f"cannot reach a broker at {brokers} "
                           "(set --brokers or -X brokers=HOST:PORT)") from None


def describe_error(exc: BaseException) -> str:
    """``ERROR_NAME: detail`` for kafka-python errors, the message otherwise."""
    from kafka.errors import BrokerResponseError, KafkaError

    if isinstance(exc, BrokerResponseError):
        detail = exc.args[0] if exc.args else exc.description
        return f"{exc.message}: {detail}"
    if isinstance(exc, KafkaError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def error_name(code: int) -> str:
    from kafka.errors import for_code

    return for_code(code).message


def key_values(items: list[str], what: str) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} {item!r}: expected key=value", 2)
        result[key] = value
    return result


def table(headers: list[str], rows: list[list]) -> str:
    """rpk's tables: upper-case headers, columns padded by two spaces."""
    cells = [headers] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def leaf(sub, name: str, shared, help: str, examples: str | None = None, aliases=()):
    parser = sub.add_parser(name, help=help, description=help, parents=[shared],
                            examples=examples, aliases=list(aliases))
    parser.set_defaults(help_parser=parser)
    return parser


def group_parser(sub, name: str, help: str):
    from kbroker.cli.parser import Parser

    parser = sub.add_parser(name, help=help, description=help)
    parser.set_defaults(help_parser=parser, run=None)
    return parser, parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND",
                                         parser_class=Parser)
