"""Regular-expression subscriptions (KIP-848): RE2 syntax, matched against whole topic names, as
Kafka's broker does with RE2/J. Python's ``re`` is not RE2 (backreferences, lookaround, and
exponential backtracking on hostile patterns): the google-re2 binding is used instead.

A regex is validated when a member first brings it (INVALID_REGULAR_EXPRESSION); it is resolved
against the metadata image's topic names, and re-resolved when topics are created (at most
every ``REFRESH_MIN_INTERVAL_MS``, Kafka's batch interval) and at least every
``group.consumer.regex.refresh.interval.ms``.
"""

from __future__ import annotations

from functools import lru_cache

import re2

from kbroker.protocol.errors import Errors, KafkaError

REFRESH_MIN_INTERVAL_MS = 10_000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is the client's error, not a broker log line


# RE2 (C++) error texts -> what Kafka's RE2/J says (PatternSyntaxException.getDescription()),
# so INVALID_REGULAR_EXPRESSION carries Kafka's message.
_RE2J_TEXTS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "invalid UTF-8": "invalid UTF-8",
}


def _description(reason: str) -> str:
    code, _, argument = reason.partition(": ")
    if code == "invalid perl operator" and argument.startswith("(?<"):
        return "invalid named capture"  # RE2/J reads (?< as the start of a named group
    return _RE2J_TEXTS.get(code, code)


@lru_cache(maxsize=1024)
def compile_regex(pattern: str):
    """The compiled pattern; KafkaError INVALID_REGULAR_EXPRESSION when RE2 rejects it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise KafkaError(Errors.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                         f"{_description(str(reason))}.") from None


def resolve(patterns, topic_names) -> dict:
    """{pattern: frozenset(matching topic names)}; a pattern RE2 rejects matches nothing."""
    out = {}
    names = list(topic_names)
    for pattern in patterns:
        try:
            compiled = compile_regex(pattern)
        except KafkaError:
            out[pattern] = frozenset()
            continue
        out[pattern] = frozenset(n for n in names if compiled.fullmatch(n) is not None)
    return out
