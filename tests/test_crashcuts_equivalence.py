"""Crash cuts decided by equivalence: a cut whose state after the re-send is an earlier passing
cut's is decided by it, and the verdicts are every cut's own verdicts."""
from __future__ import annotations

from pathlib import Path

import pytest

from wgk.conformance.oracle import crashcuts
from wgk.conformance.oracle.crashcuts import crash_cuts
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.traces.format import load_trace
from wgk.impl.front import audit as audit_mod
from wgk.impl.front.kernel import Kernel

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "incidents" / "01-false-done-never-satisfies-dependent.json"


def _verdicts(result) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.name, c.verdict, tuple(d.what for d in c.divergences)) for c in result.cuts]


def test_equivalent_cuts_are_counted_and_give_every_cut_its_own_verdict():
    trace = load_trace(TRACE)
    alone = crash_cuts(trace, equivalence=False)
    shared = crash_cuts(trace)
    assert alone.equivalent == 0 and not any(c.equivalent for c in alone.cuts)
    assert 0 < shared.equivalent < len(shared.cuts)
    assert shared.equivalent == sum(c.equivalent for c in shared.cuts)
    assert _verdicts(shared) == _verdicts(alone) and shared.passed
    # the first cut of the trace never has an earlier one to be decided by
    assert not shared.cuts[0].equivalent


def _audit_finding_when(predicate):
    """Kernel.audit reporting one finding whenever ``predicate(kernel)`` holds."""
    real = Kernel.audit

    def audit(self, anchors=()):
        report = real(self, anchors)
        if predicate(self):
            report.findings.append(audit_mod.Finding("planted", None, "a planted finding"))
        return report
    return audit


def test_a_failing_state_is_never_reused(monkeypatch):
    """Every cut fails when every audit does: no cut takes the verdict of another."""
    monkeypatch.setattr(Kernel, "audit", _audit_finding_when(lambda k: True))
    result = crash_cuts(load_trace(TRACE))
    assert result.cuts and all(c.verdict == "fail" for c in result.cuts)
    assert all("audit" in {d.what for d in c.divergences} for c in result.cuts)
    assert result.equivalent == 0


@pytest.mark.parametrize("parity", [0, 1])
def test_a_finding_that_depends_on_the_database_is_found_in_every_cut_it_concerns(
        monkeypatch, parity):
    """A finding only in some states (by the ledger's length): the cuts fail and pass exactly
    as when each cut checks its own state."""
    monkeypatch.setattr(Kernel, "audit", _audit_finding_when(
        lambda k: k.ledger_head() % 2 == parity))
    trace = load_trace(TRACE)
    alone, shared = crash_cuts(trace, equivalence=False), crash_cuts(trace)
    assert {v for _, v, _ in _verdicts(alone)} == {"pass", "fail"}
    assert _verdicts(shared) == _verdicts(alone)


def test_the_key_covers_the_database_the_world_the_projection_and_the_rebuild_start():
    """Two states that differ in any one of what the checks after the re-send read are not
    the same state; the same state read twice is."""
    trace = load_trace(TRACE)
    impl = ImplSystem(trace)
    try:
        tails = crashcuts.Tails()
        snap = crashcuts._Snapshot("", None, impl.kernel.ledger_head(), impl.daemon)
        projection = impl.project()
        first = tails.key(impl, projection, snap)
        assert first is not None and tails.key(impl, impl.project(), snap) == first
        impl.world.clock.advance(1)                                   # the world
        assert tails.key(impl, projection, snap) != first
        impl.world.clock.value -= 1
        assert tails.key(impl, projection, snap) == first
        assert tails.key(impl, dict(projection, now=-1), snap) != first   # the projection
        later = crashcuts._Snapshot("", None, snap.head + 1, impl.daemon)
        assert tails.key(impl, projection, later) != first            # the rebuild's start
        impl.kernel.store.set_meta("unread", "by the projection")      # the database alone
        assert tails.key(impl, projection, snap) != first
    finally:
        impl.close()


def test_the_gate_reports_how_many_cuts_were_decided_by_equivalence():
    from wgk.conformance.reports.gate_report import Section
    from wgk.conformance.reports.gate_traces import crash_cut_checks
    trace = load_trace(TRACE)
    checks = [c for c in crash_cut_checks("quick", None, [trace]) if "planted" not in c.data]
    shared = crash_cuts(trace)
    assert [c.name.rsplit(" (", 1)[0] for c in checks] == \
        [f"{trace.id} {c.name}" for c in shared.cuts]
    assert [bool(c.data.get("by-equivalence")) for c in checks] == \
        [c.equivalent for c in shared.cuts]
    section = Section("crash-cuts", checks, 0.0)
    assert section.by_equivalence == shared.equivalent > 0
    assert section.to_json()["by-equivalence"] == shared.equivalent
    assert "by-equivalence" not in Section("replay", [], 0.0).to_json()


