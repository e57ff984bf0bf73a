"""SASL/PLAIN (RFC 4616): one client message ``[authzid] NUL authcid NUL passwd``, no challenge.

As Kafka's ``PlainSaslServer``: an authorization id other than the user name is refused, and the
password is compared in constant time. Messages follow Kafka's wording.
"""

from __future__ import annotations

import hmac

from kbroker.security.sasl import AuthenticationFailed


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN authentication already complete")
        try:
            parts = bytes(token).decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got "
                                       f"{len(parts)}")
        authzid, username, password = parts
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something even for an unknown user, so timing does not tell.
        ok = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        self.complete = True
        self.authorization_id = username
        return b""
