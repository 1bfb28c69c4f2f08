"""Concurrency in the gate: two kernels on one database in turn, and group commit replayed with
crash cuts inside every batch. Each is shown to fail on the bug it is for."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from wgk.impl import Kernel
from wgk.impl.storage import ledger as ledger_mod
from wgk.conformance.oracle.batches import batch_replay, groups
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.reports import gate
from wgk.model.observe import Names
from wgk.conformance.traces.format import load_trace

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
LOST = INCIDENTS / "acceptance-lost-response.json"


def small(monkeypatch, **sections):
    monkeypatch.setitem(gate.BUDGETS, "quick", sections)


def test_two_kernels_in_turn_agree_with_the_model(monkeypatch):
    small(monkeypatch, **{"two-kernels": True})
    r = gate.run_gate("quick", traces=[str(LOST), str(INCIDENTS / "13-crash-at-every-phase.json")])
    sec = r.section("two-kernels")
    assert sec.verdict == "pass" and len(sec.checks) == 2
    assert sec.checks[0].data["world"] == "sqlite, two connections, in-memory world"


def test_a_ledger_head_cached_across_transactions_fails_two_kernels(monkeypatch):
    monkeypatch.setattr(ledger_mod.Ledger, "forget", lambda self: None)
    small(monkeypatch, **{"two-kernels": True})
    r = gate.run_gate("quick", traces=[str(LOST)])
    [check] = r.section("two-kernels").checks
    assert check.verdict == "fail" and "UNIQUE constraint failed: ledger.seq" in check.detail


def test_batches_group_consecutive_requests_of_one_sender():
    t = load_trace(INCIDENTS / "04-dead-worker-converges.json")
    assert groups(t, 3) == [[0], [1], [2], [3], [4], [5]]
    t = load_trace(LOST)
    g = groups(t, 3)
    assert [n for group in g for n in group] == list(range(len(t.steps)))
    assert max(len(x) for x in g) == 3
    for group in g:
        if len(group) > 1:
            assert all("request" in t.steps[n] for n in group)


def test_group_commit_replays_with_crash_cuts_inside_every_batch():
    r = batch_replay(load_trace(LOST), size=3)
    assert r.verdict == "pass" and r.batches >= 4
    assert r.cuts and all(c.verdict == "pass" for c in r.cuts), [
        c.divergences[0].describe() for c in r.cuts if c.divergences][:1]
    assert any("ref-update" in c.boundary for c in r.cuts)


@pytest.mark.parametrize("name", ["50-provider-route-breaker.json", "33-external-wait.json"])
def test_a_batch_resent_after_a_crash_names_routes_and_waits_as_the_trace_does(name):
    """A batch re-sent after a crash is decided by a run of the model restored to the state
    before the batch: the provider routes and the external waits' correlation ids interned
    before it must come back with it (the restored run named them ``r1``, ``w1``)."""
    r = batch_replay(load_trace(INCIDENTS / name), size=3)
    assert r.verdict == "pass" and r.cuts
    assert all(c.verdict == "pass" for c in r.cuts), [
        c.divergences[0].describe() for c in r.cuts if c.divergences][:1]


def test_a_model_run_restored_keeps_every_table_of_its_names():
    tables = [f.name for f in fields(Names)]
    assert {"content", "sessions", "tokens", "correlations", "routes"} <= set(tables)
    run = ModelSystem(load_trace(LOST), checking=False)
    for t in tables:
        getattr(run.names, t)["before"] = 7
    snap = run.snapshot()
    held = {t: dict(getattr(run.names, t)) for t in tables}
    for t in tables:
        getattr(run.names, t)["after"] = 8
    run.restore(snap)
    assert {t: getattr(run.names, t) for t in tables} == held
    assert all(held[t]["before"] == 7 and "after" not in held[t] for t in tables)
    fresh = ModelSystem(load_trace(LOST), checking=False)
    fresh.restore(snap)
    assert {t: getattr(fresh.names, t) for t in tables} == held


def test_an_effect_behind_uncommitted_requests_fails_a_batch_cut(monkeypatch):
    real = Kernel._in_savepoint
    monkeypatch.setattr(Kernel, "_in_savepoint",
                        lambda kernel, r, may_perform: real(kernel, r, may_perform=True))
    r = batch_replay(load_trace(LOST), size=3)
    bad = [c for c in r.cuts if c.verdict == "fail"]
    assert bad and bad[0].divergences[0].what == "recovered-state"
    assert "target" in bad[0].divergences[0].describe()


def test_the_quick_budget_batches_the_traces_where_group_commit_matters_most(monkeypatch):
    small(monkeypatch, batches={"size": 3, "traces": 1})
    r = gate.run_gate("quick", traces=[str(LOST), str(INCIDENTS / "04-dead-worker-converges.json")])
    sec = r.section("batches")
    assert sec.verdict == "pass" and {c.group for c in sec.checks} == {"acceptance-lost-response"}
    assert len(sec.checks) > 1
