"""A Faust (``faust-streaming``) agent with a table on kbroker: it counts records per key through
a broker kill -9 and an application kill -9 whose local state is gone (its changelog topic
restores it); read_committed, every key's counts are exactly 1..N, in order. The scenario and
the processors' virtualenv are test_processors.py's (the Quix Streams application there runs in
`make test`); this one takes over a minute, so it runs in `make test-long`.
"""

from __future__ import annotations

import uuid

import pytest

from compat_tests.pipeline.test_processors import (HERE, PYTHON, VERSIONS, App,
                                                   need_processors, scenario)


@pytest.mark.compat("faust: agent with a table, exactly-once, broker kill -9, restore",
                    client="faust", version=f"{VERSIONS.get('faust-streaming', '?')} "
                    f"(aiokafka {VERSIONS.get('aiokafka', '?')})")
def test_faust_agent_counts_exactly_once(tmp_path, cell):
    need_processors()

    def make(bootstrap, source, sink):
        return App([str(PYTHON), str(HERE / "faust_count.py"), bootstrap, source, sink,
                    f"faust-{uuid.uuid4().hex[:6]}", str(tmp_path / "faust-data")],
                   tmp_path, "faust")

    scenario(tmp_path, cell, make, lambda v: int(v))
