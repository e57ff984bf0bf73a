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
