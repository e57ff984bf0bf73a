"""Start-up: each listener's security, built from the config (files read, JAAS entries parsed),
and the client side of the inter-broker listener (:func:`inter_broker`).

A problem becomes a :class:`~kbroker.startup.StartupError` naming the listener and the key, so a
broker never starts a listener it cannot secure as configured.
"""

from __future__ import annotations

from kbroker.config.listeners import uses_sasl, uses_tls
from kbroker.server.authenticator import FailureLog, ListenerSecurity
from kbroker.startup import EXIT_LISTENER, StartupError


def build(config, listener: str, scram_lookup, failures: FailureLog) -> ListenerSecurity:
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
                module, options = jaas.parse(text)
                expected = jaas.OAUTHBEARER_MODULE if mechanism == "OAUTHBEARER" \
                    else jaas.SCRAM_MODULE
                if module != expected:
                    raise ValueError(f"{mechanism} needs {expected}, not {module}")
                if mechanism == "OAUTHBEARER":
                    security.oauth_options = ValidatorOptions(options)
            except ValueError as exc:
                raise StartupError(f"invalid {key}: {exc}", f"fix {key}", EXIT_LISTENER) from None
    return security


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
