"""Feature flags over real sockets: ApiVersions v3/v4 supported and finalized features as Kafka
4.4.0 lists them (``transaction.version`` and ``share.version`` 0-2, finalized 2), UpdateFeatures v0-2 answered as
Kafka 4.4.0's controller does (a level within the range is finalized, a downgrade needs the
downgrade type, anything else fails the request with INVALID_UPDATE_VERSION and Kafka's message),
and Kafka's own ``kafka-features.sh`` describe (Java Admin.describeFeatures, which reads
ApiVersions) and upgrade/downgrade (Admin.updateFeatures)."""

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


def finalized(bootstrap: str) -> tuple[int, dict]:
    r = api_versions(bootstrap, 4)
    return r.finalized_features_epoch, {f.name: (f.min_version_level, f.max_version_level)
                                        for f in r.finalized_features}


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_lists_features(broker, version):
    r = api_versions(broker.bootstrap, version)
    assert r.error_code == 0
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    # v3 leaves out features whose minimum is 0, as Kafka does.
    assert supported == ({"metadata.version": (33, 33), "transaction.version": (0, 2),
                          "share.version": (0, 2), "group.version": (0, 1),
                          "streams.version": (0, 1)}
                         if version >= 4 else {"metadata.version": (33, 33)})
    assert {f.name: (f.min_version_level, f.max_version_level)
            for f in r.finalized_features} == {"metadata.version": (33, 33),
                                               "transaction.version": (2, 2),
                                               "share.version": (2, 2),
                                               "group.version": (1, 1),
                                               "streams.version": (1, 1)}
    assert r.finalized_features_epoch >= 0
    assert any(k.api_key == UPDATE_FEATURES and k.max_version == 2 for k in r.api_keys)


def test_update_to_the_finalized_level_succeeds(broker):
    v1 = update(broker.bootstrap, 1, "transaction.version", 2)
    assert v1.error_code == 0
    assert [(x.feature, x.error_code, x.error_message) for x in v1.results] == [
        ("transaction.version", 0, "NONE")]
    v2 = update(broker.bootstrap, 2, "metadata.version", 33)
    assert (v2.error_code, v2.results) == (0, [])


def test_transaction_version_downgrades_and_upgrades(broker):
    r = update(broker.bootstrap, 1, "transaction.version", 1)
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message.endswith(
        "Invalid update version 1 for feature transaction.version. Can't downgrade the version "
        "of this feature without setting the upgrade type to either safe or unsafe downgrade.")
    epoch, levels = finalized(broker.bootstrap)
    assert levels["transaction.version"] == (2, 2)
    try:
        assert update(broker.bootstrap, 1, "transaction.version", 1, upgrade_type=2).error_code \
            == 0
        later, levels = finalized(broker.bootstrap)
        assert levels["transaction.version"] == (1, 1) and later > epoch
        # Level 0 is not listed as finalized (Kafka leaves level-0 features out).
        assert update(broker.bootstrap, 2, "transaction.version", 0, upgrade_type=2).error_code \
            == 0
        assert "transaction.version" not in finalized(broker.bootstrap)[1]
    finally:
        assert update(broker.bootstrap, 2, "transaction.version", 2).error_code == 0
    assert finalized(broker.bootstrap)[1]["transaction.version"] == (2, 2)


def test_update_to_another_level_or_feature_fails(broker):
    r = update(broker.bootstrap, 1, "transaction.version", 3)
    assert r.error_code == INVALID_UPDATE_VERSION and r.results == []
    assert r.error_message == (
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 3 for feature transaction.version. Local controller 1 only "
        "supports versions 0-2")
    r = update(broker.bootstrap, 2, "group.version", 2)
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message.endswith("Invalid update version 2 for feature group.version. "
                                    "Local controller 1 only supports versions 0-1")
    r = update(broker.bootstrap, 2, "kraft.version", 1)
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message.endswith("Invalid update version 1 for feature kraft.version. "
                                    "Local controller 1 does not support this feature.")


def test_kafka_features_describe(broker):
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.FeatureCommand",
                             ["--bootstrap-server", broker.bootstrap, "describe"],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("Feature:")}
    assert set(lines) == {"metadata.version", "transaction.version", "share.version",
                          "group.version", "streams.version"}, done.stdout
    assert "FinalizedVersionLevel: 1" in lines["group.version"]
    assert "FinalizedVersionLevel: 1" in lines["streams.version"]
    assert "FinalizedVersionLevel: 2" in lines["share.version"]
    assert "FinalizedVersionLevel: 2" in lines["transaction.version"]
    assert "FinalizedVersionLevel: 4.4-IV2" in lines["metadata.version"]


def feature_tool(bootstrap: str, *args: str):
    cmd = run_kafka.java_cmd("org.apache.kafka.tools.FeatureCommand",
                             ["--bootstrap-server", bootstrap, *args],
                             run_kafka.DEFAULT_VERSION, None, heap="256M")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_kafka_features_upgrade(broker):
    done = feature_tool(broker.bootstrap, "downgrade", "--feature", "transaction.version=1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "transaction.version was downgraded to 1." in done.stdout
    done = feature_tool(broker.bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "transaction.version was upgraded to 2." in done.stdout
    done = feature_tool(broker.bootstrap, "upgrade", "--feature", "transaction.version=3")
    assert done.returncode == 1
    assert "Local controller 1 only supports versions 0-2" in done.stdout


def test_a_finalized_level_survives_a_restart(tmp_path):
    """UpdateFeatures is kept by the controller in the metadata store, as Kafka's controller
    keeps it in its log: a restart does not finalize the default again."""
    data = tmp_path / "data"
    with running_broker(data) as first:
        epoch, _ = finalized(first.bootstrap)
        assert update(first.bootstrap, 2, "transaction.version", 1, upgrade_type=2) \
            .error_code == 0
        changed, levels = finalized(first.bootstrap)
        assert levels["transaction.version"] == (1, 1) and changed > epoch
    with running_broker(data) as again:
        restarted, levels = finalized(again.bootstrap)
        assert levels["transaction.version"] == (1, 1)
        assert restarted == changed  # the same finalized state, so the same epoch


def test_rebalance_protocols_switch_the_group_apis_off(tmp_path):
    """``group.coordinator.rebalance.protocols`` without consumer or streams: their APIs answer
    UNSUPPORTED_VERSION whatever the feature levels, as Kafka's; classic cannot be left out."""
    from kbroker.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="Disabling the 'classic' protocol is not supported"):
        BrokerConfig({"group.coordinator.rebalance.protocols": "consumer,streams"})
    with pytest.raises(ConfigError, match="'eager' is not one of"):
        BrokerConfig({"group.coordinator.rebalance.protocols": "classic,eager"})
    with running_broker(tmp_path / "data",
                        {"group.coordinator.rebalance.protocols": "classic,streams"}) as b:
        with Wire(b.bootstrap) as wire:
            cls = messages.request_class(68)
            r = wire.call(68, 1, cls(group_id="g", member_id="m" * 22, member_epoch=0,
                                     rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                     topic_partitions=[]))
            assert (r.error_code, r.error_message) == (35, None)
            cls = messages.request_class(89)
            r = wire.call(89, 0, cls(group_ids=["s"], include_authorized_operations=False))
            # Served (NOT_COORDINATOR: no __consumer_offsets yet), not UNSUPPORTED_VERSION.
            assert r.groups[0].error_code == 16
