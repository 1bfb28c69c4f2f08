"""Environment assumptions (kind "assume") are one registry with the invariants: the checkers
assume them in every state and never report them as kernel invariants."""
from __future__ import annotations

import pytest

from wgk.conformance.check.explore import explore
from wgk.conformance.check.simulate import simulate
from wgk.conformance.z3.bmc import check, goal_for
from wgk.conformance.z3.prove import Prover
from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY, Property, always, assumptions, violations
from wgk.model.logic import any_of

INST = Instance(tasks=1, attempts=2, groups=("core",))


def test_worksave_exact_is_an_assumption_not_a_kernel_invariant():
    p = REGISTRY["worksave-exact"]
    assert p.kind == "assume" and p.scope == "state"
    assert p in assumptions() and p not in always()
    assert all(q.kind in ("always", "sometimes", "assume", "eventually") for q in REGISTRY.values())


@pytest.fixture
def one_attempt(monkeypatch):
    """A temporary assumption that the model's retry breaks: the environment allows one attempt."""
    p = Property("one-attempt", "assume", "state", "At most one attempt runs.",
                 lambda s, i, t: t.attempt <= 1)
    monkeypatch.setitem(REGISTRY, p.id, p)
    return p


def test_explore_and_simulate_report_a_kernel_step_that_breaks_an_assumption(one_attempt):
    # the model's environment keeps its assumptions by construction: only a kernel step
    # (here: retry) can break one, and that is reported under the assumption's id
    found = explore(INST)
    assert "one-attempt" in [v.invariant for v in found.violations]
    v = next(v for v in found.violations if v.invariant == "one-attempt")
    assert any(lab.startswith(("retry", "dispatch")) for lab in v.path), v.path
    walks = simulate(INST, traces=300, steps=30, seed=1)
    assert "one-attempt" in [v.invariant for v in walks.violations]


def _no_pid_reuse(s, i, t):
    return any_of(t.proc_birth == 0, t.proc_birth == t.owner_birth)


def test_bmc_takes_no_environment_step_that_breaks_an_assumption(monkeypatch):
    run = Instance(tasks=1, attempts=2, groups=("core", "env"))
    assert check(goal_for("pid-reuse-detected"), run, 6).status == "reached"
    p = Property("no-pid-reuse", "assume", "state", "A pid is never reused.", _no_pid_reuse)
    monkeypatch.setitem(REGISTRY, p.id, p)
    assert check(goal_for("pid-reuse-detected"), run, 6).status == "unreachable"
    # asked for itself, the assumption is searched for, not assumed
    broken = check(goal_for("no-pid-reuse"), run, 6)
    assert broken.status == "violated" and broken.trace.labels[-1].startswith("env:pid-reuse")


def test_bmc_still_finds_a_kernel_step_that_breaks_an_assumption(one_attempt):
    r = check(goal_for("retry-reached"), Instance(tasks=1, attempts=2, groups=("core", "env")), 5)
    assert r.status == "reached"        # retry is a kernel step: the assumption does not hide it


def test_prove_assumes_them_and_checks_the_model_keeps_them(one_attempt):
    prover = Prover(Instance.proof(tasks=1))
    assert "one-attempt" in [p.id for p in prover.state_props]
    assert "worksave-exact" in [p.id for p in prover.state_props]
    report = prover.run(only=["one-attempt", "worksave-exact"])
    bad = {r.transition for r in report.results if r.status != "proved"}
    assert "retry" in bad                                # the model's retry breaks the assumption
    assert all(r.status == "proved" for r in report.results if r.invariant == "worksave-exact")
    assert "one-attempt" in report.to_json()["assumptions"]


def test_concrete_violations_list_kernel_invariants_only():
    from wgk.model.actions import Instance as I
    s = I(tasks=1).initial()
    assert violations(s) == []
    assert "worksave-exact" not in [p.id for p in always("state")]
