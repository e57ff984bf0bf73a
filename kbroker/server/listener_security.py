"""Start-up: each listener's security, built from the config (files read, JAAS entries parsed),
and the client side of the inter-broker listener (:func:`inter_broker`).

A problem becomes a :class:`~kbroker.startup.StartupError` naming the listener and the key, so a
broker never starts a listener it cannot secure as configured.
"""

from __future__ import annotations

import logging

from kbroker.config.listeners import CALLBACK_KEY, JWKS_VALIDATOR, uses_sasl, uses_tls
from kbroker.server.authenticator import FailureLog, ListenerSecurity
from kbroker.startup import EXIT_LISTENER, StartupError

log = logging.getLogger("kbroker.auth")


def build(config, listener: str, scram_lookup, failures: FailureLog, token_lookup=None
          ) -> ListenerSecurity:
    protocol = config.security_protocol(listener)
    setting = lambda key: config.listener_get(listener, key)  # noqa: E731
    security = ListenerSecurity(listener, protocol, failures=failures,
                                max_receive_size=setting("sasl.server.max.receive.size"),
                                failure_delay_ms=setting(
                                    "connection.failed.authentication.delay.ms"))
    if uses_tls(protocol):
        from kbroker.security.principal import PrincipalMapper
        from kbroker.security.tls import TlsConfigError, server_context

        try:
            security.ssl_context = server_context(setting, listener)
        except TlsConfigError as exc:
            raise StartupError(str(exc), f"fix {exc.key} (or listener.name.{listener.lower()}."
                               f"{exc.key})", EXIT_LISTENER) from None
        try:
            security.principal_mapper = PrincipalMapper(setting("ssl.principal.mapping.rules"))
        except ValueError as exc:
            raise StartupError(f"listener {listener}: ssl.principal.mapping.rules: {exc}",
                               "fix ssl.principal.mapping.rules", EXIT_LISTENER) from None
    if uses_sasl(protocol):
        from kbroker.security.sasl import jaas

        from kbroker.security.sasl.oauthbearer import ValidatorOptions

        security.mechanisms = [m.upper() for m in setting("sasl.enabled.mechanisms")]
        security.scram_lookup = scram_lookup
        security.token_lookup = token_lookup
        for mechanism in security.mechanisms:
            # Kafka's connectionsMaxReauthMsByMechanism; 0 or less means no limit.
            security.max_reauth_ms[mechanism] = config.max_reauth_ms(listener, mechanism)
            text = config.jaas_config(listener, mechanism)
            key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
            if text is None:
                continue
            try:
                if mechanism == "PLAIN":
                    security.plain_users = jaas.plain_users(text)
                    continue
                if mechanism == "GSSAPI":
                    security.gssapi_acceptor = _kerberos_acceptor(config, listener, text, key)
                    continue
                module, options = jaas.parse(text)
                expected = jaas.OAUTHBEARER_MODULE if mechanism == "OAUTHBEARER" \
                    else jaas.SCRAM_MODULE
                if module != expected:
                    raise ValueError(f"{mechanism} needs {expected}, not {module}")
                if mechanism == "OAUTHBEARER":
                    security.oauth_options = ValidatorOptions(options)
            except ValueError as exc:
                raise StartupError(f"invalid {key}: {exc}", f"fix {key}", EXIT_LISTENER) from None
        if "OAUTHBEARER" in security.mechanisms:
            _signed_tokens(config, listener, security)
        elif config.callback_handler(listener, "OAUTHBEARER") is not None:
            key = f"listener.name.{listener.lower()}.oauthbearer.{CALLBACK_KEY}"
            raise StartupError(f"{key} is set but OAUTHBEARER is not in the listener's "
                               "sasl.enabled.mechanisms", f"enable OAUTHBEARER or remove {key}",
                               EXIT_LISTENER)
    return security


def _kerberos_acceptor(config, listener: str, text: str, key: str):
    """The listener's Kerberos identity from its Krb5LoginModule entry (useKeyTab, keyTab,
    principal): the keytab must hold the principal's key, else the broker does not start."""
    from kbroker.security.sasl import jaas

    module, options = jaas.parse(text)
    if module != jaas.KRB5_MODULE:
        raise ValueError(f"GSSAPI needs {jaas.KRB5_MODULE}, not {module}")
    if options.get("useKeyTab", "false").lower() != "true" or not options.get("keyTab"):
        raise ValueError('a broker logs in from a keytab: useKeyTab=true keyTab="<path>" '
                         '(a ticket cache login is not implemented by kbroker)')
    principal = options.get("principal")
    service = config.mechanism_get(listener, "GSSAPI", "sasl.kerberos.service.name")
    if principal and principal.split("/")[0].split("@")[0] != service:
        raise ValueError(f"the principal {principal} is not of the service "
                         f"sasl.kerberos.service.name={service}")
    try:
        import gssapi
    except ImportError:
        raise StartupError(f"listener {listener}: GSSAPI needs the gssapi package (MIT Kerberos)",
                           "pip install 'kbroker[kerberos]' (it builds against libkrb5-dev)",
                           EXIT_LISTENER) from None
    from kbroker.security.sasl.gssapi import GssapiAcceptor

    try:
        acceptor = GssapiAcceptor(options["keyTab"], principal, config.mechanism_get(
            listener, "GSSAPI", "sasl.kerberos.principal.to.local.rules"))
        acceptor.credentials.inquire()
    except gssapi.exceptions.GSSError as exc:
        raise ValueError(f"cannot use the keytab {options['keyTab']} for "
                         f"{principal or 'any principal'}: {exc.gen_message()}") from None
    return acceptor


