"""The two kernels' reference model decides and projects; the replay section evaluates the
invariants on the same trace's run of the model, and reports a broken one there."""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.reports.gate_real import DecidingModel, two_kernel_checks
from wgk.conformance.reports.gate_traces import replay_checks
from wgk.conformance.traces.format import load_traces

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json"


def _broken(self, s):
    return ["planted-invariant"]


def test_a_broken_invariant_is_reported_by_replay_and_not_evaluated_twice(monkeypatch):
    loaded = load_traces([str(TRACE)])
    monkeypatch.setattr(ModelSystem, "_state_violations", _broken)
    replayed = replay_checks("quick", None, loaded)
    assert [c.verdict for c in replayed] == ["fail"] and "[model] invariant" in replayed[0].detail
    assert [c.verdict for c in two_kernel_checks("quick", None, loaded)] == ["pass"]


def test_the_deciding_model_decides_and_projects_as_the_model(monkeypatch):
    trace = load_traces([str(TRACE)])[0]
    checked, deciding = ModelSystem(trace), DecidingModel(trace)
    assert deciding.check() == []
    for step in trace.steps:
        assert deciding.apply(step) == checked.apply(step)
        assert deciding.project() == checked.project()


def test_the_two_kernels_still_fail_on_a_kernel_that_answers_otherwise(monkeypatch):
    import wgk.impl.decisions.rules as rules
    monkeypatch.setattr(rules, "capability_failure",
                        lambda ctx: "unknown-attempt" if ctx.record.attempt_state == "none" else None)
    checks = two_kernel_checks("quick", None, load_traces([str(TRACE)]))
    assert [c.verdict for c in checks] == ["fail"]


REVOKED = ROOT / "traces" / "incidents" / "40-revoked-credential-refused.json"


def test_reading_the_state_leaves_the_next_kernel_to_find_the_others_commit(monkeypatch):
    """The state is read through a third connection: a kernel that admits a sender on its
    caches and never authenticates again when the writer lock finds the other kernel's
    commit (the principal revoked there) answers the revoked principal, and the two kernels
    fail the trace; as written, they pass it."""
    from wgk.impl.front.kernel import Kernel
    loaded = load_traces([str(REVOKED)])
    assert [c.verdict for c in two_kernel_checks("quick", None, loaded)] == ["pass"]
    monkeypatch.setattr(Kernel, "_admitted_again", lambda self, rc, credential: rc)
    failed = two_kernel_checks("quick", None, loaded)
    assert [c.verdict for c in failed] == ["fail"] and "step 2" in failed[0].detail, failed[0].detail
