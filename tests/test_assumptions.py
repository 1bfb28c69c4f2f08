"""Environment assumptions (kind "assume") are one registry with the invariants: the checkers
assume them in every state and never report them as kernel invariants."""
from __future__ import annotations

import pytest

from wgk.conformance.check.explore import explore
from wgk.conformance.check.simulate import simulate
from wgk.conformance.z3.bmc import check, goal_for
from wgk.conformance.z3.prove import Bounds, Prover
from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY, Property, always, assumptions, violations

INST = Instance(tasks=1, attempts=2, groups=("core",))


def test_worksave_exact_is_an_assumption_not_a_kernel_invariant():
    p = REGISTRY["worksave-exact"]
    assert p.kind == "assume" and p.scope == "state"
    assert p in assumptions() and p not in always()
    assert all(q.kind in ("always", "sometimes", "assume") for q in REGISTRY.values())


@pytest.fixture
def one_attempt(monkeypatch):
    """A temporary assumption that the model's retry breaks: the environment allows one attempt."""
    p = Property("one-attempt", "assume", "state", "At most one attempt runs.",
                 lambda s, i, t: t.attempt <= 1)
    monkeypatch.setitem(REGISTRY, p.id, p)
    return p


def test_explore_and_simulate_do_not_go_outside_the_assumptions(monkeypatch):
    free = explore(INST)
    assert "retry-reached" in free.reached
    p = Property("one-attempt", "assume", "state", "At most one attempt runs.",
                 lambda s, i, t: t.attempt <= 1)
    monkeypatch.setitem(REGISTRY, p.id, p)
    assumed = explore(INST)
    assert "retry-reached" not in assumed.reached
    assert assumed.distinct_states < free.distinct_states
    assert not assumed.violations                       # an assumption is not reported as broken
    walks = simulate(INST, traces=200, steps=30, seed=1)
    assert "retry-reached" not in walks.reached and not walks.violations


def test_bmc_paths_stay_within_the_assumptions(monkeypatch):
    run = Instance(tasks=1, attempts=2, groups=("core", "env"))
    assert check(goal_for("retry-reached"), run, 5).status == "reached"
    p = Property("one-attempt", "assume", "state", "At most one attempt runs.",
                 lambda s, i, t: t.attempt <= 1)
    monkeypatch.setitem(REGISTRY, p.id, p)
    assert check(goal_for("retry-reached"), run, 5).status == "unreachable"
    # asked for itself, the assumption is searched for, not assumed
    broken = check(goal_for("one-attempt"), INST, 3)
    assert broken.status == "violated" and broken.found_at is not None


def test_prove_assumes_them_and_checks_the_model_keeps_them(one_attempt):
    prover = Prover(Bounds(tasks=1))
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
