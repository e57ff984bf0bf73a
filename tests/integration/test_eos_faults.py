"""Exactly-once under faults, the suite's short run of ``tools/eos_faults.py``: a Java
consume-transform-produce job (read_committed input, offsets committed in each transaction) copies
20,000 records while the broker is killed with ``kill -9`` and restarted 5 times and the job's
process is hard-killed and replaced twice; the read_committed output equals the input exactly.
"""

from __future__ import annotations

from tools.eos_faults import run


def test_copier_output_equals_input_across_broker_and_job_kills(tmp_path):
    result = run(tmp_path, 20_000, broker_kills=5, job_kills=2, timeout=300, log=lambda _: None)
    assert (result.broker_kills, result.job_kills) == (5, 2), \
        f"faults not all injected before the copy finished: {result}"
    assert result.lost == 0 and result.duplicates == 0, result
    assert result.out_of_order_partitions == [], result
    assert result.output == result.messages, result