FAN_IN = ROOT / "traces" / "incidents" / "01b-fan-in-waits-for-every-dependency.json"


def test_a_cut_recovered_to_an_earlier_passing_cuts_state_is_that_cut_and_gives_its_own_verdict():
    """The same step re-sent on the same recovered state: decided whole by the earlier cut;
    the verdicts are every cut's own."""
    trace = load_trace(FAN_IN)
    alone, shared = crash_cuts(trace, equivalence=False), crash_cuts(trace)
    whole = [c for c in shared.cuts if c.recovered_equivalent]
    assert whole and all(c.equivalent for c in whole)
    assert not any(c.recovered_equivalent for c in alone.cuts)
    assert _verdicts(shared) == _verdicts(alone) and shared.passed
    # each is decided by an earlier cut of its own step
    for c in whole:
        assert any(e.step == c.step and e.index < c.index and not e.recovered_equivalent
                   for e in shared.cuts)


@pytest.mark.parametrize("parity", [0, 1])
def test_a_recovered_state_that_fails_is_never_reused(monkeypatch, parity):
    """The recovered projection wrong in some states (by the ledger's length): each cut
    recovered to such a state fails, exactly as when each cut checks its own."""
    real = ImplSystem.project

    def project(self):
        shown = real(self)
        if self.kernel.ledger_head() % 2 == parity:
            shown = dict(shown, target="planted")
        return shown
    monkeypatch.setattr(ImplSystem, "project", project)
    trace = load_trace(FAN_IN)
    alone, shared = crash_cuts(trace, equivalence=False), crash_cuts(trace)
    assert {v for _, v, _ in _verdicts(alone)} == {"pass", "fail"}
    assert _verdicts(shared) == _verdicts(alone)
    assert not any(c.recovered_equivalent for c in shared.cuts if c.verdict == "fail")


def test_the_recovery_key_covers_the_database_the_world_the_daemon_and_the_step():
    """Two recovered states that differ in the database, the world or the daemon, or the
    same state recovered in two steps, are not the same cut; the projection's key is the
    state alone, whatever the step."""
    trace = load_trace(TRACE)
    impl = ImplSystem(trace)
    try:
        tails = crashcuts.Tails()
        first = tails.recovery(impl, 3)
        state = tails.state
        assert first is not None and tails.recovery(impl, 3) == first
        assert tails.recovery(impl, 4) != first and tails.state == state   # the step
        impl.world.clock.advance(1)                                   # the world
        assert tails.recovery(impl, 3) != first and tails.state != state
        impl.world.clock.value -= 1
        assert tails.recovery(impl, 3) == first
        daemon, impl.daemon = impl.daemon, "someone-else"            # the daemon
        assert tails.recovery(impl, 3) != first and tails.state != state
        impl.daemon = daemon
        assert tails.recovery(impl, 3) == first
        impl.kernel.store.set_meta("unread", "by the projection")      # the database alone
        assert tails.recovery(impl, 3) != first and tails.state != state
    finally:
        impl.close()


def test_a_recovered_states_projection_is_computed_once_and_only_for_that_state():
    trace = load_trace(TRACE)
    impl = ImplSystem(trace)
    try:
        tails = crashcuts.Tails()
        tails.recovery(impl, 0)
        shown = tails.projection(impl)
        assert shown == impl.project() and tails.projected == 0
        assert tails.projection(impl) is shown and tails.projected == 1
        impl.world.clock.advance(1)
        tails.recovery(impl, 0)
        assert tails.projection(impl) == impl.project() != shown and tails.projected == 1
    finally:
        impl.close()


def test_the_rebuild_compares_with_the_projection_the_cut_observed_while_nothing_was_written():
    """The live projection given to the rebuild is the one compared: the same as projecting
    again when it is the kernel's; a different one is a difference. A cut hands it over only
    while no row and nothing of the world changed since it observed it."""
    trace = load_trace(TRACE)
    impl = ImplSystem(trace)
    try:
        for step in trace.steps:
            impl.apply(step)
        kernel = impl.kernel
        shown = kernel.project()
        assert kernel.rebuild(live=shown).ok and kernel.rebuild().ok
        name = sorted(shown["tasks"])[0]
        wrong = dict(shown, tasks=dict(shown["tasks"], **{name: {"planted": True}}))
        assert kernel.rebuild(live=wrong).differences == \
            [f"the observable projection of task {name!r} differs"]
        assert kernel.rebuild(live=dict(shown, journal={})).differences == \
            ["the observable projection's globals differ: journal"]
        observed = crashcuts._Shown(impl, impl.project())
        assert observed.live(impl) == shown
        impl.world.clock.advance(1)                                   # the world moved
        assert observed.live(impl) is None
        observed = crashcuts._Shown(impl, impl.project())
        kernel.store.set_meta("unread", "by the projection")           # a row written
        assert observed.live(impl) is None
    finally:
        impl.close()
