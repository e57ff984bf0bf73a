"""How a broker secures its connections to other brokers (replica fetches, transaction markers).

As Kafka: the inter-broker listener (``inter.broker.listener.name``, else the listener named
after ``security.inter.broker.protocol``) decides the protocol, and the broker is a client of
that listener with the same listener's settings:

- SSL / SASL_SSL: the listener's key store is the client certificate (presented when the other
  broker asks for one, i.e. ``ssl.client.auth=required|requested``), its trust store verifies the
  other broker, ``ssl.endpoint.identification.algorithm`` checks the host name; each key may be
  overridden per listener (``listener.name.<l>.ssl.*``).
- SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512) with the ``username`` and ``password`` options of the listener's JAAS entry for
  that mechanism, ``listener.name.<l>.<mechanism>.sasl.jaas.config`` -- the same entry whose
  ``user_<name>`` options list PLAIN's users, exactly as a Kafka broker's JAAS entry reads; or
  GSSAPI with the ``principal`` and ``keyTab`` of the listener's Krb5LoginModule entry, towards
  ``<sasl.kerberos.service.name>/<the other broker's advertised host>``.

The principal a broker authenticates as (the SASL user, or the mapped subject of its
certificate) is what ``super.users`` (or a CLUSTER_ACTION ACL) must allow when an authorizer is on.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

class InterBrokerSecurityError(ValueError):
    """The inter-broker settings cannot be used; ``key`` names the setting to fix."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class InterBrokerSecurity:
    listener: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None  # GSSAPI: the broker's Kerberos principal
    password: str | None = None
    keytab: str | None = None  # GSSAPI
    service_name: str | None = None  # GSSAPI: sasl.kerberos.service.name

    def sasl_client(self, host: str | None = None):
        """A fresh SASL client for one connection to ``host``, or None without SASL."""
        if self.mechanism is None:
            return None
        from kbroker.security.sasl.client import GssapiClient, new_client
        if self.mechanism == "GSSAPI":
            return GssapiClient(self.username, self.keytab, self.service_name, host)
        return new_client(self.mechanism, self.username, self.password)

    def __repr__(self) -> str:  # never print the password
        return (f"InterBrokerSecurity({self.listener}, {self.protocol}"
                f"{f', {self.mechanism} as {self.username}' if self.mechanism else ''})")


PLAINTEXT = InterBrokerSecurity("PLAINTEXT", "PLAINTEXT")


def from_config(config) -> InterBrokerSecurity:
    """The inter-broker security of a :class:`~kbroker.config.broker.BrokerConfig` (files read,
    JAAS parsed); :class:`InterBrokerSecurityError` or ``TlsConfigError`` when unusable."""
    listener = config.inter_broker_listener_name
    if listener is None:
        return PLAINTEXT
    protocol = config.security_protocol(listener)
    setting = lambda key: config.listener_get(listener, key)  # noqa: E731
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        from kbroker.security.tls import client_context
        context = client_context(setting, listener)
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return InterBrokerSecurity(listener, protocol, context)
    mechanism = config.get("sasl.mechanism.inter.broker.protocol").upper()
    if mechanism == "GSSAPI":
        principal, keytab = _kerberos_login(config, listener)
        return InterBrokerSecurity(listener, protocol, context, mechanism, principal,
                                   keytab=keytab, service_name=config.mechanism_get(
                                       listener, "GSSAPI", "sasl.kerberos.service.name"))
    username, password = _credentials(config, listener, mechanism)
    return InterBrokerSecurity(listener, protocol, context, mechanism, username, password)


def _kerberos_login(config, listener: str) -> tuple[str, str]:
    """The broker's principal and keytab from the listener's Krb5LoginModule entry (the same
    login serves as acceptor and, towards other brokers, initiator)."""
    from kbroker.security.sasl import jaas

    key = f"listener.name.{listener.lower()}.gssapi.sasl.jaas.config"
    text = config.jaas_config(listener, "GSSAPI")
    if text is None:
        raise InterBrokerSecurityError(f"inter-broker listener {listener} authenticates brokers "
                                       f"with GSSAPI but {key} is not set", key)
    try:
        _module, options = jaas.parse(text)
    except ValueError as exc:
        raise InterBrokerSecurityError(f"invalid {key}: {exc}", key) from None
    principal, keytab = options.get("principal"), options.get("keyTab")
    if not principal or principal == "*" or not keytab:
        raise InterBrokerSecurityError(
            f"{key} needs keyTab=\"...\" and principal=\"...\": a broker logs in to the other "
            "brokers as its own principal", key)
    return principal, keytab


def _credentials(config, listener: str, mechanism: str) -> tuple[str, str]:
    from kbroker.security.sasl import jaas

    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.jaas_config(listener, mechanism)
    if text is None:
        raise InterBrokerSecurityError(
            f"inter-broker listener {listener} authenticates brokers with {mechanism} but {key} "
            "is not set: it needs username=\"...\" password=\"...\" (the broker's own "
            "credentials)", key)
    try:
        _module, options = jaas.parse(text)
    except ValueError as exc:
        raise InterBrokerSecurityError(f"invalid {key}: {exc}", key) from None
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise InterBrokerSecurityError(
            f"{key} has no username=\"...\" password=\"...\" options: a broker reads its own "
            f"credentials for {mechanism} on the inter-broker listener {listener} there, as Kafka "
            "does", key)
    return username, password
