"""SASL/OAUTHBEARER (RFC 7628), server side, with Kafka's unsecured JWS validator or, for signed
tokens (KIP-768), its JWKS validator (:mod:`kbroker.security.sasl.jwt`).

Kafka's broker uses ``OAuthBearerUnsecuredValidatorCallbackHandler`` when no server callback
handler is configured; it is meant for development: the token is an unsigned JWT (``alg`` is
``none``, the signature part empty) and only its claims are checked, as below. With
``OAuthBearerValidatorCallbackHandler`` the server is given a
:class:`~kbroker.security.sasl.jwt.JwksValidator` instead; the exchange is the same.

Client initial response (``OAuthBearerClientInitialResponse``; ``^A`` is 0x01)::

    n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]...^A

The JWT's checks (``OAuthBearerUnsecuredJws`` and ``OAuthBearerValidationUtils``): three
dot-separated base64url parts, JSON objects; ``exp`` (a number of seconds) is required and must be
in the future; ``iat``, when present, must not be in the future and must precede ``exp``; the
principal claim (``sub``, or the JAAS option ``unsecuredValidatorPrincipalClaimName``) must be a
non-blank string; the scope claim (``scope``, or ``unsecuredValidatorScopeClaimName``; a string or
a list) must hold every entry of ``unsecuredValidatorRequiredScope`` (space-separated). Time checks
allow ``unsecuredValidatorAllowableClockSkewMs``. Extensions are all accepted, as Kafka's unsecured
validator does. One leniency: the parts are decoded as base64url, padded or not (the alphabet
the token grammar allows; Kafka's ``toMap`` uses the basic decoder, which refuses ``-`` and ``_``
and so the occasional token its own clients make).

Failure, as ``OAuthBearerSaslServer``: a token that fails validation is answered (successfully, as
a challenge) with the JSON ``{"status":"invalid_token"}`` (``insufficient_scope`` and the required
scope for a scope failure); the client acknowledges with a single 0x01 byte and the exchange then
fails with that JSON as the message. A malformed initial response fails at once with Kafka's
generic "invalid credentials" message (the detail goes to the broker log only).

On success the authorization id is the principal claim, and ``credential_expiry_ms`` (``exp`` in
ms since the epoch) bounds the session (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time

from kbroker.security.sasl import AuthenticationFailed, InvalidCredentials

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
PRINCIPAL_CLAIM_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
CLOCK_SKEW_OPTION = "unsecuredValidatorAllowableClockSkewMs"

_SEP = "\x01"
# Kafka's patterns (OAuthBearerClientInitialResponse): a saslname is 7-bit without ',' and '='
# unless escaped; extension keys are letters, values printable ASCII and whitespace.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)", re.ASCII)
_KEY_RE, _VALUE_RE = re.compile(_KEY), re.compile(_VALUE)


class ValidatorOptions:
    """The unsecured validator's JAAS options, checked once at start-up (ValueError)."""

    def __init__(self, options: dict[str, str] | None = None):
        options = options or {}
        self.principal_claim = (options.get(PRINCIPAL_CLAIM_OPTION) or "").strip() or "sub"
        self.scope_claim = (options.get(SCOPE_CLAIM_OPTION) or "").strip() or "scope"
        self.required_scope = (options.get(REQUIRED_SCOPE_OPTION) or "").split()
        skew = (options.get(CLOCK_SKEW_OPTION) or "").strip()
        try:
            self.clock_skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ValueError(f"{CLOCK_SKEW_OPTION} must be an integer, not {skew!r}") from None
        if self.clock_skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")


class IllegalToken(Exception):
    """The token fails the unsecured validator; ``scope`` is set for a missing scope."""

    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.scope = scope


