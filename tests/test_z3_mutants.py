"""The mutant catalogue: every known-bad variant is killed by a failed proof and by a BMC
counterexample; the model itself survives the same checks."""
from __future__ import annotations

import pytest

from wgk.conformance.z3.bmc import check, goal_for
from wgk.conformance.z3.mutants import MUTANTS, kill, patched
from wgk.model import kernel, projections, rules
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
    k = kill(m)
    assert k.by_proof, f"{name}: every proof frame passed"
    assert k.by_bmc, f"{name}: no counterexample within depth {m.depth}"
    assert k.killed and len(k.by) == 2
    assert k.bmc.found_at <= m.depth
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
