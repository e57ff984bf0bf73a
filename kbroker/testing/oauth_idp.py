"""A small OAuth 2 identity provider on 127.0.0.1, for testing OAUTHBEARER with signed tokens
(KIP-768) against kbroker or Kafka: a client-credentials token endpoint and a JWKS.

    idp = IdentityProvider(audience="kafka", issuer="https://idp.test").start()
    idp.add_client("alice", "alice-secret")
    ... sasl.oauthbearer.token.endpoint.url = idp.token_url
    ... sasl.oauthbearer.jwks.endpoint.url  = idp.jwks_url
    idp.rotate("ES256")       # a new signing key (new kid) replaces the old one in the JWKS
    idp.stop()

- ``POST /token``: ``grant_type=client_credentials``; the client id and secret in an HTTP Basic
  header (Java's OAuthBearerLoginCallbackHandler, librdkafka's ``oidc`` method) or in the form;
  answers ``{"access_token", "token_type": "Bearer", "expires_in"}`` with a JWT whose ``sub`` is
  the client id, ``iss``, ``aud``, ``iat``, ``nbf``, ``exp`` (``lifetime_s`` later) and the
  requested ``scope``, signed RS256 or ES256 with the current key (``kid`` in the header).
- ``GET /jwks``: the public keys (``use: sig``, ``alg``, ``kid``).
- :meth:`token` mints a token directly (any claims, expired, another audience, or signed by a
  key the JWKS does not publish), for tests of refusals.

Counters: ``tokens_issued`` and ``jwks_reads``. Needs PyJWT and cryptography (kbroker[oauth]).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SigningKey:
    def __init__(self, alg: str, kid: str | None = None):
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        self.alg = alg
        self.kid = kid or f"{alg.lower()}-{uuid.uuid4().hex[:8]}"
        if alg.startswith("RS") or alg.startswith("PS"):
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif alg == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
        else:
            raise ValueError(f"unsupported algorithm {alg}")

    def jwk(self) -> dict:
        import jwt

        algorithm = jwt.algorithms.RSAAlgorithm if self.alg[:2] in ("RS", "PS") \
            else jwt.algorithms.ECAlgorithm
        data = json.loads(algorithm.to_jwk(self.private.public_key()))
        data.update({"kid": self.kid, "use": "sig", "alg": self.alg})
        return data

    def sign(self, claims: dict, header: dict | None = None) -> str:
        import jwt

        return jwt.encode(claims, self.private, algorithm=self.alg,
                          headers={"kid": self.kid, **(header or {})})


class IdentityProvider:
    def __init__(self, audience: str = "kafka", issuer: str = "https://idp.kbroker.test",
                 lifetime_s: int = 300, alg: str = "RS256"):
        self.audience, self.issuer, self.lifetime_s = audience, issuer, lifetime_s
        self.keys = [SigningKey(alg)]
        self.clients: dict[str, str] = {}
        self.tokens_issued = 0
        self.jwks_reads = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- keys and tokens ---------------------------------------------------------------------

    @property
    def signing_key(self) -> SigningKey:
        return self.keys[-1]

    def rotate(self, alg: str | None = None, keep_old: bool = False) -> SigningKey:
        """Sign with a new key (new kid) from now on; the old one leaves the JWKS unless
        ``keep_old``."""
        key = SigningKey(alg or self.signing_key.alg)
        with self._lock:
            self.keys = (self.keys if keep_old else []) + [key]
        return key

    def jwks(self) -> dict:
        with self._lock:
            return {"keys": [key.jwk() for key in self.keys]}

    def claims(self, subject: str, scope: str | None = "kafka", **overrides) -> dict:
        now = int(time.time())
        claims = {"sub": subject, "iss": self.issuer, "aud": self.audience, "iat": now,
                  "nbf": now, "exp": now + self.lifetime_s}
        if scope is not None:
            claims["scope"] = scope
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, subject: str = "alice", key: SigningKey | None = None, **overrides) -> str:
        """A signed token; ``key`` defaults to the current signing key (pass another
        SigningKey for a token the JWKS cannot verify); claims given as None are left out."""
        return (key or self.signing_key).sign(self.claims(subject, **overrides))

    def add_client(self, client_id: str, secret: str) -> None:
        self.clients[client_id] = secret

    # --- HTTP --------------------------------------------------------------------------------

    def start(self) -> "IdentityProvider":
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                if self.path.split("?")[0] != "/jwks":
                    return self._send(404, {"error": "not_found"})
                with idp._lock:
                    idp.jwks_reads += 1
                self._send(200, idp.jwks())

            def do_POST(self):  # noqa: N802
                if self.path.split("?")[0] != "/token":
                    return self._send(404, {"error": "not_found"})
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                client_id = (form.get("client_id") or [None])[0]
                secret = (form.get("client_secret") or [None])[0]
                auth = self.headers.get("Authorization", "")
                if auth.lower().startswith("basic "):
                    decoded = base64.b64decode(auth[6:]).decode()
                    client_id, _, secret = decoded.partition(":")
                    client_id, secret = (urllib.parse.unquote_plus(client_id),
                                         urllib.parse.unquote_plus(secret))
                if (form.get("grant_type") or [""])[0] != "client_credentials":
                    return self._send(400, {"error": "unsupported_grant_type"})
                if client_id is None or idp.clients.get(client_id) != secret:
                    return self._send(401, {"error": "invalid_client"})
                scope = (form.get("scope") or [None])[0]
                token = idp.token(client_id, scope=scope)
                with idp._lock:
                    idp.tokens_issued += 1
                self._send(200, {"access_token": token, "token_type": "Bearer",
                                 "expires_in": idp.lifetime_s})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True,
                         name="oauth-idp").start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
