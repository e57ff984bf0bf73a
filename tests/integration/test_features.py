"""Feature flags over real sockets: ApiVersions v3/v4 supported and finalized features,
UpdateFeatures v1/v2 answered as Kafka 4.3.1's controller does (the finalized level is accepted,
anything else fails the request with INVALID_UPDATE_VERSION and Kafka's message), and Kafka's own
``kafka-features.sh`` describe (Java Admin.describeFeatures, which reads ApiVersions) and upgrade
(Admin.updateFeatures)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.protocol import messages
from tests.integration.clients import Wire, running_broker

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kafka_ref"))
import run_kafka  # noqa: E402  (stdlib-only launcher of the reference Kafka)

API_VERSIONS, UPDATE_FEATURES = 18, 57
INVALID_UPDATE_VERSION = 95


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("features") / "data") as process:
        yield process


def api_versions(bootstrap: str, version: int):
    with Wire(bootstrap) as wire:
        return wire.call(API_VERSIONS, version, messages.request_class(API_VERSIONS)(
            client_software_name="kbroker-tests", client_software_version="1"))


def update(bootstrap: str, version: int, feature: str, level: int, upgrade_type: int = 1):
    cls = messages.request_class(UPDATE_FEATURES)
    with Wire(bootstrap) as wire:
        return wire.call(UPDATE_FEATURES, version, cls(
            timeout_ms=5000, validate_only=False, feature_updates=[cls.FeatureUpdateKey(
                feature=feature, max_version_level=level, allow_downgrade=False,
                upgrade_type=upgrade_type)]))


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_lists_features(broker, version):
    r = api_versions(broker.bootstrap, version)
    assert r.error_code == 0
    assert {f.name: (f.min_version, f.max_version) for f in r.supported_features} == {
        "metadata.version": (30, 30), "transaction.version": (1, 1)}
    assert {f.name: (f.min_version_level, f.max_version_level)
            for f in r.finalized_features} == {"metadata.version": (30, 30),
                                               "transaction.version": (1, 1)}
    assert r.finalized_features_epoch >= 0
    assert any(k.api_key == UPDATE_FEATURES and k.max_version == 2 for k in r.api_keys)


def test_update_to_the_finalized_level_succeeds(broker):
    v1 = update(broker.bootstrap, 1, "transaction.version", 1)
    assert v1.error_code == 0
    assert [(x.feature, x.error_code, x.error_message) for x in v1.results] == [
        ("transaction.version", 0, "NONE")]
    v2 = update(broker.bootstrap, 2, "metadata.version", 30)
    assert (v2.error_code, v2.results) == (0, [])


def test_update_to_another_level_or_feature_fails(broker):
    r = update(broker.bootstrap, 1, "transaction.version", 2)
    assert r.error_code == INVALID_UPDATE_VERSION and r.results == []
    assert r.error_message == (
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 2 for feature transaction.version. Local controller 1 only "
        "supports versions 1-1")
    r = update(broker.bootstrap, 2, "group.version", 1)
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message.endswith("Invalid update version 1 for feature group.version. "
                                    "Local controller 1 does not support this feature.")


def test_kafka_features_describe(broker):
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.FeatureCommand",
                             ["--bootstrap-server", broker.bootstrap, "describe"],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("Feature:")}
    assert set(lines) == {"metadata.version", "transaction.version"}, done.stdout
    assert "FinalizedVersionLevel: 1" in lines["transaction.version"]
    assert "FinalizedVersionLevel: 4.3-IV0" in lines["metadata.version"]


def feature_tool(bootstrap: str, *args: str):
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.FeatureCommand",
                             ["--bootstrap-server", bootstrap, *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_kafka_features_upgrade(broker):
    done = feature_tool(broker.bootstrap, "upgrade", "--feature", "transaction.version=1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "transaction.version was upgraded to 1." in done.stdout
    done = feature_tool(broker.bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert done.returncode == 1
    assert "Local controller 1 only supports versions 1-1" in done.stdout
