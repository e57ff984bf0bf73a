"""What we advertise in ApiVersions: for every API kbroker serves, exactly the range Apache Kafka
4.4.0 advertises (the release our schemas come from, schemas/pin.json).

KAFKA_4_4_0 is Kafka 4.4.0's ApiVersions answer (v3, the api keys of its broker listener), read
from the reference broker of tools/kafka_ref (single KRaft node, default settings) with our own
codecs. tests/integration/test_kafka_reference.py asks the running reference broker the same
question, so this table cannot silently drift from the real thing."""

from __future__ import annotations

from kbroker.protocol import messages

KAFKA_4_4_0 = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
    18: (0, 5), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5),
    25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3),
    32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3),
    39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 3), 43: (0, 2), 44: (0, 1), 45: (0, 1),
    46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2),
    57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1),
    88: (0, 1), 89: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0), 93: (0, 0), 94: (0, 0),
}

# GetTelemetrySubscriptions and PushTelemetry (KIP-714): Kafka advertises them only when a client
# telemetry exporter plugin is configured (ApiVersionsResponse skips them otherwise), which the
# default reference broker has not; with one, their range is the schema's whole range, v0.
# kbroker always has an exporter (its console and /metrics), so it always advertises them.
KAFKA_4_4_0_WITH_TELEMETRY = {**KAFKA_4_4_0, 71: (0, 0), 72: (0, 0)}


def test_every_advertised_range_is_kafka_4_4_0s():
    differ = {messages.API_BY_KEY[key].name: (ours, KAFKA_4_4_0_WITH_TELEMETRY.get(key))
              for key, ours in messages.ADVERTISED.items()
              if KAFKA_4_4_0_WITH_TELEMETRY.get(key) != ours}
    assert differ == {}


def test_telemetry_ranges_are_the_schemas_whole_range():
    for key in (71, 72):
        assert messages.API_BY_KEY[key].valid_versions == KAFKA_4_4_0_WITH_TELEMETRY[key]


def test_every_range_kafka_advertises_is_a_range_we_can_decode():
    # The generated codecs cover every version Kafka 4.4.0 speaks, served or not. (Produce
    # v0-2 are advertised for KAFKA-18659 but no longer exist in the schema, as in Kafka.)
    for key, (lo, hi) in KAFKA_4_4_0.items():
        valid = messages.API_BY_KEY[key].valid_versions
        assert valid[1] >= hi and (valid[0] <= lo or key == 0), messages.API_BY_KEY[key].name
