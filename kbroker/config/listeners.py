"""Listener endpoints: ``NAME://host:port`` lists."""

from __future__ import annotations

import re
from typing import NamedTuple

from kbroker.config.types import ConfigError

class Endpoint(NamedTuple):
    """One listener: ``PLAINTEXT://localhost:9092`` -> ``Endpoint("PLAINTEXT", "localhost", 9092)``."""

    name: str
    host: str
    port: int

    @property
    def bind_host(self) -> str | None:
        """The address to bind: None (all interfaces) for an empty host; localhost means
        127.0.0.1 so the listener matches what we advertise."""
        if not self.host:
            return None
        return "127.0.0.1" if self.host == "localhost" else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%a-z]*\]|[^:\[\]/]*):(\d+)")


def parse_listeners(key: str, entries: list[str]) -> list[Endpoint]:
    endpoints = []
    for entry in entries:
        match = _LISTENER_RE.fullmatch(entry)
        if not match:
            raise ConfigError(f"invalid value {entry!r} for '{key}': expected NAME://host:port", key)
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(f"invalid value {entry!r} for '{key}': port out of range", key)
        endpoints.append(Endpoint(name, host, port))
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"invalid value for '{key}': each listener name must appear only once", key)
    return endpoints


# What a listener may be (Kafka's SecurityProtocol) and the SASL mechanisms kbroker serves.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LISTENER_PREFIX = "listener.name."
# The per-mechanism JAAS key Kafka brokers read: listener.name.<l>.<mechanism>.sasl.jaas.config.
JAAS_SUFFIX = ".sasl.jaas.config"


def uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def split_listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.sasl_ssl.ssl.keystore.location`` -> ``("SASL_SSL", "ssl.keystore.location")``;
    None for a key without the listener prefix. Listener names are matched case-insensitively,
    as Kafka does (its prefix uses the lower-case name)."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    listener, dot, rest = key[len(LISTENER_PREFIX):].partition(".")
    if not dot or not listener or not rest:
        raise ConfigError(f"refused '{key}': expected listener.name.<listener>.<config>", key)
    return listener.upper(), rest


REAUTH_KEY = "connections.max.reauth.ms"
CALLBACK_KEY = "sasl.server.callback.handler.class"
# OAUTHBEARER's server callback handlers kbroker has: Kafka's default unsecured validator, and
# the JWKS validator of KIP-768 (kbroker.security.sasl.jwt).
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
JWKS_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTHBEARER_CALLBACK_HANDLERS = (UNSECURED_VALIDATOR, JWKS_VALIDATOR)


def reauth_mechanism(rest: str) -> str | None:
    """The mechanism of a per-listener ``<mechanism>.connections.max.reauth.ms`` key (Kafka's
    ``connectionsMaxReauthMsByMechanism``), upper-cased, else None."""
    suffix = "." + REAUTH_KEY
    if rest.endswith(suffix) and len(rest) > len(suffix):
        return rest[:-len(suffix)].upper()
    return None


def jaas_mechanism(rest: str) -> str | None:
    """The mechanism of a per-listener ``<mechanism>.sasl.jaas.config`` key, upper-cased, else
    None."""
    if rest.endswith(JAAS_SUFFIX) and rest != JAAS_SUFFIX[1:]:
        return rest[:-len(JAAS_SUFFIX)].upper()
    return None
