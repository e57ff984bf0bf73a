"""What every admin command shares: connecting (flags in :mod:`.connection`), error wording,
tables."""

from __future__ import annotations

import argparse
import logging
import re

from kbroker.cli.commands.connection import client_config, connection_flags  # noqa: F401


class CommandError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def admin(args: argparse.Namespace):
    from kbroker.admin_client import admin_client

    config = client_config(args)
    return connect(lambda: admin_client(**config, request_timeout_ms=10000),
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
    """kafka-python's log lines about failed bootstrap tries: the broker errors they name
    (``[Error 58] SaslAuthenticationFailedError: ...``, from whichever of its loggers said it
    first) and the bare reasons (``socket disconnected``)."""

    _FAILED = re.compile(r"Bootstrap connection to \S+ failed: (.*?)(?: \(backoff [\d.]+ secs\))?$")
    _ERROR = re.compile(r"\[Error \d+\] (\w+): (?:\w+: )?(.*?)(?: \(backoff [\d.]+ secs\))?$")

    HINT = " (wrong listener, or its TLS or SASL settings? -X tls.*, -X sasl.mechanism, -X user, -X pass)"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []
        self.errors: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        error = self._ERROR.search(message)
        if error:
            self.errors.append(error.groups())
        failed = self._FAILED.match(message)
        if failed:
            self.reasons.append(failed.group(1))

    def explain(self) -> str:
        # a refused login says the most; the tries after it may just see the connection closed
        # or time out (brokers delay their answer to a failed authentication)
        refused = [e for e in self.errors if "Authentication" in e[0] or "Sasl" in e[0]]
        if refused:
            return ": {}: {}".format(*refused[-1])
        if self.errors:  # e.g. a timeout: a login whose answer never came in time
            return ": {}: {}{}".format(*self.errors[-1], self.HINT)
        if self.reasons and "REFUSED" in self.reasons[-1].upper():
            return f": {self.reasons[-1]} (set --brokers or -X brokers=HOST:PORT)"
        if self.reasons:  # the broker closed the connection: a TLS or SASL mismatch, most often
            return f": {self.reasons[-1]}{self.HINT}"
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
