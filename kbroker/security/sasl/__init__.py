"""SASL mechanisms as sans-I/O state machines: ``evaluate(client_token) -> server_token``.

A mechanism server raises :class:`AuthenticationFailed` (the message is sent to the client in
SaslAuthenticate's ``error_message``, so it names no secret) and sets ``complete`` and
``authorization_id`` once the client is authenticated; a server whose credential expires (an
OAUTHBEARER token) also sets ``credential_expiry_ms``, which bounds the session (KIP-368). Served:
PLAIN (RFC 4616, users from the listener's JAAS entry), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 /
7677, credentials from the metadata store) and OAUTHBEARER (RFC 7628, Kafka's unsecured JWS
validator, or signed tokens against a JWKS: ``jwt.py``) and GSSAPI (Kerberos V5, RFC 4752, on MIT
Kerberos through the ``gssapi`` package: ``gssapi.py``).
"""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The client's credentials or messages are wrong; answered with SASL_AUTHENTICATION_FAILED.
    ``detail``, when given, is for the broker's log only."""

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        self.detail = detail


class InvalidCredentials(AuthenticationFailed):
    """A failure Kafka's mechanism raises as a plain ``SaslException``: the client gets Kafka's
    generic "invalid credentials" message and the reason goes to the log only."""

    def __init__(self, reason: str):
        super().__init__(reason, detail=reason)


def new_server(mechanism: str, plain_users=None, scram_lookup=None, oauth_options=None,
               gssapi_acceptor=None, token_lookup=None):
    """A fresh server for one authentication. ``plain_users``: name -> password (PLAIN);
    ``scram_lookup(user, mechanism)``: a :class:`~.scram.ScramCredential` or None;
    ``oauth_options``: the OAUTHBEARER validator (:class:`~.oauthbearer.ValidatorOptions` or
    :class:`~.jwt.JwksValidator`); ``gssapi_acceptor``: the listener's
    :class:`~.gssapi.GssapiAcceptor`; ``token_lookup(token_id, mechanism)``: a delegation
    token's (credential, owner name, expiry ms), or None (SCRAM with ``tokenauth=true``)."""
    if mechanism == "GSSAPI":
        from kbroker.security.sasl.gssapi import GssapiServer
        return GssapiServer(gssapi_acceptor)
    if mechanism == "PLAIN":
        from kbroker.security.sasl.plain import PlainServer
        return PlainServer(plain_users or {})
    if mechanism == "OAUTHBEARER":
        from kbroker.security.sasl.oauthbearer import OAuthBearerServer, ValidatorOptions
        return OAuthBearerServer(oauth_options or ValidatorOptions())
    from kbroker.security.sasl.scram import ScramServer
    return ScramServer(mechanism, scram_lookup, token_lookup)
