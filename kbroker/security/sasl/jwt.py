"""OAUTHBEARER with signed tokens (KIP-768): Kafka's broker validator, sans I/O.

A listener whose ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` is Kafka's
``OAuthBearerValidatorCallbackHandler`` checks each token as Kafka's ``BrokerJwtValidator`` (on
jose4j's ``JwtConsumer``) does:

1. a compact JWS of three base64url sections whose header names an algorithm other than
   ``none``;
2. the signing key comes from the JWKS (:class:`JwksKeys`): the key with the header's ``kid``
   (else every key), of the type the algorithm needs, for signing (``use`` absent or ``sig``),
   whose ``alg`` (when it has one) is the header's; when none fits, a refresh of the JWKS is
   asked for at once (at most once a minute per key id, Kafka's ``maybeExpediteRefresh``) and
   this token fails;
3. the signature verifies (PyJWT with ``cryptography``: RS*, PS*, ES*, EdDSA, HS* with an
   ``oct`` key);
4. ``exp`` and ``iat`` must be present; the token is refused once ``now >= exp + skew`` and
   before ``nbf - skew``; ``iss`` must equal ``sasl.oauthbearer.expected.issuer`` when set; the
   ``aud`` claim must contain one of ``sasl.oauthbearer.expected.audience``, and a token that
   has one is refused when none is expected (jose4j's default);
5. Kafka's claim rules (``ClaimValidationUtils``): the sub claim (``sasl.oauthbearer.sub.claim.
   name``) a non-blank string, which becomes the principal; the scope claim a string (one scope)
   or a list of non-blank, distinct strings; ``exp`` and ``iat`` not negative.

Any failure is :class:`~kbroker.security.sasl.oauthbearer.IllegalToken` with jose4j-like
detail for the broker's log; the client gets Kafka's ``{"status":"invalid_token"}``.

The JWKS itself is read by :mod:`kbroker.server.jwks`, which calls :meth:`JwksKeys.update`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from kbroker.security.sasl.oauthbearer import IllegalToken

# Key types each JWS algorithm family needs (RFC 7518).
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "HS": "oct", "Ed": "OKP"}
# Kafka's RefreshingHttpsJwks: a missing key id asks for a refresh at most this often.
MISSING_KEY_ID_INTERVAL_MS = 60_000
MISSING_KEY_ID_MAX_ENTRIES = 16
MISSING_KEY_ID_MAX_LENGTH = 1000


@dataclass
class BrokerJwtOptions:
    """The validator's settings (Kafka's SaslConfigs names, resolved for one listener)."""

    jwks_url: str
    expected_audience: list[str] = field(default_factory=list)
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000


class JwksKeys:
    """The keys of one JWKS, as last read, and the key ids recently found missing."""

    def __init__(self, location: str):
        self.location = location
        self.keys: list = []          # jwt.PyJWK
        self._missing: dict[str, int] = {}  # key id -> when a refresh may be asked again
        self.refresh_wanted = False
        self.wake = lambda: None  # the refresher's (kbroker.server.jwks): refresh now

    def update(self, document: bytes) -> int:
        """Replace the keys with those of a JWKS document (ValueError when it is not one);
        returns how many keys it holds. Keys of unknown types or algorithms are skipped, as
        jose4j does."""
        import jwt

        try:
            parsed = json.loads(document)
        except (UnicodeDecodeError, ValueError):
            raise ValueError("the JWKS is not JSON") from None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("keys"), list):
            raise ValueError("the JWKS has no 'keys' array")
        keys = []
        for entry in parsed["keys"]:
            try:
                keys.append(jwt.PyJWK(entry))
            except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError, KeyError):
                continue
        for key in keys:
            self._missing.pop(key.key_id, None)
        self.keys = keys
        return len(keys)

    def candidates(self, header: dict) -> list:
        """jose4j's VerificationJwkSelector: the keys that may have signed a JWS with this
        header."""
        alg = header.get("alg", "")
        kid = header.get("kid")
        kty = _KEY_TYPES.get(alg[:2])
        out = []
        for key in self.keys:
            data = key._jwk_data  # the JWK as published
            if kid is not None and key.key_id != kid:
                continue
            if data.get("kty") != kty or data.get("use") not in (None, "sig"):
                continue
            if data.get("alg") not in (None, alg):
                continue
            out.append(key)
        return out

    def missing(self, kid: str | None, now_ms: int) -> bool:
        """A token named a key id the set lacks: whether to refresh now (Kafka's
        maybeExpediteRefresh). Key ids over 1,000 characters never trigger one."""
        kid = kid or ""
        if len(kid) > MISSING_KEY_ID_MAX_LENGTH:
            return False
        next_check = self._missing.get(kid)
        if next_check is not None and next_check > now_ms:
            return False
        self._missing.pop(kid, None)
        self._missing[kid] = now_ms + MISSING_KEY_ID_INTERVAL_MS
        while len(self._missing) > MISSING_KEY_ID_MAX_ENTRIES:
            del self._missing[next(iter(self._missing))]
        self.refresh_wanted = True
        self.wake()
        return True


def validate(token: str, options: BrokerJwtOptions, keys: JwksKeys,
             now_ms: int) -> tuple[dict, str, int]:
    """``(claims, principal, expiry in ms)`` of a signed JWT, or IllegalToken."""
    import jwt

    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise IllegalToken("Malformed JWT provided; expected three sections (header, payload, "
                           "and signature)")
    header = _json_section(parts[0], "header")
    claims = _json_section(parts[1], "payload")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg == "none" or alg[:2] not in _KEY_TYPES:
        raise IllegalToken(f"Could not validate the access token: the JWS algorithm {alg!r} is "
                           f"not permitted")
    candidates = keys.candidates(header)
    if not candidates:
        refreshing = keys.missing(header.get("kid"), now_ms)
        raise IllegalToken(
            f"Could not validate the access token: Unable to find a suitable verification key "
            f"for JWS w/ header {json.dumps(header, separators=(',', ':'))} from "
            f"{len(keys.keys)} JWKs obtained from {keys.location}"
            + ("; refreshing the JWKS" if refreshing else ""))
    for key in candidates:
        try:
            jwt.api_jws.PyJWS().decode_complete(token, key.key, algorithms=[alg])
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.PyJWTError as exc:
            raise IllegalToken(f"Could not validate the access token: {exc}") from None
    else:
        raise IllegalToken("Could not validate the access token: JWS signature is invalid")
    _check_registered_claims(claims, options, now_ms)
    scope = claims.get(options.scope_claim)
    scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
    seen = set()
    for item in scopes:
        value = _non_blank(options.scope_claim, item if isinstance(item, str) else None)
        if value in seen:
            raise IllegalToken(f"{options.scope_claim} value must not contain duplicates - "
                               f"{value} already present")
        seen.add(value)
    subject = claims.get(options.sub_claim)
    if subject is not None and not isinstance(subject, str):
        raise IllegalToken(f"Could not extract the '{options.sub_claim}' claim from the access "
                           f"token")
    principal = _non_blank(options.sub_claim, subject)
    exp = claims["exp"]
    if exp < 0:
        raise IllegalToken(f'exp value must be non-negative; value given was "{exp}"')
    if claims["iat"] < 0:
        raise IllegalToken(f'iat value must be null or non-negative; value given was '
                           f'"{claims["iat"]}"')
    return claims, principal, int(exp * 1000)


def _check_registered_claims(claims: dict, options: BrokerJwtOptions, now_ms: int) -> None:
    """jose4j's JwtConsumer checks, in its words."""
    skew_ms = options.clock_skew_s * 1000
    for name, what in (("exp", "Expiration Time"), ("iat", "Issued At")):
        value = claims.get(name)
        if value is None:
            raise IllegalToken(f"Could not validate the access token: No {what} ({name}) claim "
                               f"present.")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise IllegalToken(f"Could not validate the access token: The value of the '{name}' "
                               f"claim is not the expected type")
    exp = claims["exp"]
    if now_ms >= exp * 1000 + skew_ms:
        raise IllegalToken(f"Could not validate the access token: The JWT is no longer valid - "
                           f"the evaluation time {now_ms / 1000:.0f} is on or after the "
                           f"Expiration Time (exp={exp}) claim value (even when providing "
                           f"{options.clock_skew_s} seconds of leeway to account for clock "
                           f"skew).")
    nbf = claims.get("nbf")
    if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and \
            now_ms + skew_ms < nbf * 1000:
        raise IllegalToken(f"Could not validate the access token: The JWT is not yet valid as "
                           f"the evaluation time {now_ms / 1000:.0f} is before the Not Before "
                           f"(nbf={nbf}) claim time (even when providing "
                           f"{options.clock_skew_s} seconds of leeway to account for clock "
                           f"skew).")
    issuer = claims.get("iss")
    if options.expected_issuer is not None:
        if issuer is None:
            raise IllegalToken(f"Could not validate the access token: No Issuer (iss) claim "
                               f"present but was expecting {options.expected_issuer}")
        if issuer != options.expected_issuer:
            raise IllegalToken(f"Could not validate the access token: Issuer (iss) claim value "
                               f"({issuer}) doesn't match expected value of "
                               f"{options.expected_issuer}")
    audience = claims.get("aud")
    if audience is None:
        if options.expected_audience:
            raise IllegalToken("Could not validate the access token: No Audience (aud) claim "
                               "present.")
        return
    audiences = [audience] if isinstance(audience, str) else audience
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise IllegalToken("Could not validate the access token: The value of the 'aud' claim "
                           "is not the expected type")
    if not set(audiences) & set(options.expected_audience):
        raise IllegalToken(f"Could not validate the access token: Audience (aud) claim "
                           f"{audiences} doesn't contain an acceptable identifier. Expected "
                           f"{' or '.join(options.expected_audience) or 'none'} as an aud "
                           f"value.")


def _non_blank(name: str, value: str | None) -> str:
    if value is None:
        raise IllegalToken(f"{name} value must be non-null")
    if not value:
        raise IllegalToken(f"{name} value must be non-empty")
    value = value.strip()
    if not value:
        raise IllegalToken(f"{name} value must not contain only whitespace")
    return value


def _json_section(part: str, what: str) -> dict:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise IllegalToken(f"Could not validate the access token: malformed JWT {what}") \
            from None
    if not isinstance(value, dict):
        raise IllegalToken(f"Could not validate the access token: malformed JWT {what}")
    return value


class JwksValidator:
    """What an OAUTHBEARER server of a JWKS listener is given: the options and the key set the
    listener's refresher keeps current."""

    def __init__(self, options: BrokerJwtOptions, keys: JwksKeys):
        self.options, self.keys = options, keys

    def validate(self, token: str, now_ms: int) -> tuple[dict, str, int]:
        return validate(token, self.options, self.keys, now_ms)
