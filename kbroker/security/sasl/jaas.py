"""Kafka's ``sasl.jaas.config`` value: ``<LoginModule class> <flag> key="value" ... ;``.

Only the parts a broker uses: the login module, and its options (values double-quoted, with
backslash escapes, or bare words). ``user_<name>="<password>"`` options of PlainLoginModule are
PLAIN's users, as in Kafka.
"""

from __future__ import annotations

import re

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(;)|"((?:\\.|[^"\\])*)"|([^\s=;"]+)|(=))')


def parse(text: str) -> tuple[str, dict[str, str]]:
    """``(login module, options)`` of one JAAS entry; ValueError with the reason otherwise."""
    tokens = []
    pos, text = 0, text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"unexpected character at {text[pos:pos + 20]!r}")
        semicolon, quoted, word, equals = match.groups()
        if semicolon:
            tokens.append(";")
        elif quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif equals:
            tokens.append("=")
        else:
            tokens.append(("word", word))
        pos = match.end()
        if pos < len(text) and text[pos:].strip() == "":
            break
    if len(tokens) < 3 or tokens[-1] != ";" or not isinstance(tokens[0], tuple) \
            or not isinstance(tokens[1], tuple) or tokens[1][1] not in _FLAGS:
        raise ValueError("expected '<LoginModule> required key=\"value\" ... ;'")
    if ";" in tokens[:-1]:
        raise ValueError("a broker's JAAS config holds exactly one login module")
    module = tokens[0][1]
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ValueError("options must be key=\"value\" pairs")
    for i in range(0, len(rest), 3):
        key, eq, value = rest[i:i + 3]
        if not isinstance(key, tuple) or eq != "=" or not isinstance(value, tuple):
            raise ValueError("options must be key=\"value\" pairs")
        options[key[1]] = value[1]
    return module, options


def plain_users(text: str) -> dict[str, str]:
    module, options = parse(text)
    if module != PLAIN_MODULE:
        raise ValueError(f"PLAIN needs {PLAIN_MODULE}, not {module}")
    return {key[len("user_"):]: value for key, value in options.items()
            if key.startswith("user_") and len(key) > len("user_")}
