"""SASL client side, for a broker authenticating to another broker: PLAIN, SCRAM-SHA-256/512 and
GSSAPI (Kerberos).

Sans-I/O, like the servers: ``first()`` is the client's opening token, ``evaluate(challenge)``
the answer to each server token (None once there is nothing more to send); ``complete`` is set
when the exchange succeeded from the client's side. SCRAM checks the server's signature, so a
broker that does not hold our credential cannot pose as the leader (RFC 5802 section 3).
Failures raise :class:`ClientAuthenticationFailed` with a message that names no secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from kbroker.security.sasl.scram import HASHES


class ClientAuthenticationFailed(Exception):
    """The server's answer does not complete the exchange (bad message, wrong signature)."""


class PlainClient:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        self._username, self._password = username, password
        self.complete = False

    def first(self) -> bytes:
        return f"\0{self._username}\0{self._password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        # PLAIN has one message; the server's (empty) answer ends it.
        self.complete = True
        return None


def _saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str):
        self.mechanism = mechanism
        self._digest = HASHES[mechanism]
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._state = "server-first"
        self.complete = False

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        try:
            message = bytes(challenge).decode("utf-8")
        except UnicodeDecodeError:
            raise ClientAuthenticationFailed("SCRAM: the server's message is not UTF-8") from None
        if self._state == "server-first":
            return self._client_final(message).encode()
        if self._state == "server-final":
            self._verify_server(message)
            return None
        raise ClientAuthenticationFailed("SCRAM: unexpected message after the exchange")

    def _client_final(self, server_first: str) -> str:
        self._state = "failed"
        fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) \
                or salt is None or not iterations.isdigit():
            raise ClientAuthenticationFailed(f"SCRAM: invalid server first message "
                                             f"(error: {fields.get('e', 'none')})")
        salted = hashlib.pbkdf2_hmac(self._digest().name, self._password.encode(),
                                     base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        signature = hmac.digest(self._digest(client_key).digest(), auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._server_signature = hmac.digest(server_key, auth_message, self._digest)
        self._state = "server-final"
        return f"{without_proof},p={base64.b64encode(proof).decode()}"

    def _verify_server(self, server_final: str) -> None:
        self._state = "failed"
        if not server_final.startswith("v="):
            raise ClientAuthenticationFailed(f"SCRAM: the server refused the proof ({server_final})")
        try:
            signature = base64.b64decode(server_final[2:], validate=True)
        except ValueError:
            raise ClientAuthenticationFailed("SCRAM: invalid server final message") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise ClientAuthenticationFailed("SCRAM: the server's signature is wrong (it does not "
                                             "hold this user's credential)")
        self._state = "done"
        self.complete = True


class GssapiClient:
    """RFC 4752's client side on MIT Kerberos: the broker's own principal (from the listener's
    Krb5LoginModule keytab; MIT gets and renews its tickets from the keytab) asks for a ticket to
    ``<service>/<host>`` of the other broker, then accepts its security layer offer with "none".
    ``first()`` may reach the KDC, so callers run it off the event loop."""

    mechanism = "GSSAPI"
    blocking_first = True

    def __init__(self, principal: str, keytab: str, service: str, host: str):
        self._principal, self._keytab = principal, keytab
        self._target = f"{service}@{host}"
        self._context = None
        self._answered = False
        self.complete = False

    def first(self) -> bytes:
        import gssapi

        try:
            credentials = gssapi.Credentials(
                name=gssapi.Name(self._principal, gssapi.NameType.kerberos_principal),
                usage="initiate",
                store={"client_keytab": self._keytab, "ccache": f"MEMORY:kbroker-{self._principal}"})
            self._context = gssapi.SecurityContext(
                name=gssapi.Name(self._target, gssapi.NameType.hostbased_service),
                creds=credentials, usage="initiate",
                flags=[gssapi.RequirementFlag.mutual_authentication])
            return self._context.step() or b""
        except gssapi.exceptions.GSSError as exc:
            raise ClientAuthenticationFailed(f"Kerberos: {exc.gen_message()}") from None

    def evaluate(self, challenge: bytes) -> bytes | None:
        import gssapi

        try:
            if not self._context.complete:
                return self._context.step(bytes(challenge)) or b""
            if self._answered:
                self.complete = True
                return None
            if not challenge:
                return b""  # the server's last context token was empty: ask for the offer
            offer = self._context.unwrap(bytes(challenge)).message
            if len(offer) < 4 or not offer[0] & 1:
                raise ClientAuthenticationFailed("the broker offers no 'none' security layer")
            self._answered = True
            return self._context.wrap(b"\x01" + offer[1:4], False).message
        except gssapi.exceptions.GSSError as exc:
            raise ClientAuthenticationFailed(f"Kerberos: {exc.gen_message()}") from None


def new_client(mechanism: str, username: str, password: str):
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    return ScramClient(mechanism, username, password)
