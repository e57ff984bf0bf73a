"""The end of a fetch: every whole batch that fits, found through the offset index.

Regression: the boundary search used to stop at the first batch crossing an index entry, so a
log whose batches are at least ``index.interval.bytes`` (Java producer defaults: 16 KiB
batches, 4 KiB interval) answered every fetch with one batch."""

import random

from kbroker.log import LogConfig
from kbroker.protocol.records import iter_batches

from .conftest import append, make_batch, read_all


def batch_ends(segment):
    return [pos + header.size for pos, header in segment.batches(0)]


def brute_force_boundary(segment, limit, start):
    """The reference answer: walk every batch from ``start``."""
    boundary = start
    for end in batch_ends(segment):
        if start < end <= limit:
            boundary = end
    return boundary


def test_fetch_returns_many_batches_larger_than_the_index_interval(open_log):
    log = open_log(LogConfig(index_interval_bytes=4096))
    batch = make_batch(16, value=b"v" * 1000)   # ~16 KiB, like a Java producer's batch
    size = len(batch)
    assert size > 4096
    for _ in range(100):
        append(log, batch)
    assert len(log.active_segment.index) > 50   # nearly every batch is indexed
    # Kafka's consumer defaults: 1 MiB per partition, 50 MiB per fetch.
    data = read_all(log, max_bytes=1024 * 1024)
    assert len(data) == (1024 * 1024 // size) * size
    assert len(list(iter_batches(data))) == 1024 * 1024 // size
    assert len(read_all(log, max_bytes=50 * 1024 * 1024)) == 100 * size
    # From the middle of the log, cut between batches.
    data = read_all(log, offset=16 * 37 + 5, max_bytes=5 * size + 100)
    assert [h.base_offset for h in iter_batches(data)] == [16 * i for i in range(37, 42)]


def test_boundary_matches_a_full_walk(open_log):
    """Every limit and several starts, batches of mixed sizes, a small index interval."""
    rng = random.Random(7)
    log = open_log(LogConfig(index_interval_bytes=700))
    for _ in range(60):
        append(log, make_batch(rng.randint(1, 30), value=b"x" * rng.randint(1, 200)))
    segment = log.active_segment
    assert len(segment.index) > 5
    starts = [0] + batch_ends(segment)[:-1]
    for start in starts[::7]:
        for limit in range(start, segment.size + 50, 37):
            assert segment.batch_boundary_at_or_below(limit, start) == \
                brute_force_boundary(segment, limit, start), (start, limit)


def test_boundary_reads_only_headers_near_the_limit(open_log, monkeypatch):
    """The search starts at the indexed batch below the limit, not at the fetch start."""
    log = open_log(LogConfig(index_interval_bytes=4096))
    batch = make_batch(16, value=b"v" * 1000)
    for _ in range(200):
        append(log, batch)
    segment = log.active_segment
    scanned = []
    real = segment.batches

    def counting(start=0, end=None, full=False):
        for item in real(start, end, full):
            scanned.append(item[0])
            yield item

    monkeypatch.setattr(segment, "batches", counting)
    limit = 150 * len(batch) + 10
    assert segment.batch_boundary_at_or_below(limit, 0) == 150 * len(batch)
    assert len(scanned) <= 2
