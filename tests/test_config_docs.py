"""docs/configuration.md is generated from the configuration tables: regenerating changes nothing.

A key added to kbroker/config/ without regenerating the reference fails here, so the reference a
newcomer reads always matches what the broker accepts, ignores and refuses.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_configuration_reference_is_up_to_date():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_config_docs.py"), "--check"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_key_has_a_row():
    sys.path.insert(0, str(REPO))
    from kbroker.config import BROKER_CONFIGS, TOPIC_CONFIGS

    text = (REPO / "docs" / "configuration.md").read_text()
    rows = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    assert set(BROKER_CONFIGS) | set(TOPIC_CONFIGS) <= rows


# Features kbroker has, each with the module that implements it and the phrases a refusal or a
# "no effect" reason would use if it still claimed the feature missing. Add a row when a feature
# lands; the test fails while any text (the generated reference, the tables' refusal messages,
# the docs) still says it is not there.
EXISTING_FEATURES = [
    ("kbroker.security.tls", [r"TLS \(SSL listeners\)", r"TLS and SASL between brokers"]),
    ("kbroker.server.authenticator", [r"SASL authentication is not implemented"]),
    ("kbroker.security.authorizer", [r"ACLs are not implemented"]),
    ("kbroker.security.sasl.gssapi", [r"\bGSSAPI\b[^,()]{0,30}\bnot implemented",
                                      r"GSSAPI, Kafka's default, is not implemented",
                                      r"refused when set\): GSSAPI", r"Not yet: [^\n]*GSSAPI",
                                      r"mechanisms? GSSAPI [^,()]{0,30}refused"]),
    ("kbroker.security.sasl.jwt", [r"validating signed OAUTHBEARER tokens",
                                   r"signed tokens \(JWKS\)[^.]{0,40}refused",
                                   r"OAUTHBEARER with signed tokens \(JWKS\)"]),
    ("kbroker.log.recompression", [r"recompressing on the broker", r"which compression.type="
                                                                   r"producer never does"]),
    ("kbroker.log.segment", [r"preallocating segment files"]),
    ("kbroker.metadata.zk.store", [r"ZooKeeper[^.]{0,40}not implemented"]),
    ("kbroker.handlers.delegation_tokens", [r"delegation token API \(KIP-48\)",
                                            r"delegation tokens?[^.\n]{0,40}not implemented",
                                            r"no delegation tokens"]),
]


def _refusal_texts():
    """Every refusal a table can give (for a sample value), every no-effect reason, and the
    texts of the unknown-key families."""
    sys.path.insert(0, str(REPO))
    from kbroker.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType
    from kbroker.config.broker_table import SECURITY_PREFIXES

    texts = []
    for definition in list(BROKER_CONFIGS.values()) + list(TOPIC_CONFIGS.values()):
        if definition.no_effect:
            texts.append((definition.name, definition.no_effect))
        if definition.update_refused:
            texts.append((definition.name, definition.update_refused))
        if definition.unsupported is not None:
            sample = {ConfigType.LIST: ["OTHER"], ConfigType.BOOLEAN: True,
                      ConfigType.INT: 1, ConfigType.LONG: 1}.get(definition.type, "OTHER")
            reason = definition.unsupported(sample)
            if reason:
                texts.append((definition.name, reason))
    texts += [(prefix, feature) for prefix, feature in SECURITY_PREFIXES.items()]
    return texts


def test_refusals_name_only_features_that_do_not_exist():
    import importlib
    import re

    documents = {path.name: path.read_text() for path in
                 [REPO / "docs" / "configuration.md", REPO / "docs" / "security.md",
                  REPO / "README.md"]}
    problems = []
    for module, phrases in EXISTING_FEATURES:
        importlib.import_module(module)  # the feature is there
        for phrase in phrases:
            pattern = re.compile(phrase, re.IGNORECASE)
            problems += [f"{name}: {text!r} (but {module} exists)"
                         for name, text in _refusal_texts() if pattern.search(text)]
            problems += [f"{doc}: {match.group(0)!r} (but {module} exists)"
                         for doc, text in documents.items() for match in pattern.finditer(text)]
    assert not problems, "\n".join(problems)
