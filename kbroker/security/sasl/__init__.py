"""SASL mechanisms as sans-I/O state machines: ``evaluate(client_token) -> server_token``.

A mechanism server raises :class:`AuthenticationFailed` (the message is sent to the client in
SaslAuthenticate's ``error_message``, so it names no secret) and sets ``complete`` and
``authorization_id`` once the client is authenticated. Served: PLAIN (RFC 4616, users from the
listener's JAAS entry) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677, credentials from the
metadata store). GSSAPI and OAUTHBEARER are not implemented (refused in the config).
"""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The client's credentials or messages are wrong; answered with SASL_AUTHENTICATION_FAILED."""


def new_server(mechanism: str, plain_users, scram_lookup):
    """A fresh server for one authentication. ``plain_users``: name -> password (PLAIN);
    ``scram_lookup(user, mechanism)``: a :class:`~.scram.ScramCredential` or None."""
    if mechanism == "PLAIN":
        from kbroker.security.sasl.plain import PlainServer
        return PlainServer(plain_users)
    from kbroker.security.sasl.scram import ScramServer
    return ScramServer(mechanism, scram_lookup)
