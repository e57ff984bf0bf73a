"""How the admin commands reach a broker: rpk's ``-X`` options and ``--brokers``.

rpk spells connection settings as ``-X key=value`` (``brokers``, ``tls.enabled``, ``tls.ca``,
``tls.cert``, ``tls.key``, ``tls.insecure_skip_verify``, ``sasl.mechanism``, ``user``, ``pass``)
and takes them before or after the subcommand (``rpk -X brokers=h:p topic list``), or from
``$KBROKER_<KEY>`` (``KBROKER_BROKERS``, ``KBROKER_TLS_CA``, ``KBROKER_USER``, ...). They become
kafka-python client settings: TLS through an ``ssl.SSLContext``, SASL PLAIN or SCRAM, the security
protocol implied (``tls.*`` -> SSL, ``user`` -> SASL_PLAINTEXT, both -> SASL_SSL).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kbroker.suggest import did_you_mean

DEFAULT_BROKERS = "localhost:9092"
# How long to try the bootstrap servers before "cannot reach" (kafka-python waits 30 s); longer
# with TLS or SASL, whose handshakes (and a broker's delayed answer to a failed login) take longer.
BOOTSTRAP_TIMEOUT_MS = 5000
SECURED_BOOTSTRAP_TIMEOUT_MS = 10000
X_KEYS = {
    "brokers": "bootstrap servers, HOST:PORT[,HOST:PORT] (default $KBROKER_BROKERS or "
               f"{DEFAULT_BROKERS})",
    "client.id": "client id sent to the broker (default kbroker-cli)",
    "tls.enabled": "true: speak TLS (implied by tls.ca, tls.cert and tls.key)",
    "tls.insecure_skip_verify": "true: do not verify the broker's certificate",
    "tls.ca": "PEM file of the CA(s) the broker's certificate chains to",
    "tls.cert": "PEM client certificate (mTLS; needs tls.key)",
    "tls.key": "PEM client key (mTLS; needs tls.cert)",
    "sasl.mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    "user": "SASL user name",
    "pass": "SASL password",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


class OptionError(ValueError):
    """Bad connection options: one line, exit 2 (bad usage)."""


def connection_flags() -> argparse.ArgumentParser:
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("-X", dest="x_options", metavar="KEY=VALUE", action="append", default=[],
                       help="client option, rpk style: brokers=HOST:PORT, tls.enabled=true, tls.ca=, "
                            "tls.cert=, tls.key=, sasl.mechanism=, user=, pass= (-X list: all)")
    flags.add_argument("--brokers", help=f"bootstrap servers (default $KBROKER_BROKERS or "
                                         f"{DEFAULT_BROKERS})")
    return flags


def hoist_leading_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``-X ...`` / ``--brokers ...`` given before the subcommand from the rest, so that
    ``kbroker -X brokers=h:p topic list`` parses as ``kbroker topic list -X brokers=h:p``."""
    flags, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token in ("-X", "--brokers") and i + 1 < len(argv):
            flags += argv[i:i + 2]
            i += 2
        elif (token.startswith("-X") and len(token) > 2) or token.startswith("--brokers="):
            flags.append(token)
            i += 1
        else:
            break
    return argv[i:], flags


def parse_x_options(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise OptionError(f"-X {item}: expected KEY=VALUE (-X list shows the keys)")
        if key not in X_KEYS:
            raise OptionError(f"-X: unknown option '{key}'{did_you_mean(key, X_KEYS)}")
        options[key] = value
    return options


def environment_options() -> dict[str, str]:
    """``$KBROKER_<KEY>`` for every -X key (``KBROKER_TLS_CA`` for ``tls.ca``), as rpk reads
    ``$RPK_<KEY>``; -X wins."""
    return {key: os.environ[name] for key in X_KEYS
            if (name := "KBROKER_" + key.upper().replace(".", "_")) in os.environ}


def x_keys_help() -> str:
    width = max(map(len, X_KEYS))
    return "\n".join(f"{key.ljust(width)}  {text}" for key, text in X_KEYS.items())


def client_config(args: argparse.Namespace) -> dict:
    """kafka-python keyword arguments (``bootstrap_servers``, ``client_id``, security,
    ``bootstrap_timeout_ms``) from
    ``args.x_options`` and ``args.brokers``."""
    options = {**environment_options(), **parse_x_options(args.x_options)}
    brokers = args.brokers or options.get("brokers") or DEFAULT_BROKERS
    config = {"bootstrap_servers": brokers, "client_id": options.get("client.id", "kbroker-cli")}
    tls = _tls_context(options)
    sasl = _sasl(options)
    if tls is not None:
        config["ssl_context"] = tls
    config["security_protocol"] = {(False, False): "PLAINTEXT", (True, False): "SSL",
                                   (False, True): "SASL_PLAINTEXT",
                                   (True, True): "SASL_SSL"}[(tls is not None, bool(sasl))]
    config.update(sasl)
    secured = config["security_protocol"] != "PLAINTEXT"
    config["bootstrap_timeout_ms"] = SECURED_BOOTSTRAP_TIMEOUT_MS if secured else BOOTSTRAP_TIMEOUT_MS
    return config


def _flag(options: dict, key: str) -> bool:
    value = options.get(key, "false").lower()
    if value not in TRUE + FALSE:
        raise OptionError(f"-X {key}={options[key]}: expected true or false")
    return value in TRUE


def _file(options: dict, key: str) -> str | None:
    path = options.get(key)
    if path is not None and not Path(path).is_file():
        raise OptionError(f"-X {key}={path}: no such file")
    return path


def _tls_context(options: dict):
    ca, cert, key = _file(options, "tls.ca"), _file(options, "tls.cert"), _file(options, "tls.key")
    insecure = _flag(options, "tls.insecure_skip_verify")
    if not (_flag(options, "tls.enabled") or ca or cert or key or insecure):
        return None
    if bool(cert) != bool(key):
        raise OptionError("-X tls.cert and -X tls.key go together (the client certificate "
                               "and its key)")
    import ssl

    try:
        context = ssl.create_default_context(cafile=ca)
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert:
            context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise OptionError(f"TLS files: {exc.reason or exc}") from None
    return context


def _sasl(options: dict) -> dict:
    mechanism, user, password = (options.get(k) for k in ("sasl.mechanism", "user", "pass"))
    if mechanism is None and user is None and password is None:
        return {}
    if mechanism is None:
        raise OptionError(f"-X user/pass need -X sasl.mechanism ({', '.join(MECHANISMS)})")
    if mechanism.upper() not in MECHANISMS:
        raise OptionError(f"-X sasl.mechanism={mechanism}: expected one of "
                               f"{', '.join(MECHANISMS)}{did_you_mean(mechanism.upper(), MECHANISMS)}")
    if user is None or password is None:
        raise OptionError(f"-X sasl.mechanism={mechanism} needs -X user= and -X pass=")
    return {"sasl_mechanism": mechanism.upper(), "sasl_plain_username": user,
            "sasl_plain_password": password}
