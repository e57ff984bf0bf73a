"""The registry listener's security: TLS, HTTP basic authentication mapped to kbroker's users,
and ACLs through kbroker's authorizer.

TLS: an ``https://`` URL in ``schema.registry.listeners`` serves TLS with the broker's ``ssl.*``
keys as a listener named ``SCHEMA_REGISTRY`` reads them: ``listener.name.schema_registry.ssl.*``
first, then the broker-wide ``ssl.*`` (kbroker.security.tls builds the context, as for Kafka
listeners; ``ssl.client.auth=required`` asks for client certificates). Brokers forwarding to
the leader's https listener use the same keys on the client side.

Authentication (``schema.registry.authentication=basic``): every request carries
``Authorization: Basic`` with a kbroker user and password: a SCRAM user (``kafka-configs
--alter --add-config SCRAM-SHA-256=[password=...]``; the password is checked against the stored
SCRAM-SHA-256 or -512 credential, whichever verifies) or a PLAIN user of a listener's
PlainLoginModule JAAS entry. Without valid credentials: 401, error 40101. A checked password is
remembered (by its SHA-256, with the credential it matched) so a request costs no PBKDF2 run.
The principal is ``User:<name>``; without authentication it is ``User:ANONYMOUS``.

Authorization (with ``authorizer.class.name`` set; none means everything is allowed): a subject
is guarded by the TOPIC ACLs of the topic it names (``orders-value`` and ``orders-key`` by topic
``orders``, any other subject by the topic of its own name): READ to look it up, read its
versions, config and mode, and check compatibility; WRITE to register, delete, and set its
config or mode. The global config and mode need DESCRIBE_CONFIGS (read) or ALTER_CONFIGS
(write) on the CLUSTER. A schema by id needs READ on a subject that uses it; listings show only
the subjects the principal may READ. ``super.users`` may do everything. Denied: 403, error 40301.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from kbroker.schema_registry import errors
from kbroker.security.authorizer import CLUSTER_NAME, Op, ResourceType, authorizer_of

LISTENER = "SCHEMA_REGISTRY"
ANONYMOUS = "User:ANONYMOUS"
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_MAX_REMEMBERED = 10_000


class RegistrySecurity:
    def __init__(self, config, controller, basic: bool, plain_users: dict[str, str]):
        self.config = config
        self.controller = controller
        self.basic = basic
        self.plain_users = plain_users
        self.authorizer = authorizer_of(config)
        self._verified: dict[tuple, str] = {}  # (user, sha256(password)) -> credential matched

    # --- authentication -------------------------------------------------------------------------

    def authenticate(self, request) -> str:
        if not self.basic:
            return ANONYMOUS
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic" or not token:
            raise _unauthorized()
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized() from None
        if not sep or not self._valid(user, password):
            raise _unauthorized()
        return f"User:{user}"

    def _valid(self, user: str, password: str) -> bool:
        key = (user, hashlib.sha256(password.encode()).digest())
        plain = self.plain_users.get(user)
        if plain is not None and hmac.compare_digest(plain.encode(), password.encode()):
            return True
        image = self.controller.image
        for mechanism in _SCRAM:
            stored = image.scram_credential(user, mechanism)
            if not stored:
                continue
            if self._verified.get(key) == stored:
                return True
            if _scram_matches(mechanism, stored, password):
                if len(self._verified) >= _MAX_REMEMBERED:
                    self._verified.clear()
                self._verified[key] = stored
                return True
        return False

    # --- authorization --------------------------------------------------------------------------

    def authorize(self, call, route) -> None:
        if self.authorizer is None or route.access is None or route.access == "list":
            return
        kind, _, operation = route.access.partition(":")
        if kind == "subject":
            subject = call.params["subject"]
            if not self.may(call, subject, operation):
                raise errors.forbidden(f"User {call.principal} is denied operation "
                                       f"{operation.title()} on Subject: {subject}")
        elif kind == "global":
            op = Op.ALTER_CONFIGS if operation == "WRITE" else Op.DESCRIBE_CONFIGS
            if not self._allowed(call, op, ResourceType.CLUSTER, CLUSTER_NAME):
                raise errors.forbidden(f"User {call.principal} is denied operation "
                                       f"{op.name} on Cluster")
        elif kind == "id":
            users = self._subjects_of_id(call)
            if users is not None and not any(self.may(call, s, "READ") for s in users):
                raise errors.forbidden(f"User {call.principal} is denied operation Read on "
                                       f"the subjects of schema {call.params['id']}")

    def may(self, call, subject: str, operation: str) -> bool:
        if self.authorizer is None:
            return True
        op = Op.WRITE if operation == "WRITE" else Op.READ
        return self._allowed(call, op, ResourceType.TOPIC, topic_of(subject))

    def _allowed(self, call, op, resource_type, name: str) -> bool:
        return self.authorizer.authorize(self.controller.image.acls, call.principal,
                                         call.request.peer, op, resource_type, name)

    @staticmethod
    def _subjects_of_id(call):
        try:
            shard = call.registry.local_shard()
            users = shard.id_users.get(int(call.params["id"]))
        except Exception:  # not here (forwarded: the leader decides), or not a number
            return None
        return None if users is None else {s for s, _ in users}

    # --- TLS for forwarding ---------------------------------------------------------------------

    def client_context(self):
        from kbroker.security.tls import client_context
        return client_context(lambda key: self.config.listener_get(LISTENER, key), LISTENER)


def topic_of(subject: str) -> str:
    """The topic a subject names (Confluent's TopicNameStrategy: ``<topic>-key``/``-value``)."""
    for suffix in ("-value", "-key"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[:-len(suffix)]
    return subject


def _scram_matches(mechanism: str, stored: str, password: str) -> bool:
    from kbroker.security.sasl.scram import ScramCredential
    try:
        credential = ScramCredential.from_string(stored)
    except (ValueError, KeyError, binascii.Error):
        return False
    candidate = ScramCredential.from_password(mechanism, password, credential.salt,
                                              credential.iterations)
    return hmac.compare_digest(candidate.stored_key, credential.stored_key)


def _unauthorized() -> errors.RegistryError:
    return errors.unauthorized("Unauthorized")


def build_security(broker) -> RegistrySecurity | None:
    """The registry's security, or None when it needs neither authentication nor an authorizer
    (TLS alone is the listener's, kbroker.schema_registry.service)."""
    config = broker.config
    basic = config.get("schema.registry.authentication") == "basic"
    if not basic and authorizer_of(config) is None and not _https(config):
        return None
    plain_users: dict[str, str] = {}
    if basic:
        from kbroker.security.sasl.jaas import plain_users as parse_plain_users
        for endpoint in config.listeners:
            text = config.jaas_config(endpoint.name, "PLAIN")
            if text:
                try:
                    plain_users.update(parse_plain_users(text))
                except ValueError:
                    pass  # the Kafka listener refuses it at start-up with the reason
    return RegistrySecurity(config, broker.controller, basic, plain_users)


def _https(config) -> bool:
    return any(url.startswith("https://") for url in config.get("schema.registry.listeners"))


def server_ssl_context(config):
    """The TLS context of an https:// registry listener; ValueError naming the key to fix."""
    from kbroker.security.tls import TlsConfigError, server_context
    try:
        return server_context(lambda key: config.listener_get(LISTENER, key), LISTENER)
    except TlsConfigError as exc:
        raise ValueError(f"the schema registry's https listener: {exc} (fix "
                         f"listener.name.schema_registry.{exc.key} or {exc.key})") from None
