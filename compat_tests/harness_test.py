"""The matrix's own machinery: the exact comparison and the report (no broker, no clients).

Named ``*_test.py`` (pytest collects it all the same) so that no ``test_*.py`` under
``compat_tests/`` is anything but matrix scenarios.
"""

from __future__ import annotations

import sys

from compat_tests import harness
from compat_tests.drivers.registry import BY_NAME, ROOT, Driver
from compat_tests.harness import Run, Spec

sys.path.insert(0, str(ROOT / "tools"))
import compat_report  # noqa: E402

PRODUCER = Driver("p", "a producer", ("true",))


def consumed_as_expected(spec: Spec) -> list[dict]:
    return [{"partition": 0, "offset": e["index"], "key": e["key"], "value": e["value"],
             "headers": e["headers"], "timestamp": e["timestamp"],
             "timestampType": "CreateTime"} for e in harness.expected(spec, PRODUCER)]


def test_compare_accepts_exact_records():
    spec = Spec(count=4, timestamp=1_000)
    assert harness.compare(spec, PRODUCER, Run(PRODUCER, []), consumed_as_expected(spec)) == []


def test_compare_finds_every_kind_of_difference():
    spec = Spec(count=4, timestamp=1_000)
    got = consumed_as_expected(spec)
    got[0]["headers"] = got[0]["headers"][::-1]           # header order matters
    got[1]["key"] = ""                                     # empty is not null (and not the key)
    got[2]["timestamp"] += 1
    del got[3]
    got.append(dict(got[0]))                               # a duplicate
    problems = " | ".join(harness.compare(spec, PRODUCER, Run(PRODUCER, []), got))
    for expected in ("record 0: headers", "record 1: key", "record 2: timestamp",
                     "missing records [3]", "duplicated records [0]"):
        assert expected in problems, problems


def test_compare_checks_acknowledged_offsets_and_timestamps():
    spec = Spec(count=2)
    got = consumed_as_expected(spec)
    got[0]["timestamp"], got[1]["timestamp"] = 5, 6
    produced = Run(PRODUCER, [], events=[
        {"event": "produced", "index": 0, "partition": 0, "offset": 0, "timestamp": 5},
        {"event": "produced", "index": 1, "partition": 0, "offset": 7, "timestamp": 9}])
    problems = " | ".join(harness.compare(spec, PRODUCER, produced, got))
    assert "record 1: timestamp 6 != 9" in problems and "acknowledged at 0/7" in problems
    assert "record 0" not in problems


def test_report_lists_every_cell_that_does_not_pass():
    results = {"generated": "now", "commit": "abc", "minutes": 1, "complete": True,
               "clients": {"kcat": {"client": "kcat", "version": "1"}},
               "drivers": ["kcat"], "codecs": ["none"], "cells": [
                   {"scenario": "produce-consume", "client": "kcat", "status": "pass",
                    "reason": "", "notes": []},
                   {"scenario": "admin.create-topic", "client": "kcat", "status": "n/a",
                    "reason": "no admin | API", "notes": []},
                   {"scenario": "cross-client (none)", "client": "kcat → kcat",
                    "status": "fail", "reason": "boom", "notes": ["said x"]}]}
    text = compat_report.render(results)
    assert "| admin.create-topic | kcat | ➖ n/a | no admin \\| API |" in text
    assert "| cross-client (none) | kcat → kcat | ❌ fail | boom |" in text
    assert "| kcat | ❌ |" in text and "said x" in text


def test_registry_features_are_known():
    from compat_tests.drivers.registry import FEATURES
    for driver in BY_NAME.values():
        assert set(driver.lacks) | set(driver.todo) <= set(FEATURES), driver.name


def test_report_puts_security_cells_in_their_own_table():
    cell = {"reason": "", "notes": []}
    results = {"generated": "now", "commit": "abc", "minutes": 1, "complete": True,
               "clients": {"kcat": {"client": "kcat", "version": "1"},
                           "spark": {"client": "spark", "version": "4"}},
               "drivers": ["kcat", "spark"], "registered": ["kcat"], "codecs": ["none"],
               "cells": [
                   {**cell, "scenario": "produce-consume", "client": "kcat", "status": "pass"},
                   {**cell, "scenario": "security: SSL", "client": "kcat", "status": "pass"},
                   {**cell, "scenario": "security: mTLS", "client": "spark", "status": "pass"},
                   {"scenario": "security: SASL_SSL SCRAM-SHA-512", "client": "kcat",
                    "status": "n/a", "reason": "old librdkafka", "notes": []}]}
    text = compat_report.render(results)
    grid, security = text.split("## Security", 1)
    assert "security: SSL |" not in grid.split("## Scenarios per client", 1)[1]
    assert "| client | SSL | SASL_SSL SCRAM-SHA-512 | mTLS |" in security
    assert "| kcat | ✅ | ➖ |   |" in security and "| spark |   |   | ✅ |" in security
    assert "| security: SASL_SSL SCRAM-SHA-512 | kcat | ➖ n/a | old librdkafka |" in text


