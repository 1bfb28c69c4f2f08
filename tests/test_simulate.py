"""Random simulation: reproducible by seed, every invariant checked, violations come with their walk."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from wgk.conformance.check.simulate import simulate
from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY
from wgk.model.kernel import decide
from wgk.model.rules import RULES, close_attempt, guarded
from wgk.model.state import NO_RECEIPT
from wgk.model.vocab import AttemptState, Code, DecisionKind, Kind, Receipt

SLICE = Instance(tasks=2, groups=("core", "env"))


def without_timing(result) -> dict:
    data = result.to_json()
    for k in ("seconds", "traces_per_second", "steps_per_second"):
        data.pop(k)
    return data


def false_done_rules() -> dict:
    """Mutant: the effect receipt is dropped and save-graph no longer checks receipts (incident 1)."""
    def save_graph_without_receipts(s, i, t, r):
        g = RULES[Kind.SAVE_GRAPH](s, i, t, r)
        return guarded([c for c in g.checks if c[1] != Code.EVIDENCE_MISSING], g.update, g.kind)

    def commit_effect_without_receipt(s, i, t, r):
        g = RULES[Kind.COMMIT_EFFECT](s, i, t, r)

        def update():
            s2 = g.update()
            t2 = s2.tasks[i]
            return s2.put(i, replace(t2, receipts=t2.with_receipt(Receipt.EFFECT, NO_RECEIPT)))
        return guarded(g.checks, update, g.kind)

    rules = dict(RULES)
    rules[Kind.SAVE_GRAPH] = save_graph_without_receipts
    rules[Kind.COMMIT_EFFECT] = commit_effect_without_receipt
    return rules


def test_a_clean_slice_runs_every_walk_to_full_length_without_violation():
    r = simulate(SLICE, traces=100, steps=20, seed=1)
    assert r.violations == ()
    assert r.traces == 100 and r.steps == 2000 and r.deadlocks == 0
    assert "lost-reached" in r.reached and "lost-reached" not in r.unreached


def test_the_same_seed_gives_the_same_walks_and_another_seed_other_walks():
    rules = false_done_rules()
    inst = Instance(tasks=1, groups=("core",))
    a = simulate(inst, traces=300, steps=30, seed=7, rules=rules)
    b = simulate(inst, traces=300, steps=30, seed=7, rules=rules)
    c = simulate(inst, traces=300, steps=30, seed=8, rules=rules)
    assert without_timing(a) == without_timing(b)
    assert a.violations and c.violations
    assert [(v.trace, v.path) for v in a.violations] != [(v.trace, v.path) for v in c.violations]


def test_a_state_invariant_violation_is_found_with_a_walk_that_reproduces_it():
    inst = Instance(tasks=1, groups=("core",))
    r = simulate(inst, traces=300, steps=30, seed=7, rules=false_done_rules())
    v = next(v for v in r.violations if v.invariant == "done-iff-graphsave")
    assert v.path[0].startswith("dispatch(t1)") and v.path[-1].startswith("save-graph(t1)")
    s = inst.initial()
    for req in v.steps:                    # the walk is data: replay it through the mutant model
        d, s = decide(s, req, false_done_rules())
        assert d.kind != DecisionKind.REJECTED
    assert REGISTRY["done-iff-graphsave"].holds(s) is False
    assert s == v.state


def test_a_step_invariant_violation_is_found():
    def probe_closes_the_attempt(s, i, t, r):        # evidence terminalizes a live owner
        return guarded([], lambda: s.put(i, close_attempt(t, AttemptState.LOST)),
                       kind=DecisionKind.EVIDENCE_ONLY)
    rules = dict(RULES)
    rules[Kind.PROBE_OWNER] = probe_closes_the_attempt
    r = simulate(Instance(tasks=1, groups=("core",)), traces=50, steps=10, seed=2, rules=rules)
    v = next(v for v in r.violations if v.invariant == "evidence-cannot-terminalize-live-owner")
    assert v.path[-1].startswith("probe-owner(t1)")


def test_a_state_with_no_enabled_step_ends_the_walk():
    def nothing_is_accepted(s, i, t, r):
        return guarded([(False, Code.HELD)], lambda: s)
    rules = {k: nothing_is_accepted for k in RULES}
    r = simulate(Instance(tasks=1, groups=("core",)), traces=5, steps=10, seed=0, rules=rules)
    assert r.deadlocks == 5 and r.steps == 0 and r.violations == ()


def wgk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgk.conformance", *args],
                          capture_output=True, text=True, check=False)


def test_cli_json_is_reproducible_by_seed():
    args = ("simulate", "--traces", "30", "--steps", "12", "--tasks", "2", "--seed", "5", "--json")
    first, second = wgk(*args), wgk(*args)
    assert first.returncode == 0, first.stderr
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    for d in (a, b):
        for k in ("seconds", "traces_per_second", "steps_per_second"):
            d.pop(k)
    assert a == b
    assert a["traces"] == 30 and a["max_steps"] == 12 and a["seed"] == 5 and a["violations"] == []
    assert a["reproduce"].startswith("wgk simulate --traces 30 --steps 12 --seed 5")


def test_cli_text_names_the_seed_and_bad_usage_is_one_line_exit_2():
    out = wgk("simulate", "--traces", "10", "--steps", "5", "--tasks", "1")
    assert out.returncode == 0, out.stderr
    assert "no invariant violated" in out.stdout and "reproduce: wgk simulate" in out.stdout
    for bad, word in ((("--traces", "0"), "--traces"), (("--groups", "core,bogus"), "bogus"),
                      (("--steps", "-1"), "--steps")):
        r = wgk("simulate", *bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and word in r.stderr, r.stderr
    assert "wgk simulate --traces 1000 --steps 20" in wgk("simulate", "--help").stdout
