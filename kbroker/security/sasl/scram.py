"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, and Kafka's stored credential.

Exchange (no channel binding: the gs2 header is ``n,,`` or ``y,,``, as Kafka's clients send)::

    client-first  n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 proof>
    server-final  v=<base64 server signature>

The credential (Kafka's ``ScramCredential``, stored in ``/config/users/<user>`` as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``) holds no password:
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))``, ``ServerKey = HMAC(SaltedPassword, "Server
Key")``. AlterUserScramCredentials sends the salted password; the broker keeps only these keys.
An unknown user, a changed nonce, a wrong proof or a malformed message all fail the exchange.
Delegation tokens (KIP-48): a client-first message with the extension ``tokenauth=true`` after
the nonce names a token id as its user; its credential is the token's (derived from its HMAC, see
:func:`token_credential`), and the authorization id is the token's owner. The server then says
``token_authenticated`` and the token's expiry (``credential_expiry_ms``, which bounds the
session as KIP-368 does). Other extensions are ignored, as in Kafka.

Failures: as in Kafka's ScramSaslServer, every failure but an authorization id that differs from
the user name is a plain ``SaslException`` there, so the client gets the generic "invalid
credentials" text (:class:`InvalidCredentials`) and the reason goes to the broker's log only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from kbroker.security.sasl import AuthenticationFailed, InvalidCredentials

HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# Kafka's ScramMechanism type ids (AlterUserScramCredentials / DescribeUserScramCredentials).
MECHANISM_BY_TYPE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_BY_MECHANISM = {v: k for k, v in MECHANISM_BY_TYPE.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> "ScramCredential":
        digest = HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        return cls(salt, digest(client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", digest), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes, iterations: int):
        salted = hashlib.pbkdf2_hmac(HASHES[mechanism]().name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_string(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


_ATTRIBUTE = re.compile(r"([a-zA-Z])=(.*)", re.S)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        match = _ATTRIBUTE.fullmatch(part)
        if match is None:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM message")
        out.append((match.group(1), match.group(2)))
    return out


def _extensions(text: str) -> dict[str, str]:
    """SCRAM extensions after the nonce (``key=value,...``), as Kafka's ScramExtensions."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client first message")
        out[key] = value
    return out


def _username(saslname: str) -> str:
    """RFC 5802's saslname: ',' and '=' arrive as '=2C' and '=3D'; any other '=' is invalid."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise InvalidCredentials("Authentication failed: Invalid user name encoding")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def token_credential(mechanism: str, hmac_base64: str) -> ScramCredential:
    """A delegation token's SCRAM credential, as Kafka's DelegationTokenManager makes it: the
    password is the token's HMAC in base64, with a random salt and the mechanism's minimum
    iterations (each broker makes its own; the client only needs the password)."""
    return ScramCredential.from_password(mechanism, hmac_base64, secrets.token_bytes(32),
                                         MIN_ITERATIONS)


class ScramServer:
    def __init__(self, mechanism: str, lookup, token_lookup=None):
        """``lookup(user, mechanism)``: the user's credential or None; ``token_lookup(token_id,
        mechanism)``: (credential, owner name, expiry ms) of a live token, or None."""
        self.mechanism = mechanism
        self._digest = HASHES[mechanism]
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.token_authenticated = False
        self.credential_expiry_ms: int | None = None
        self._state = "client-first"
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM message") from None
        if self._state == "client-first":
            return self._client_first(message).encode()
        if self._state == "client-final":
            return self._client_final(message).encode()
        raise InvalidCredentials("Authentication failed: unexpected SCRAM message")

    def _client_first(self, message: str) -> str:
        self._state = "failed"
        cbind, sep, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or cbind not in ("n", "y"):
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client first message "
                                       "(channel binding is not supported)")
        name_part, _, rest = bare.partition(",")
        nonce_part, _, extension_text = rest.partition(",")
        attributes = _attributes(f"{name_part},{nonce_part}")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" \
                or not attributes[1][1]:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client first message")
        extensions = _extensions(extension_text)
        username = _username(attributes[0][1])
        authorization_id = username
        if extensions.get("tokenauth", "").lower() == "true":
            found = self._token_lookup(username, self.mechanism) if self._token_lookup else None
            if found is None:
                raise InvalidCredentials(f"Token Authentication failed: Invalid tokenId : "
                                         f"{username}")
            credential, authorization_id, self.credential_expiry_ms = found
            self.token_authenticated = True
        else:
            credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise InvalidCredentials("Authentication failed: Invalid user credentials")
        if authzid and authzid != f"a={attributes[0][1]}":
            raise AuthenticationFailed("Authentication failed: Client requested an authorization "
                                       "id that is different from username")
        self._user, self._credential = authorization_id, credential
        self._gs2_header = f"{cbind},{authzid},"
        self._nonce = attributes[1][1] + secrets.token_urlsafe(24)
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "client-final"
        return self._server_first

    def _client_final(self, message: str) -> str:
        self._state = "failed"
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client final message")
        attributes = _attributes(without_proof)
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client final message")
        if attributes[1][1] != self._nonce:
            raise InvalidCredentials("Authentication failed: Invalid client nonce in the final "
                                       "client message.")
        try:
            channel = base64.b64decode(attributes[0][1], validate=True)
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise InvalidCredentials("Authentication failed: Invalid SCRAM client final "
                                       "message") from None
        if channel != self._gs2_header.encode():
            raise InvalidCredentials("Authentication failed: Invalid channel binding")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(signature):
            raise InvalidCredentials("Authentication failed: Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(self._digest(client_key).digest(), credential.stored_key):
            raise InvalidCredentials("Authentication failed: Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        self._state = "done"
        self.complete = True
        self.authorization_id = self._user
        return "v=" + base64.b64encode(server_signature).decode()
