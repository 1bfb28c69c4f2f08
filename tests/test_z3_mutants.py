"""The mutant catalogue: every known-bad variant is killed by a failed proof and by a BMC
counterexample; the model itself survives the same checks."""
from __future__ import annotations

import pytest
import z3

from wgk.conformance.z3.bmc import check, goal_for
from dataclasses import replace

from wgk.conformance.oracle.mutant_traces import incident_traces, trace_verdicts
from wgk.conformance.z3.kills import Kill
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.mutants import (
    MUTANTS, Mutant, kill, patched, refute, refute_other, without_checks,
)
from wgk.conformance.z3.prove import Prover
from wgk.model import kernel, projections, rules
from wgk.model.actions import Instance
from wgk.model.env import EnvStep, apply_env
from wgk.model.invariants import REGISTRY
from wgk.model.vocab import Code, Kind as K

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


def test_a_first_kill_by_exploration_stops_at_the_violation_the_whole_search_finds():
    """The gate's kill (``first_kill``) of a mutant no incident trace detects explores only
    until the named invariant breaks: the same path as the whole exploration, fewer states."""
    from wgk.conformance.z3.kills import explore_mutant, first_kill
    m = MUTANTS["complete-before-publication"]
    k = first_kill(m, traces=trace_verdicts)
    whole = explore_mutant(m)
    assert k.killed and k.means() == ["proof", "explore"], k.summary()
    assert whole.detected and k.explored.path == whole.path
    assert k.explored.states < whole.states / 4 and not k.explored.complete


def test_a_mutant_of_some_rules_discovers_the_universe_every_kind_run_again_discovers():
    """A mutant replacing some kinds' rules runs only those kinds on the probe task (the others'
    pairs are the model's): its evidence universe is the one running every kind gives."""
    from wgk.conformance.z3 import transition as T
    from wgk.conformance.z3.prove import chain_deps
    from wgk.conformance.z3.sym_state import symbolic_graph
    partial = 0
    for m in MUTANTS.values():
        sem, inst = m.semantics(), Instance.proof(tasks=m.instance.tasks)
        graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
        cat, s, log = T._probe(graph, inst.ids(), T.actor_sensitive(graph, sem))
        T.branches(cat, s, T.Pool("probe.r", 1), sem)
        whole = tuple(sorted({(k, e) for k in {k for k, _ in log} for e in inst.ids()} | log))
        assert T.discover_universe(graph, inst.ids(), sem) == whole, m.name
        partial += T.changed_kinds(sem) not in (None, frozenset())
    assert partial >= 20


def _frame(r):
    return None if r is None else (r.invariant, r.transition, r.status)


@pytest.mark.parametrize("name", ["double-dispatch", "done-without-promotion-receipt"])
def test_a_prover_of_the_changed_kinds_fails_the_frame_the_whole_prover_fails_first(name):
    m = MUTANTS[name]
    inst, sem = Instance.proof(tasks=m.instance.tasks), m.semantics()
    changed = {k.label for k in m.changed_kinds}
    whole, few = Prover(inst, sem), Prover(inst, sem, transitions=changed)
    assert set(few.groups) == changed and few.transitions == whole.transitions
    assert [b.index for b in few.branches] == [b.index for b in whole.branches
                                               if b.transition in changed]
    # the same catalogue, state space and assumptions: a frame of one is a frame of the other
    assert [t.label for t in few.cat.templates] == [t.label for t in whole.cat.templates]
    assert (few.space.universe, few.space.keys, few.space.shapes) == \
        (whole.space.universe, whole.space.keys, whole.space.shapes)
    differ = z3.Solver()
    differ.add(z3.And(*few.solver.assertions()) != z3.And(*whole.solver.assertions()))
    assert differ.check() == z3.unsat
    first = refute(m, prover=whole)
    assert first.status == "counterexample" and first.transition in changed
    assert _frame(refute(m, prover=few)) == _frame(first) == _frame(refute(m))
    assert set(few.groups) == changed                  # the kill needed no other kind


