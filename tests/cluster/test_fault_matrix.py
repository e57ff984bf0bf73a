"""The fault matrix's short run in the suite (the full matrix and 100 random schedules are
``python -m tools.cluster_faults``, see tools/cluster_faults/__main__.py).

One schedule under load (Kafka's VerifiableProducer and an idempotent confluent-kafka producer at
acks=all, Kafka's VerifiableConsumer committing in a group; RF 3, min.insync.replicas 2): the
leader killed with kill -9, then the new leader paused past the session timeout (a zombie that
must not acknowledge), then the broker-to-broker link of a follower cut. Checked: 0 acknowledged
writes lost, no duplicates, no acknowledged offset moved, group commits never back, every
acknowledged write delivered to the group, replica logs identical up to the high watermark.

Both runs are in `make test-long` (a fault run; the full matrix is run by hand). Against Apache
Kafka 3.9 (ZooKeeper mode) it proves the tooling. Against kbroker's ``kbroker cluster up`` it
proves the cluster. Both launchers take the tools' proxy port plan, so both runs
apply every step, the network cut included (the test checks it was applied).
"""

from __future__ import annotations

import json

import pytest

from tools.cluster_faults import faults
from tools.cluster_faults.cluster import launch
from tools.cluster_faults.run import Step, run_schedule

STEPS = [Step("kill9", "leader", hold=3), Step("pause", "leader", hold=0, gap=2),
         Step("cut_inter_broker", "follower", hold=4, gap=2)]


# A fault run: in `make test-long` (tests/conftest.py's LONG), beside the full matrix by hand.
KINDS = ["kafka", "kbroker"]


@pytest.mark.parametrize("kind", KINDS)
def test_no_acknowledged_write_lost_across_leader_kill_zombie_leader_and_link_cut(kind, tmp_path):
    cluster = launch(kind, tmp_path, proxied=True)
    try:
        assert all(faults.applicable(s.fault, s.target, proxied=True) for s in STEPS)
        result = run_schedule(cluster, STEPS, "suite", tmp_path / "run", log=lambda _: None,
                              settle=2, strict=True)
    finally:
        cluster.close()
    # The whole verdict on failure (pytest would cut the dict short), and kept beside the logs.
    shown = json.dumps(result, default=str)
    (tmp_path / "result.json").write_text(json.dumps(result, indent=1, default=str))
    assert len(result["steps"]) == len(STEPS), shown  # every fault applied, the cut included
    assert result["acked"] > 1000, shown
    assert result["replica_batches_compared"] > 0, shown
    assert result["ok"], shown
    assert (result["lost"], result["duplicated"], result["moved"]) == (0, 0, 0), shown
