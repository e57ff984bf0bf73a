"""SASL/GSSAPI (Kerberos V5, RFC 4752), server side, on MIT Kerberos through the ``gssapi``
binding: no Kerberos is written here.

The exchange, as Java's ``GssKrb5Server`` (Kafka's broker) runs it:

1. context establishment: each client token goes to ``accept_sec_context``; its output token is
   the challenge. The client's service ticket must be for a principal in the listener's keytab
   (``keyTab``/``principal`` of its ``Krb5LoginModule`` JAAS entry; the service name of that
   principal is ``sasl.kerberos.service.name``);
2. once the context is established, the client's next (empty) response gets the wrapped security
   layer offer: 4 bytes, layer mask 1 ("no security layer", the only one Kafka uses) and a maximum
   message size. A client that asked for no mutual authentication gets no AP-REP, so the offer
   answers its first token at once (Java's ``doHandshake1(EMPTY)``; franz-go relies on it);
3. the client answers with a wrapped choice (layer, size, optional authorization id); the layer
   must be 1. An authorization id does not change the principal: Kafka's callback authorizes the
   authenticated principal whatever the client names (kafka-python and aiokafka name the
   service).

The authenticated Kerberos principal maps to ``User:<short name>`` through
``sasl.kerberos.principal.to.local.rules`` (:mod:`kbroker.config.kerberos_rules`). A malformed or
forged token fails the exchange with Kafka's generic message (the GSS error goes to the log);
no rule mapping the principal fails it too.
"""

from __future__ import annotations

import struct

from kbroker.config.kerberos_rules import KerberosName, NoMatchingRule, ShortNamer
from kbroker.security.sasl import InvalidCredentials

MECHANISM = "GSSAPI"
NO_SECURITY_LAYER = 1
MAX_MESSAGE_SIZE = 0xFFFFFF


class GssapiAcceptor:
    """A listener's Kerberos identity: the acceptor credentials from its keytab (acquired once
    at start-up, so a wrong keytab stops the broker) and the short-name rules."""

    def __init__(self, keytab: str, principal: str | None, rules: list[str]):
        import gssapi

        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
        self.credentials = gssapi.Credentials(name=name, usage="accept",
                                              store={"keytab": keytab})
        if principal:
            self.principal = principal
            realm = principal.rpartition("@")[2] or default_realm()
        else:
            self.principal, realm = None, default_realm()
        self.default_realm = realm
        self.short_namer = ShortNamer(rules, default_realm())


def default_realm() -> str:
    """The default realm of the krb5 configuration (KRB5_CONFIG or /etc/krb5.conf)."""
    import gssapi

    name = gssapi.Name("kbroker", gssapi.NameType.kerberos_principal)
    canonical = str(name.canonicalize(gssapi.MechType.kerberos))
    return canonical.rpartition("@")[2]


class GssapiServer:
    mechanism = MECHANISM

    def __init__(self, acceptor: GssapiAcceptor):
        import gssapi

        self._gssapi = gssapi
        self._acceptor = acceptor
        self._context = gssapi.SecurityContext(creds=acceptor.credentials, usage="accept")
        self._stage = 0
        self.complete = False
        self.authorization_id: str | None = None
        self.kerberos_principal: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        gssapi = self._gssapi
        try:
            if self._stage == 0:
                out = self._context.step(bytes(token))
                if self._context.complete:
                    self._stage = 1
                    self.kerberos_principal = str(self._context.initiator_name)
                    if not out:
                        # No mutual authentication asked (no AP-REP to send): the offer goes
                        # out now, as Java's GssKrb5Server does (franz-go waits for it here).
                        return self._offer()
                return out or b""
            if self._stage == 1:
                if token:
                    raise InvalidCredentials("GSSAPI: the final handshake step should be an "
                                             "empty response")
                return self._offer()
            if self._stage == 2:
                answer = self._context.unwrap(bytes(token)).message
                if len(answer) < 4:
                    raise InvalidCredentials("GSSAPI: the client's security layer answer is "
                                             "shorter than 4 bytes")
                if answer[0] != NO_SECURITY_LAYER:
                    raise InvalidCredentials(f"GSSAPI: the client chose security layer "
                                             f"{answer[0]}, only 1 (none) is offered")
                # An authorization id the client names (kafka-python and aiokafka send the
                # service's name) does not change who it is: Kafka's SaslServerCallbackHandler
                # authorizes the authentication id itself.
                self.authorization_id = self._short_name()
                self.complete = True
                return b""
        except gssapi.exceptions.GSSError as exc:
            raise InvalidCredentials(f"GSSAPI: {exc.gen_message()}") from None
        raise InvalidCredentials("GSSAPI: a token after the exchange completed")

    def _offer(self) -> bytes:
        """The wrapped security layer offer (step 2 of the exchange)."""
        self._stage = 2
        offer = struct.pack(">I", (NO_SECURITY_LAYER << 24) | MAX_MESSAGE_SIZE)
        return self._context.wrap(offer, False).message

    def _short_name(self) -> str:
        try:
            return self._acceptor.short_namer.short_name(
                KerberosName.parse(self.kerberos_principal))
        except (NoMatchingRule, ValueError) as exc:
            raise InvalidCredentials(f"GSSAPI: {exc}") from None