class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(self, options: ValidatorOptions, clock=time.time):
        self._options = options
        self._clock = clock
        self._error: str | None = None
        self._reason = ""
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        token = bytes(token)
        if token == b"\x01" and self._error is not None:
            # the client's acknowledgement of our error challenge ends the exchange
            raise AuthenticationFailed(self._error, detail=self._reason)
        self._error = None
        authzid, token_value = _parse_initial_response(token)
        now_ms = int(self._clock() * 1000)
        try:
            if isinstance(self._options, ValidatorOptions):
                claims, principal, expiry_ms = validate(token_value, self._options, now_ms)
            else:  # signed tokens (kbroker.security.sasl.jwt.JwksValidator)
                claims, principal, expiry_ms = self._options.validate(token_value, now_ms)
        except IllegalToken as exc:
            status = "insufficient_scope" if exc.scope is not None else "invalid_token"
            error = f'{{"status":"{status}"'
            if exc.scope is not None:
                error += f', "scope":"{exc.scope}"'
            self._error = error + "}"
            self._reason = str(exc)
            return self._error.encode()
        if authzid and authzid != principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({principal})")
        self.complete = True
        self.authorization_id = principal
        self.credential_expiry_ms = expiry_ms
        return b""


def _parse_initial_response(token: bytes) -> tuple[str, str]:
    message = token.decode("utf-8", errors="replace")
    match = _INITIAL_RESPONSE.fullmatch(message)
    if match is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message")
    properties = {}
    # Java's String.split drops trailing empty strings; each pair splits at its first '='.
    for pair in match.group("kvpairs").split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in properties.items():  # extensions
        if not _KEY_RE.fullmatch(key) or not _VALUE_RE.fullmatch(value):
            raise InvalidCredentials(f"Extension {key} is invalid")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: invalid 'auth' "
                                 "format")
    if auth_match.group("scheme").lower() != "bearer":
        raise InvalidCredentials(f"Invalid scheme in OAUTHBEARER client first message: "
                                 f"{auth_match.group('scheme')}")
    return match.group("authzid") or "", auth_match.group("token")


def validate(token: str, options: ValidatorOptions, now_ms: int) -> tuple[dict, str, int]:
    """``(claims, principal, expiry in ms)`` of an unsecured JWS, or IllegalToken."""
    if ".." in token:
        raise IllegalToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated "
                           "Base64URL-encoded values")
    header, claims = _json_object(parts[0]), _json_object(parts[1])
    if header.get("alg") != "none":
        raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise IllegalToken("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, options.scope_claim)
    exp = _number_claim(claims, "exp")
    if exp is None:
        raise IllegalToken("No expiration time in JWT")
    principal = claims.get(options.principal_claim)
    if principal is not None and not isinstance(principal, str):
        raise IllegalToken(f"The '{options.principal_claim}' claim was not of type String")
    if principal is None or not principal.strip():
        raise IllegalToken(f"No principal name in JWT claim: {options.principal_claim}")
    iat = _number_claim(claims, "iat")
    skew = options.clock_skew_ms
    if iat is not None and 1000 * iat > now_ms + skew:
        raise IllegalToken(f"The Issued At value ({iat} seconds) was after the indicated time "
                           f"({now_ms} ms) plus allowable clock skew ({skew} ms)")
    if now_ms - skew >= 1000 * exp:
        raise IllegalToken(f"The indicated time ({now_ms} ms) minus allowable clock skew "
                           f"({skew} ms) was on or after the Expiration Time value ({exp} seconds)")
    if iat is not None and exp <= iat:
        raise IllegalToken(f"The Expiration Time time ({exp} seconds) was not after the Issued "
                           f"At time ({iat} seconds)")
    for required in options.required_scope:
        if required not in scope:
            # Kafka reports the required scope as Java prints a list: [a, b]
            raise IllegalToken(f"The provided scope ({sorted(scope)}) was missing a required "
                               f"scope ({required})",
                               scope="[" + ", ".join(options.required_scope) + "]")
    return claims, principal, round(exp * 1000)


def _json_object(part: str) -> dict:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(decoded)
    except (UnicodeDecodeError, ValueError):
        raise IllegalToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise IllegalToken("malformed JSON")
    return value


def _number_claim(claims: dict, name: str):
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IllegalToken(f"The '{name}' claim was not of type Number")
    return value


def _scope(claims: dict, name: str) -> set[str]:
    value = claims.get(name)
    if value is None:
        return set()
    if isinstance(value, str):
        return {value.strip()} if value.strip() else set()
    if not isinstance(value, list):
        raise IllegalToken(f"The '{name}' claim was not of type List")
    return {str(item).strip() for item in value if str(item).strip()}
