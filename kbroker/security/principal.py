"""Principals: Kafka's ``User:<name>`` and the name of a TLS client certificate's subject.

Kafka's ``DefaultKafkaPrincipalBuilder`` names an mTLS client by its certificate subject in RFC
2253 form (``X500Principal.getName()``: most specific RDN first, ``CN=alice,OU=dev,O=acme``),
passed through ``ssl.principal.mapping.rules`` (KIP-371): comma-separated ``DEFAULT`` (the whole
name) or ``RULE:<regex>/<replacement>/[L|U]``; the first rule whose regex matches the whole name
wins, and no matching rule fails the authentication.
"""

from __future__ import annotations

import re

ANONYMOUS = "User:ANONYMOUS"

# Python's long attribute names -> the keywords RFC 2253 / Java use.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
# Java prints attributes without an RFC 2253 keyword as OID=#<DER hex>; e-mail is an IA5String.
_OID_IA5 = {"emailAddress": "1.2.840.113549.1.9.1"}
_SPECIAL = set(',+"\\<>;')


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _SPECIAL else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(peercert: dict) -> str:
    """RFC 2253 name of the subject of ``ssl.SSLSocket.getpeercert()``'s dict."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        parts = []
        for attribute, value in rdn:
            if attribute in _KEYWORDS:
                parts.append(f"{_KEYWORDS[attribute]}={_escape(value)}")
            elif attribute in _OID_IA5 and len(value) < 128:
                data = value.encode()
                parts.append(f"{_OID_IA5[attribute]}=#16{len(data):02x}{data.hex()}")
            else:
                parts.append(f"{attribute}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


class MappingError(ValueError):
    pass


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules``; raises ValueError on a malformed rule list."""

    def __init__(self, rules: str):
        self._rules: list[tuple[re.Pattern, str, str] | None] = []  # None is DEFAULT
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"invalid rule at {text[pos:]!r}: expected DEFAULT or "
                                 "RULE:pattern/replacement/[LU]")
            if match.group(1):
                self._rules.append(None)
            else:
                replacement = re.sub(r"\$(\d)", r"\\\1", match.group(3))  # Java's $1 -> \1
                self._rules.append((re.compile(match.group(2)), replacement, match.group(4)))
            pos = match.end()

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            if rule is None:
                return distinguished_name
            pattern, replacement, case = rule
            if pattern.fullmatch(distinguished_name):
                result = pattern.sub(replacement, distinguished_name)
                return result.lower() if case == "L" else result.upper() if case == "U" else result
        raise MappingError(f"no ssl.principal.mapping.rules apply to {distinguished_name}")
