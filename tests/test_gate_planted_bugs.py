"""The harness can fail: bugs planted in a copy of the implementation are reported by the gate.

Each bug is planted with ``monkeypatch`` in the implementation's rule module for
the duration of one test (the patched module is the "copy"); the gate then runs
on a few traces and must fail in the section that sees the bug.
"""
from __future__ import annotations

from pathlib import Path

import dataclasses

import pytest

import wgk.impl.decisions.rules as rules
import wgk.impl.decisions.transaction as transaction
from wgk.conformance.reports import gate
from wgk.conformance.check.explore import Instance
from wgk.conformance.oracle.held_restarts import PLANTS

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"


@pytest.fixture(autouse=True)
def small_budget(monkeypatch, tmp_path):
    monkeypatch.setattr(gate, "run_gate", _in(tmp_path, gate.run_gate))
    monkeypatch.setitem(gate.BUDGETS, "quick", {"explore": [Instance(tasks=1, groups=("core",))],
                                                "replay": True, "crash-cuts": ["in-process"],
                                                "fuzz": {"examples": 10, "steps": 15, "tasks": 1}})


def _in(tmp_path, run):
    """run_gate writing its counterexamples under tmp_path, never into the repository."""
    def wrapped(*a, **kw):
        kw.setdefault("counterexamples", str(tmp_path / "counterexamples"))
        return run(*a, **kw)
    return wrapped


def failing(result, section: str) -> list:
    return [c for c in result.checks if c.section == section and c.verdict != "pass"]


def test_the_unplanted_implementation_passes_these_traces():
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "10-stale-capability-rejected.json"),
                                       str(INCIDENTS / "06-live-owner-missing-heartbeat-stays-running.json")])
    assert r.verdict == "pass", r.summary()
    restarts = [c for c in r.checks if "restart on the held connection" in c.name]
    assert sorted(c.data["planted"] for c in restarts) == sorted(PLANTS)


def test_skipping_the_fence_check_is_reported(monkeypatch):
    def no_fence(ctx):
        return "unknown-attempt" if ctx.record.attempt_state == "none" else None
    monkeypatch.setattr(rules, "capability_failure", no_fence)
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "10-stale-capability-rejected.json")])
    bad = failing(r, "replay")
    assert r.verdict == "fail" and bad
    assert "stale-capability" in bad[0].detail


def test_writing_done_on_submit_is_reported(monkeypatch):
    # a submit is decided by the write its row of the steps' table names: that row writes the
    # GraphSave's phase and a succeeded attempt
    done = dataclasses.replace(transaction.STEPS["submit"], to="graph-saved",
                               sets=lambda ctx: {"attempt_state": "succeeded"})
    monkeypatch.setitem(transaction.STEPS, "submit", done)
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "14-message-does-not-resurrect-done.json")])
    assert r.verdict == "fail" and failing(r, "replay")
    assert failing(r, "fuzz"), "generated runs see it too"


def test_promoting_twice_after_a_crash_is_reported(monkeypatch):
    monkeypatch.setattr(rules.Observe, "effect_happened", lambda self, t: False)
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "13-crash-at-every-phase.json")])
    cuts = failing(r, "crash-cuts")
    assert r.verdict == "fail" and cuts
    assert any("ref-update" in c.name for c in cuts)
    assert not failing(r, "replay"), "without a crash the effect is never re-observed"


def test_a_heartbeat_timeout_terminalizing_a_live_owner_is_reported(monkeypatch):
    honest = rules.RULES["heartbeat-timeout"]

    def timeout_kills(ctx):
        t = ctx.record
        if not t.running:
            return honest.then(ctx)
        actions: list = []
        return rules.succeeded(ctx, rules.close_attempt(ctx, t, "lost", actions), effects=actions,
                               kind=rules.EVIDENCE_ONLY)
    monkeypatch.setitem(rules.RULES, "heartbeat-timeout", rules.Rule((), timeout_kills))
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "06-live-owner-missing-heartbeat-stays-running.json")])
    bad = failing(r, "replay")
    assert r.verdict == "fail" and bad and "heartbeat-timeout" in bad[0].detail