@pytest.mark.parametrize("name", ["dead-owner-stays-in-progress"])
def test_a_kill_staged_on_the_models_base_fails_the_frames_a_whole_prover_fails(name):
    """``kill`` asks the proof and the other properties on the model's base (the frames the
    mutant shares with the model taken from it): the first failing frame of each is the one
    the mutant's own whole prover fails first (these mutants patch a function: every kind is
    walked, most frames shared)."""
    m = MUTANTS[name]
    prover = Prover(Instance.proof(tasks=m.instance.tasks), m.semantics(), transitions=())
    whole = refute_other(m, prover)
    assert whole is not None and whole.invariant != m.proof_target
    assert _frame(refute_other(m)) == _frame(whole)
    assert _frame(refute(m)) == _frame(refute(m, prover=prover))


def test_a_mutant_whose_changed_kinds_prove_goes_on_to_every_kind_in_order():
    # a rule change attempt-fencing does not see, beside a patched capability check it does
    m = replace(MUTANTS["stale-capability-accepted"], name="stale-capability-and-retry-budget",
                rules={K.DISPATCH: without_checks(K.DISPATCH, Code.RETRY_BUDGET_SPENT)})
    inst, sem = Instance.proof(tasks=1), m.semantics()
    fencing = REGISTRY[m.kills]
    assert Prover(inst, sem, transitions=["dispatch"]).check(fencing, "dispatch").status == "proved"
    whole = refute(m, prover=Prover(inst, sem))
    assert whole is not None and whole.transition != "dispatch"
    staged = Prover(inst, sem, transitions=())
    assert _frame(refute(m, prover=staged)) == _frame(whole) == _frame(refute(m, staged=False))
    # built up to the failing kind and no further: the changed kind, then the catalogue's order
    upto = staged.transitions[:staged.transitions.index(whole.transition) + 1]
    assert list(staged.groups) == ["dispatch"] + [t for t in upto if t != "dispatch"]
    # a mutant no frame of its property catches stays uncaught, every kind built
    survivor = replace(MUTANTS["done-without-promotion-receipt"], proof_by=None)
    staged = Prover(Instance.proof(tasks=1), survivor.semantics(), transitions=())
    assert refute(survivor, prover=staged) is None
    assert set(staged.groups) == set(staged.transitions)


@pytest.mark.parametrize("name", [m.name for m in MUTANTS.values() if m.decide is not None])
def test_a_mutant_reducer_is_what_its_incident_traces_replay(name):
    """A mutant with a reducer of its own is replayed through its incident traces by that
    reducer, with the compiled model the default of every other run (which compiles the
    kernel's ``decide``, not the mutant's): some trace detects it by a decision."""
    from wgk.conformance.oracle import systems
    assert systems.COMPILED["default"] is True
    verdicts = trace_verdicts(MUTANTS[name])
    assert verdicts and any(v["detects"] and "decision" in v["why"] for v in verdicts), verdicts


def test_a_trace_replayed_on_a_mutant_stops_at_the_divergence_replay_lists_first():
    """``first_divergence`` on the interpreted model (as ``trace_verdicts`` runs it) is
    ``replay``'s first divergence on the model as a replay runs it (compiled, but for a
    reducer of its own) on every incident trace of every mutant of the catalogue (and None
    where replay finds none)."""
    from contextlib import ExitStack
    from wgk.conformance.oracle import mutant_traces, systems
    from wgk.conformance.oracle.replay import replay
    from wgk.conformance.oracle.systems import ModelSystem, StepError
    compared = 0
    for m in MUTANTS.values():
        sem = m.semantics()
        for path in mutant_traces.incident_traces(m):
            trace = mutant_traces._read(path)
            with ExitStack() as stack:
                stack.enter_context(sem.active())
                if m.decide is not None:
                    stack.enter_context(patched(((systems, "decide", m.decide),)))
                make = lambda: ModelSystem(trace, rules=sem.rules,             # noqa: E731
                                           compiled=False if m.decide is not None else None)
                try:
                    whole = replay(trace, [make()]).divergences
                except StepError:
                    continue
                first = mutant_traces.first_divergence(
                    trace, ModelSystem(trace, rules=sem.rules, compiled=False))
            assert first == (whole[0] if whole else None), (m.name, path.name)
            compared += first is not None
    assert compared > 50
