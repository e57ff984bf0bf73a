"""The state-change log (kbroker.metadata.state_change, issue 36): the controller's commits and a
replica's role changes each write a line with the partition, the epochs and the reason; the
repeat filter never drops them; ``kbroker.state.change.log.file`` sends them to a size-rotated
file of their own. The cluster side (a failover's lines in a real 3-broker cluster) is checked in
tests/cluster/test_replication_zk.py."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kbroker.cli.log_limits import RepeatFilter
from kbroker.config import BrokerConfig
from kbroker.metadata import state_change
from kbroker.metadata.controller import Controller, NewTopic
from kbroker.metadata.delta import MetadataDelta
from kbroker.metadata.image import PartitionState
from kbroker.metadata.local_store import LocalMetadataStore
from kbroker.startup import EXIT_CONFIG, StartupError

NODE = 1


def controller(path) -> Controller:
    store = LocalMetadataStore(str(path), node_id=NODE)
    return Controller(store, NODE, asyncio.run(store.load()))


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == state_change.LOGGER]


def test_commits_write_what_changed_and_why(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=state_change.LOGGER)
    c = controller(tmp_path)
    asyncio.run(c.create_topic(NewTopic("orders", 2)))
    created = lines(caplog)
    assert len(created) == 2 and all("controller 1: created orders-" in line for line in created)
    assert created[0].startswith("controller 1: created orders-0, replicas [1] (")
    caplog.clear()

    # A single node's store keeps no partition states; a cluster's controller commits them
    # through the same call.
    topic = c.image.topic("orders")
    old = PartitionState(1, 6, (1, 2, 3), 3, 1)
    image = c.image.with_topic(topic.with_states([old, old]))
    new = PartitionState(2, 7, (2, 3), 4, 1)
    state_change.committed(1, image, MetadataDelta(states={("orders", 1): new}),
                           "electing leaders")
    assert lines(caplog) == ["controller 1: orders-1: leader 1, leader epoch 6, ISR [1, 2, 3] -> "
                             "leader 2, leader epoch 7, ISR [2, 3], partition version 4 "
                             "(electing leaders)"]
    caplog.clear()

    asyncio.run(c.delete_topic("orders"))
    (line,) = lines(caplog)
    assert line.startswith("controller 1: deleted topic orders (2 partition(s))")


def test_the_repeat_filter_never_drops_state_changes():
    limit = RepeatFilter(burst=5, interval=10.0, clock=lambda: 0.0)
    record = logging.LogRecord(state_change.LOGGER, logging.INFO, __file__, 1,
                               "broker %d: leader of %s-%d", (1, "t", 0), None)
    assert all(limit.filter(record) for _ in range(1000))
    other = logging.LogRecord("kbroker.replicas", logging.INFO, __file__, 1, "x %d", (1,), None)
    assert sum(limit.filter(other) for _ in range(1000)) == 5  # other loggers still are


def test_its_own_file_is_rotated_by_size(tmp_path, caplog):
    path = tmp_path / "logs" / "state-change.log"
    config = BrokerConfig({"kbroker.state.change.log.file": str(path),
                           "kbroker.state.change.log.max.bytes": 4096,
                           "kbroker.state.change.log.backups": 2})
    handler = state_change.open_file(config)
    try:
        caplog.set_level(logging.INFO)
        for epoch in range(200):
            state_change.became_leader(1, "t", 0, PartitionState(1, epoch, (1,), epoch, 1),
                                       (1,), "new")
    finally:
        state_change.close_file(handler)
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["state-change.log", "state-change.log.1", "state-change.log.2"]
    assert all(p.stat().st_size <= 4096 for p in path.parent.iterdir())
    assert "leader epoch 199" in path.read_text()
    # Sent to its file only, not to the broker's log, while the file is open...
    assert not lines(caplog)
    # ...and back to the broker's log once it is closed.
    state_change.became_follower(1, "t", 0, PartitionState(2, 200, (1, 2), 200, 1), (1, 2),
                                 "leader at epoch 199")
    assert lines(caplog) == ["broker 1: follower of t-0 (was leader at epoch 199): leader 2, "
                             "leader epoch 200, ISR [1, 2], partition version 200, "
                             "replicas [1, 2]"]


def test_without_a_file_nothing_changes(tmp_path):
    assert state_change.open_file(BrokerConfig({})) is None
    assert logging.getLogger(state_change.LOGGER).propagate


def test_a_file_that_cannot_be_opened_is_a_config_error_naming_the_key(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the log's directory would be")
    config = BrokerConfig({"kbroker.state.change.log.file": str(blocker / "state-change.log")})
    with pytest.raises(StartupError) as raised:
        state_change.open_file(config)
    assert raised.value.exit_code == EXIT_CONFIG
    assert "kbroker.state.change.log.file=" in raised.value.problem
    assert logging.getLogger(state_change.LOGGER).propagate  # nothing half-installed