def test_scoped_crash_cut_checks_see_the_double_promotion_too(monkeypatch):
    from wgk.conformance.oracle.crashcuts import crash_cuts
    from wgk.conformance.traces.format import load_trace
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    assert crash_cuts(trace, checks="scoped").passed
    monkeypatch.setattr(rules.Observe, "effect_happened", lambda self, t: False)
    failed = crash_cuts(trace, checks="scoped").failed
    assert failed and all(c.step == failed[0].step for c in failed)
    assert any("ref-update" in c.boundary for c in failed)


def test_a_rebuild_dropping_facts_is_reported_by_every_way_of_rebuilding_in_the_cuts(monkeypatch):
    """The thorough cuts rebuild on a scratch kept open for the step's cuts (from the replay
    before the step) or from an empty database: a replay that drops facts fails the same cuts
    either way, with the same divergences."""
    import wgk.impl.storage.apply as apply
    from wgk.conformance.oracle.crashcuts import crash_cuts
    from wgk.conformance.traces.format import load_trace
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    live = apply._apply_task_changes

    def drops_facts(k, seq, name, changes, facts, record):
        live(k, seq, name, changes, facts if record is not None else [], record)
    monkeypatch.setattr(apply, "_apply_task_changes", drops_facts)
    kept, whole = crash_cuts(trace), crash_cuts(trace, images=False)
    assert kept.failed and all(any(d.what == "rebuild" for d in c.divergences) for c in kept.failed)
    assert [(c.name, [d.what for d in c.divergences]) for c in kept.cuts] == \
        [(c.name, [d.what for d in c.divergences]) for c in whole.cuts]


#: Each guard of ``HeldDatabase.restarted`` disabled by an exact-text patch of its source,
#: with the planted states the gate's restarts on the held connection must then report.
HELD_GUARDS = {
    "rollback": ("if conn.in_transaction:", "if False:",
                 ["an open transaction holding an uncommitted write"]),
    "temporary tables": ('conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0]',
                         "0", ["a temporary table"]),
    "attached databases": ('any(row[1] not in ("main", "temp") for row in '
                           'conn.execute("PRAGMA database_list"))', "False",
                           ["an attached database"]),
    "settings": ("_settings(conn) != self.settings", "False", ["a changed connection setting"]),
    "replacement": ("if own:", "if False:",
                    ["a temporary table", "an attached database", "a changed connection setting"]),
}


def _restarted_without(anchor: str, replacement: str):
    import inspect
    import textwrap
    from wgk.conformance.oracle import impl_system
    source = textwrap.dedent(inspect.getsource(impl_system.HeldDatabase.restarted))
    assert source.count(anchor) == 1, anchor
    scope: dict = {}
    exec(compile(source.replace(anchor, replacement), impl_system.__file__, "exec"),
         vars(impl_system), scope)
    return scope["restarted"]


@pytest.mark.parametrize("guard", sorted(HELD_GUARDS))
def test_a_held_connection_restarted_without_one_of_its_guards_is_reported(monkeypatch, guard):
    """The cuts leave nothing on the held connection that its guards remove: only the
    restarts with a state planted on it see a guard gone."""
    from wgk.conformance.oracle.impl_system import HeldDatabase
    anchor, replacement, planted = HELD_GUARDS[guard]
    monkeypatch.setattr(HeldDatabase, "restarted", _restarted_without(anchor, replacement))
    r = gate.run_gate("quick", traces=[str(INCIDENTS / "16-two-dispatchers-one-attempt.json")])
    bad = failing(r, "crash-cuts")
    assert r.verdict == "fail" and sorted(c.data["planted"] for c in bad) == sorted(planted)
    assert all("restart on the held connection" in c.name and c.data["planted"] in c.detail
               for c in bad), [c.name for c in bad]
