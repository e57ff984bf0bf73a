"""What every admin command shares: connecting (flags in :mod:`.connection`), error wording,
tables."""

from __future__ import annotations

import argparse
import logging
import re

from kbroker.cli.commands.connection import client_config, connection_flags  # noqa: F401

# How long to try the bootstrap servers before "cannot reach" (kafka-python waits 30 s).
BOOTSTRAP_TIMEOUT_MS = 5000


class CommandError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def admin(args: argparse.Namespace):
    from kbroker.cli.kafka_admin import admin_client

    config = client_config(args)
    return connect(lambda: admin_client(**config, request_timeout_ms=10000,
                                        bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS),
                   config["bootstrap_servers"])


def connect(factory, brokers: str):
    """Build a kafka-python client; a broker that cannot be reached is one line, not a trace.

    kafka-python retries the bootstrap until it times out and only logs why each try failed
    (a SASL failure, a TLS handshake refused); the last such reason goes into the line."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    reasons = _BootstrapFailures()
    logging.getLogger("kafka").addHandler(reasons)
    try:
        return factory()
    except (KafkaTimeoutError, KafkaConnectionError):
        raise CommandError(f"cannot reach a broker at {brokers}{reasons.explain()}") from None
    finally:
        logging.getLogger("kafka").removeHandler(reasons)


class _BootstrapFailures(logging.Handler):
    _FAILED = re.compile(r"Bootstrap connection to \S+ failed: (.*?)(?: \(backoff [\d.]+ secs\))?$")
    _ERROR = re.compile(r"\[Error \d+\] (\w+): (?:\w+: )?(.*)")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        failed = self._FAILED.match(record.getMessage())
        if failed:
            self.reasons.append(failed.group(1))

    def explain(self) -> str:
        broker_errors = [r for r in self.reasons if self._ERROR.match(r)]
        if broker_errors:  # e.g. SaslAuthenticationFailedError: Authentication failed: ...
            name, detail = self._ERROR.match(broker_errors[-1]).groups()
            return f": {name}: {detail}"
        if self.reasons and "REFUSED" in self.reasons[-1].upper():
            return f": {self.reasons[-1]} (set --brokers or -X brokers=HOST:PORT)"
        if self.reasons:  # the broker closed the connection: a TLS or SASL mismatch, most often
            return (f": {self.reasons[-1]} (wrong listener, or its TLS or SASL settings? "
                    "-X tls.*, -X sasl.mechanism, -X user, -X pass)")
        return " (set --brokers or -X brokers=HOST:PORT)"


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