def test_report_puts_cluster_cells_in_their_own_table():
    cell = {"reason": "", "notes": []}
    results = {"generated": "now", "commit": "abc", "minutes": 1, "complete": True,
               "clients": {"kcat": {"client": "kcat", "version": "1"},
                           "java": {"client": "java", "version": "4"}},
               "drivers": ["kcat", "java"], "registered": ["kcat", "java"], "codecs": ["none"],
               "cells": [
                   {**cell, "scenario": "produce-consume", "client": "kcat", "status": "pass"},
                   {**cell, "scenario": "cluster: transactions", "client": "java",
                    "status": "pass"},
                   {**cell, "scenario": "cluster: produce acks=all idempotent, consume",
                    "client": "kcat", "status": "pass"},
                   {"scenario": "cluster: transactions", "client": "kcat", "status": "n/a",
                    "reason": "no transactions", "notes": []}]}
    text = compat_report.render(results)
    grid, cluster = text.split("## Cluster", 1)
    assert "cluster:" not in grid.split("## Scenarios per client", 1)[1]
    assert "| client | produce acks=all idempotent, consume | transactions |" in cluster
    assert "| kcat | ✅ | ➖ |" in cluster and "| java |   | ✅ |" in cluster
    assert "| cluster: transactions | kcat | ➖ n/a | no transactions |" in text


def _cell(scenario, client, status="pass", module="test_x.py"):
    return {"scenario": scenario, "client": client, "status": status, "reason": "", "notes": [],
            "seconds": 1.0, "module": module}


def test_long_only_cells_are_kept_and_carried_into_runs_without_them(tmp_path, monkeypatch):
    from compat_tests import conftest as matrix

    monkeypatch.setattr(matrix, "CARRIED", tmp_path / "long_only.json")
    faust = _cell("faust: agent", "faust", module=matrix.LONG_ONLY[1])
    long_run = {"cells": [_cell("produce-consume", "java"), faust], "versions": {"faust": "0.15"}}
    matrix.carry_long_only_cells(long_run, "abc1234")
    assert len(long_run["cells"]) == 2  # a run that had them changes nothing in its own report

    short_run = {"cells": [_cell("produce-consume", "java", status="fail")], "versions": {}}
    matrix.carry_long_only_cells(short_run, "def5678")
    carried = [c for c in short_run["cells"] if c["client"] == "faust"]
    assert len(carried) == 1 and carried[0]["status"] == "pass"
    assert carried[0]["notes"][0].startswith("result of `make test-long` on ")
    assert short_run["versions"] == {"faust": "0.15"}  # the client line keeps its version
    # the short run's own cells are left as they are
    assert [c["status"] for c in short_run["cells"] if c["client"] == "java"] == ["fail"]


def test_partial_results_of_two_workers_merge_into_one_session():
    from compat_tests import conftest as matrix

    state = {"cells": [_cell("a", "java", status="fail")], "partial": False, "collected": False,
             "versions": {}, "clients": {}, "scenarios": {}}
    matrix._merge(state, {"cells": [_cell("a", "java"), _cell("b", "go")], "partial": False,
                          "collected": True, "versions": {"x": "1"},
                          "clients": {"spark": {"client": "PySpark"}},
                          "scenarios": {"spark: s": "text"}})
    assert sorted((c["scenario"], c["status"]) for c in state["cells"]) == \
        [("a", "pass"), ("b", "pass")]
    assert state["collected"] and not state["partial"]
    assert state["clients"]["spark"]["client"] == "PySpark"
    assert "spark: s" in compat_report.render({
        "generated": "now", "commit": "c", "minutes": 1, "complete": True,
        "clients": {}, "drivers": ["java", "go"], "registered": ["java", "go"],
        "codecs": [], "cells": state["cells"], "scenarios": state["scenarios"]})
