"""The mutant catalogue: every known-bad variant is killed by a failed proof and by a BMC
counterexample; the model itself survives the same checks."""
from __future__ import annotations

import pytest

from wgk.conformance.z3.bmc import check, goal_for
from dataclasses import replace

from wgk.conformance.oracle.mutant_traces import incident_traces, trace_verdicts
from wgk.conformance.z3.kills import Kill
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.mutants import MUTANTS, Mutant, kill, patched, refute, refute_other
from wgk.conformance.z3.prove import Prover
from wgk.model import kernel, projections, rules
from wgk.model.actions import Instance
from wgk.model.env import EnvStep, apply_env
from wgk.model.invariants import REGISTRY

NAMED = ["done-without-promotion-receipt", "heartbeat-timeout-terminalizes-live-owner",
         "pid-only-liveness", "broker-drops-worktree-context", "reset-claims-continuation",
         "dead-owner-stays-in-progress", "duplicate-compaction-double-counted",
         "promotion-without-review", "cas-ignores-moved-target",
         "legacy-done-satisfies-dependency", "second-terminal-overwrites-first",
         "replay-reexecutes-effect"]


def test_catalogue_covers_every_incident_and_the_named_mutants():
    covered = {i for m in MUTANTS.values() for i in m.incidents}
    assert covered >= set(range(1, 18))
    assert set(NAMED) <= set(MUTANTS)
    for m in MUTANTS.values():
        assert m.kills in REGISTRY and REGISTRY[m.kills].kind == "always"
        assert m.rules or m.decide or m.patches


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_is_killed_by_proof_and_by_bmc(name):
    m = MUTANTS[name]
    k = kill(m, traces=trace_verdicts)
    assert k.by_proof, f"{name}: every proof frame of {m.proof_target} passed"
    assert k.proof.invariant == m.proof_target      # through the property it names, no other
    assert k.by_bmc, f"{name}: no counterexample within depth {m.depth}"
    assert k.by_explore or k.by_trace, f"{name}: neither exploration nor a trace detects it"
    assert k.killed and k.means()[0] == "proof" and len(k.means()) >= 2
    assert k.bmc.found_at <= m.depth
    data = k.to_json()
    assert data["proof"]["invariant"] == m.proof_target and data["explore"] is not None
    assert data["traces"] is not None and data["means"] == k.means()
    # the counterexample is genuine: replay it through the mutant's own executable semantics
    sem = m.semantics()
    with sem.active():
        s = m.instance.initial()
        for step in k.bmc.trace.steps:
            if isinstance(step, EnvStep):
                s = apply_env(s, step)
            else:
                d, s2 = sem.run(s, step)
                before, s = s, s2
        p = REGISTRY[m.kills]
        if p.scope == "state":
            assert p.holds(s) is not True
        else:
            assert p.holds(before, step, d, s) is not True


@pytest.mark.parametrize("name", [n for n, m in MUTANTS.items() if m.depth <= 3])
def test_the_model_survives_the_checks_that_kill_mutants(name):
    m = MUTANTS[name]
    r = check(goal_for(m.kills), m.instance, m.depth)
    assert r.status == "holds", r.trace.labels if r.trace else r.status


def test_patches_are_restored_even_on_error():
    originals = (rules.owner_alive, kernel.capability_matches,
                 projections.WAY_CONDITIONS["declare-lost"])
    with pytest.raises(RuntimeError):
        with patched(((rules, "owner_alive", None), (kernel, "capability_matches", None),
                      (projections.WAY_CONDITIONS, "declare-lost", None))):
            assert rules.owner_alive is None
            raise RuntimeError("boom")
    assert (rules.owner_alive, kernel.capability_matches,
            projections.WAY_CONDITIONS["declare-lost"]) == originals


def test_a_kill_through_another_property_is_reported_apart_and_is_no_kill():
    m = replace(MUTANTS["done-without-promotion-receipt"], proof_by=None)
    prover = Prover(Instance.proof(tasks=1), m.semantics())
    assert refute(m, prover=prover) is None            # done-iff-graphsave stays inductive
    other = refute_other(m, prover)
    assert other is not None and other.invariant in LEMMAS
    k = Kill(m, None, None, 0.0, other, None, [{"trace": "x", "detects": True, "why": ""}])
    assert not k.killed and k.by_other_proof and k.by[0].startswith("other-proof:")
    assert k.to_json()["other_proof"]["kind"] == "lemma"
    assert MUTANTS["done-without-promotion-receipt"].proof_target in LEMMAS


def test_traces_and_exploration_can_miss_and_then_the_mutant_is_not_killed():
    m = MUTANTS["stale-capability-accepted"]
    unchanged = Mutant("unchanged", m.incidents, "the model itself", m.kills, m.instance, m.depth)
    verdicts = trace_verdicts(unchanged)
    assert [v["trace"] for v in verdicts] == [p.stem for p in incident_traces(unchanged)]
    assert verdicts and not any(v["detects"] for v in verdicts)
    assert any(v["detects"] for v in trace_verdicts(m))
    proof = refute(m)
    assert Kill(m, proof, None, 0.0, traces=verdicts).killed is False
    assert Kill(m, proof, None, 0.0, traces=trace_verdicts(m)).killed is True
