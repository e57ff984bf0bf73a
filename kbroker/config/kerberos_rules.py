"""Kerberos principal names and Kafka's ``sasl.kerberos.principal.to.local.rules`` (Kafka's
``KerberosName``, ``KerberosShortNamer`` and ``KerberosRule``), sans I/O.

A principal ``service/host@REALM`` (or ``user@REALM``) becomes the short name of the Kafka
principal ``User:<short name>`` by the first rule that applies:

* ``DEFAULT``: a principal of the default realm maps to its first component
  (``alice@EXAMPLE.COM`` -> ``alice``, ``kafka/broker1@EXAMPLE.COM`` -> ``kafka``);
* ``RULE:[n:format](match)s/from/to/[g][/L|/U]``: for principals of ``n`` components, the
  ``format`` with ``$0`` = realm, ``$1``, ``$2`` = the components; kept if it matches ``match``
  (a full match), then the first (``g``: every) match of ``from`` replaced by ``to`` (``$1`` for a
  group, as Java writes it); ``L`` / ``U`` change the case. A result with ``/`` or ``@`` is an
  error (Kafka's "Non-simple name").

No rule applying is an error too (:class:`NoMatchingRule`): the authentication fails.

The rules are a configuration language: they live here, below every layer, so that the config
table can refuse a malformed rule at start-up as Kafka does; ``security/sasl/gssapi.py`` applies them.
"""

from __future__ import annotations

import re

_RULE = re.compile(r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?"
                   r"(L|U)?)))")
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(ValueError):
    pass


class KerberosName:
    def __init__(self, service: str, host: str | None, realm: str | None):
        self.service, self.host, self.realm = service, host, realm

    @classmethod
    def parse(cls, principal: str) -> "KerberosName":
        match = _NAME.fullmatch(principal)
        if match is None:
            if "@" in principal:
                raise ValueError(f"Malformed Kerberos name: {principal}")
            return cls(principal, None, None)
        return cls(match.group(1), match.group(3), match.group(5))

    def __str__(self) -> str:
        out = self.service + (f"/{self.host}" if self.host is not None else "")
        return out + (f"@{self.realm}" if self.realm is not None else "")


class _Rule:
    def __init__(self, text: str, default_realm: str, match: re.Match | None = None):
        self.text, self.default_realm = text, default_realm
        self.is_default = match is None
        self.lower = self.upper = False
        if match is not None:
            self.components = int(match.group(5))
            self.format = match.group(6)
            self.match = re.compile(match.group(8)) if match.group(8) is not None else None
            self.source = re.compile(match.group(10)) if match.group(10) is not None else None
            self.target = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(11) or "")
            self.repeat = match.group(12) == "g"
            self.lower, self.upper = match.group(13) == "L", match.group(13) == "U"

    def apply(self, params: list[str]) -> str | None:
        result = None
        if self.is_default:
            if params[0] == self.default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = _replace_parameters(self.format, params)
            if self.match is None or self.match.fullmatch(base):
                result = base if self.source is None else \
                    self.source.sub(self.target, base, count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self.text}")
        if result is not None and self.lower:
            result = result.lower()
        elif result is not None and self.upper:
            result = result.upper()
        return result


def _replace_parameters(format_: str, params: list[str]) -> str:
    out = []
    start = 0
    while start < len(format_):
        match = _PARAMETER.match(format_, start)
        out.append(match.group(1))
        if match.group(3) is not None:
            try:
                number = int(match.group(3))
            except ValueError:
                raise NoMatchingRule(f"bad format in username mapping in "
                                     f"{match.group(3)}") from None
            if not 0 <= number < len(params):
                raise NoMatchingRule(f"index {number} from {format_} is outside of the valid "
                                     f"range 0 to {len(params) - 1}")
            out.append(params[number])
        if match.end() == start:
            break
        start = match.end()
    return "".join(out)


class ShortNamer:
    def __init__(self, rules: list[str], default_realm: str):
        self.rules = []
        for text in rules or ["DEFAULT"]:
            match = _RULE.match(text)
            if match is None:
                raise ValueError(f"Invalid rule: {text}")
            if match.end() != len(text):
                raise ValueError(f"Invalid rule: `{text}`, unmatched substring: "
                                 f"`{text[match.end():]}`")
            self.rules.append(_Rule(text, default_realm, None if match.group(2) else match))

    def short_name(self, name: KerberosName) -> str:
        if name.host is None:
            if name.realm is None:
                return name.service
            params = [name.realm, name.service]
        else:
            params = [name.realm, name.service, name.host]
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {name}, rules "
                             f"[{', '.join(r.text for r in self.rules)}]")


def check_rules(rules: list[str]) -> None:
    """Validator for the config table: each rule must parse."""
    ShortNamer(rules, "")
