"""The cache benchmark compares each warm run's report with the cold one's, and only the reports.

The gate's process is replaced by one that prints a fixed report (each run's wall time its
own): a warm report equal to the cold one but for the timings and the cache's line must
count as the same, and one that differs in a check must be named with the place it differs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import bench_cache  # noqa: E402
from common import Proc  # noqa: E402

CHECKS = 2


def _report(reused: int, seconds: float, detail: str = "3 states") -> dict:
    return {"verdict": "pass", "seconds": seconds, "scratch": f"/tmp/scratch-{seconds}",
            "cache": {"dir": "cache", "reused": reused, "checks": CHECKS, "warnings": []},
            "sections": {"explore": {"seconds": seconds / 2, "checks": [
                {"name": "slice", "verdict": "pass", "detail": detail, "seconds": seconds / 2,
                 "data": {"states": 3, "seconds": seconds / 3}},
                {"name": "full", "verdict": "pass", "detail": "7 states", "seconds": 0.0}]}}}


def _fake_gate(monkeypatch, warm_detail: str = "3 states") -> list[list[str]]:
    """Each run of the gate answers at once: cold (nothing reused, 30 s), then warm with
    nothing changed (all reused, 1 s, its first check's detail ``warm_detail``), then the two
    changed ones (half reused)."""
    calls: list[list[str]] = []

    def run_process(argv, cwd=None, timeout=3600, env=None):
        calls.append(list(argv))
        n = len(calls)
        report = (_report(0, 30.0) if n == 1 else _report(CHECKS, 1.0, warm_detail) if n == 2
                  else _report(1, 2.0 + n))
        return Proc(0, json.dumps(report), "", report["seconds"] + 0.25, 0)

    monkeypatch.setattr(bench_cache, "run_process", run_process)
    return calls


def test_a_warm_report_that_differs_only_in_its_timings_is_the_cold_ones(monkeypatch):
    calls = _fake_gate(monkeypatch)
    result = bench_cache.run(quick=True)
    assert len(calls) == 4 and all("--cache" in c and "--quick" in c for c in calls)
    same = {c.name: c for c in result.checks if c.name.endswith("the report of the cold run")}
    assert len(same) == 3
    failed = [f"{c.name}: {c.detail}" for c in result.checks if not c.passed]
    assert failed == [], failed
    assert [f.value for f in result.figures] == [30.25, 1.25, 5.25, 6.25]


def test_module_only_leaves_out_the_run_after_the_rule_change(monkeypatch):
    calls = _fake_gate(monkeypatch)
    result = bench_cache.run(quick=True, module_only=True)
    assert len(calls) == 3
    assert [f.name for f in result.figures] == [
        "wgk gate --quick, cold, wall time", "wgk gate --quick, warm, nothing changed, wall time",
        "wgk gate --quick, warm after one implementation module changed, wall time"]


def test_a_warm_report_with_another_detail_is_named_where_it_differs(monkeypatch):
    _fake_gate(monkeypatch, warm_detail="4 states")
    result = bench_cache.run(quick=True)
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == ["warm, nothing changed: the report of the cold run"]
    assert failed["warm, nothing changed: the report of the cold run"] == \
        "first difference at /sections/explore/checks[0]/detail ('4 states' against '3 states')"


@pytest.mark.parametrize("field", ["seconds", "scratch", "cache"])
def test_what_the_comparison_leaves_out_is_a_time_or_the_caches_line(field):
    plain = bench_cache._plain(_report(0, 30.0))
    assert field not in plain
    assert plain["sections"]["explore"]["checks"][0] == \
        {"name": "slice", "verdict": "pass", "detail": "3 states", "data": {"states": 3}}


def test_the_profile_names_each_section_run_again_with_its_checks_reused():
    report = _report(1, 4.0)
    report["cache"]["sections"] = {"explore": 1}
    assert bench_cache.profile(report) == \
        "sections run again: explore 2.0 s (1 of 2 reused); 0 reused whole"
    report["cache"]["sections"] = {"explore": 2}
    report["sections"]["explore"]["seconds"] = 0.0
    assert bench_cache.profile(report) == "sections run again: none; 1 reused whole"
