"""The short version of issue 23's no-loss run (the long one, 1,000,000 records, is
``tools/share_soak.py`` by hand; docs/share-partitions.md has its figures): a 3-broker cluster
over ZooKeeper, share consumers (confluent-kafka's ShareConsumer, explicit ACCEPT) killed with
kill -9 while brokers are killed and bounced. Every acknowledged record is received, every
redelivery is explained by a fault, and the share group ends with lag 0."""

from __future__ import annotations

import json

import pytest

from tools import share_soak

# A soak under faults: its brokers' and consumers' timeouts assume the machine is theirs.
pytestmark = pytest.mark.alone


def test_no_record_lost_with_consumers_and_brokers_killed(tmp_path):
    args = share_soak.parse_args([
        "--records", "6000", "--seconds", "40", "--consumers", "3", "--partitions", "3",
        "--kill-every", "6", "--fault-every", "14", "--drain-idle", "60", "--seed", "3",
        "--port-base", "0"])
    result = share_soak.run(args, tmp_path, log=lambda _: None)
    shown = json.dumps({k: v for k, v in result.items() if k != "final_offsets"}, default=str)
    (tmp_path / "result.json").write_text(json.dumps(result, indent=1, default=str))
    assert result["expected"] == 6000, shown
    assert result["consumer_kills"] >= 3 and len(result["broker_faults"]) >= 2, shown
    assert (result["lost"], result["unexplained"], result["redelivered_after_accept"]) == \
        (0, 0, 0), shown
    assert result["lag"] == 0, shown
    assert result["ok"], shown