def _signed_tokens(config, listener: str, security: ListenerSecurity) -> None:
    """KIP-768: Kafka's OAuthBearerValidatorCallbackHandler on this listener validates signed
    tokens against the JWKS; without it the JWKS settings would be ignored (Kafka's broker then
    uses the unsecured validator), so they are refused."""
    handler_key = f"listener.name.{listener.lower()}.oauthbearer.{CALLBACK_KEY}"
    setting = lambda key: config.mechanism_get(listener, "OAUTHBEARER", key)  # noqa: E731
    url = setting("sasl.oauthbearer.jwks.endpoint.url")
    if config.callback_handler(listener, "OAUTHBEARER") != JWKS_VALIDATOR:
        if url:
            raise StartupError(
                f"listener {listener}: sasl.oauthbearer.jwks.endpoint.url is set but {handler_key} "
                f"is not {JWKS_VALIDATOR}, so the JWKS would not be used (Kafka validates "
                "unsecured tokens then)", f"set {handler_key}={JWKS_VALIDATOR}", EXIT_LISTENER)
        return
    if not url:
        # Kafka's OAuthBearerValidatorCallbackHandler.configure message.
        raise StartupError(
            'The OAuth validator for the broker requires "sasl.oauthbearer.jwks.endpoint.url" to '
            'be configured so that JWT signatures can be verified, but it was not set. Set '
            '"sasl.oauthbearer.jwks.endpoint.url" to the OAuth/OIDC provider\'s JWKS endpoint URL '
            'for this listener, or configure a signature-verifying '
            '"sasl.oauthbearer.jwt.validator.class".',
            f"set sasl.oauthbearer.jwks.endpoint.url (or listener.name.{listener.lower()}."
            "sasl.oauthbearer.jwks.endpoint.url)", EXIT_LISTENER)
    if not url.startswith(("http://", "https://", "file://")):
        raise StartupError(f"listener {listener}: sasl.oauthbearer.jwks.endpoint.url {url!r} is "
                           "not an http://, https:// or file:// URL",
                           "fix sasl.oauthbearer.jwks.endpoint.url", EXIT_LISTENER)
    try:
        import jwt  # noqa: F401  (PyJWT with cryptography verifies the signatures)
        import cryptography  # noqa: F401
    except ImportError:
        raise StartupError(f"listener {listener}: validating signed OAUTHBEARER tokens needs "
                           "PyJWT and cryptography", "pip install 'kbroker[oauth]'",
                           EXIT_LISTENER) from None
    from kbroker.security.sasl.jwt import BrokerJwtOptions, JwksKeys, JwksValidator
    from kbroker.server.jwks import JwksRefresher

    options = BrokerJwtOptions(
        jwks_url=url, expected_audience=list(setting("sasl.oauthbearer.expected.audience")),
        expected_issuer=setting("sasl.oauthbearer.expected.issuer"),
        clock_skew_s=setting("sasl.oauthbearer.clock.skew.seconds"),
        scope_claim=setting("sasl.oauthbearer.scope.claim.name"),
        sub_claim=setting("sasl.oauthbearer.sub.claim.name"),
        refresh_ms=setting("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
        retry_backoff_ms=setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
        retry_backoff_max_ms=setting("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"))
    if not options.expected_audience or options.expected_issuer is None:
        missing = " and ".join(k for k, v in (
            ("sasl.oauthbearer.expected.audience", options.expected_audience),
            ("sasl.oauthbearer.expected.issuer", options.expected_issuer)) if not v)
        log.warning("listener %s validates OAUTHBEARER tokens without %s: any issuer is "
                    "accepted and a token with an audience is refused, as Kafka does; setting "
                    "them is strongly advised", listener, missing)
    keys = JwksKeys(url)
    security.oauth_options = JwksValidator(options, keys)
    security.jwks_refresher = JwksRefresher(keys, options.refresh_ms, options.retry_backoff_ms,
                                            options.retry_backoff_max_ms, listener)


def inter_broker(config):
    """How this broker connects to the others (cluster mode): an InterBrokerSecurity."""
    from kbroker.security.inter_broker import InterBrokerSecurityError, from_config
    from kbroker.security.tls import TlsConfigError

    try:
        return from_config(config)
    except (InterBrokerSecurityError, TlsConfigError) as exc:
        listener = config.inter_broker_listener_name or ""
        hint = exc.key if exc.key.startswith("listener.name.") else \
            f"{exc.key} (or listener.name.{listener.lower()}.{exc.key})"
        raise StartupError(f"inter-broker client: {exc}", f"fix {hint}", EXIT_LISTENER) from None
