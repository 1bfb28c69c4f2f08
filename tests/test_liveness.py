"""Liveness: eventually-properties under the fairness assumptions, lassos, mutants killed."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wgk.conformance.check.explore import explore
from wgk.conformance.check.liveness import lasso_run
from wgk.conformance.check.liveness_mutants import LIVENESS_MUTANTS
from wgk.conformance.traces.format import load_trace
from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY
from wgk.model.liveness import due_kinds, settled
from wgk.model.vocab import Kind

# Pinned: the components of the explored graph an infinite run could stay in, examined
# under the fairness assumptions (a change to the model or to the check shows up here).
PINNED_COMPONENTS = {Instance(tasks=1): 20}   # tasks=2: tests/test_model_explore.py


def test_assumptions_and_eventually_properties_are_in_the_registry():
    kinds = {p.id: p.kind for p in REGISTRY.values()}
    assert kinds["daemon-takes-due-actions"] == kinds["live-owner-eventually-ends"] == "assume"
    assert kinds["eventually-settles"] == kinds["convergence-makes-progress"] == "eventually"


def test_the_initial_task_is_due_for_dispatch_and_not_settled():
    s = Instance(tasks=2).initial()
    assert due_kinds(s, 0) == {Kind.DISPATCH} and not settled(s, 0, s.tasks[0])
    assert settled(s, 1, s.tasks[1]) and not due_kinds(s, 1)     # waits on its dependency


def test_the_model_is_live_and_liveness_leaves_state_counts_alone():
    inst = Instance(tasks=1)
    off, on = explore(inst), explore(inst, liveness=True)
    assert off.liveness is None and off.graph is None
    assert (on.distinct_states, on.transitions) == (off.distinct_states, off.transitions)
    live = on.liveness
    assert live.checked == ["eventually-settles", "convergence-makes-progress"]
    assert live.assumed == ["daemon-takes-due-actions", "live-owner-eventually-ends"]
    assert live.violations == []
    assert live.components == PINNED_COMPONENTS[inst]


def test_an_incomplete_search_is_not_checked():
    r = explore(Instance(tasks=1), liveness=True, max_states=50)
    assert not r.complete and r.liveness is None


@pytest.mark.parametrize("name", sorted(LIVENESS_MUTANTS))
def test_liveness_mutants_are_killed_by_exploration(name, tmp_path):
    m = LIVENESS_MUTANTS[name]
    rules = m.rule_table()
    r = explore(m.instance, rules=rules, liveness=True)
    hits = [v for v in r.liveness.violations if v.property == m.kills]
    assert hits, (name, r.liveness.to_json())
    lasso = hits[0]
    assert lasso.cycle and lasso.task == "t1"
    run = lasso_run(m.instance, rules, lasso, f"wgk explore --tasks 1 --mutant {name}")
    trace = load_trace(run.write(tmp_path / "lasso.json"))
    assert len(trace.steps) == len(lasso.prefix) + len(lasso.cycle)
    assert f"--mutant {name}" in trace.source["provenance"]
    # the cycle leads back where it started: replaying it once more gives the same state
    s = m.instance.initial()
    from wgk.conformance.check.interning import successor
    for step in lasso.prefix_steps:
        s = successor(m.instance, s, step, rules)[1]
    start = s
    for step in lasso.cycle_steps:
        s = successor(m.instance, s, step, rules)[1]
    assert s == start


def test_convergence_that_never_acts_loops_without_progress():
    m = LIVENESS_MUTANTS["convergence-never-acts"]
    r = explore(m.instance, rules=m.rule_table(), liveness=True)
    loop = [v for v in r.liveness.violations if v.property == "convergence-makes-progress"]
    assert loop and loop[0].cycle == ["declare-lost(t1)"]


def _wgk(*args):
    return subprocess.run([sys.executable, "-m", "wgk.conformance", "explore", *args],
                          capture_output=True, text=True, check=False)


def test_cli_reports_liveness_and_writes_replayable_lassos(tmp_path):
    ok = _wgk("--tasks", "1", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["liveness"]["violations"] == []
    out = _wgk("--tasks", "1", "--mutant", "convergence-never-acts", "--lasso", str(tmp_path))
    assert out.returncode == 1, out.stderr
    assert "LIVENESS VIOLATION eventually-settles (t1)" in out.stdout
    files = sorted(tmp_path.glob("*.json"))
    assert [f.name for f in files] == ["lasso-convergence-makes-progress.json",
                                       "lasso-eventually-settles-t1.json"]
    replay = subprocess.run([sys.executable, "-m", "wgk.conformance", "replay", str(files[1]),
                             "--system", "model"], capture_output=True, text=True, check=False)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_cli_unknown_mutant_is_a_usage_error():
    out = _wgk("--tasks", "1", "--mutant", "no-such")
    assert out.returncode == 2 and "unknown liveness mutant 'no-such'" in out.stderr
    assert "Traceback" not in out.stderr


def test_z3_proves_the_convergence_rank_decreases_and_the_mutant_breaks_it():
    from wgk.conformance.z3.rank import prove_rank
    from wgk.conformance.z3.transition import Semantics
    results = {r.transition: r.status for r in prove_rank(Instance.proof(tasks=2))}
    assert {"dispatch", "declare-lost", "probe-owner", "save-graph", "mark-repair"} <= set(results)
    assert set(results.values()) == {"proved"}, results
    m = LIVENESS_MUTANTS["convergence-never-acts"]
    broken = {r.transition: r.status
              for r in prove_rank(Instance.proof(tasks=2), Semantics(m.name, m.rule_table()))}
    assert broken["declare-lost"] == "counterexample"
    assert [t for t, st in broken.items() if st != "proved"] == ["declare-lost"]
