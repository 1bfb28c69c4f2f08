"""The model's prover set up once for the mutants' proofs (``conformance/z3/model_base.py``):
a mutant's first failing frame is the one a prover of its own finds."""
from __future__ import annotations

import pytest

from wgk.conformance.z3 import model_base
from wgk.conformance.z3.kills import refute
from wgk.conformance.z3.mutants import MUTANTS
from wgk.conformance.z3.prove import Prover
from wgk.model.actions import Instance

#: rules replaced (one and two tasks), functions patched (a kernel check every kind reaches,
#: rule-file functions some kinds reach, a table's entries), a reducer of its own
CHOSEN = ("double-dispatch", "reopen-overtakes-dependent", "manifest-without-token",
          "explore-reads-main", "reset-before-owner-exit", "ready-by-status",
          "receipt-planned-as-live-owner", "trusts-actor-label")


def _frame(r):
    return None if r is None else (r.invariant, r.transition, r.status)


def _own(m):
    return refute(m, prover=Prover(Instance.proof(tasks=m.instance.tasks), m.semantics(),
                                   transitions=()))


@pytest.mark.parametrize("name", CHOSEN)
def test_a_shared_set_up_fails_the_frame_a_prover_of_its_own_fails(name):
    m = MUTANTS[name]
    assert _frame(refute(m)) == _frame(_own(m)) is not None


def test_what_the_base_shares_it_reached_none_of_the_targets_of():
    """The base notes what each piece of the model's prover reached: a kernel check every
    request reaches is noted on the submit-manifest frames; the set-up of a rule-file
    function's kinds on those kinds only."""
    m = MUTANTS["explore-reads-main"]
    base = model_base.base_for(Instance.proof(tasks=1), model_base.WATCHED)
    own = {model_base.target(o, n) for o, n, _ in m.patches}
    assert own <= base.watched and not base.setup & own
    hit = {k.label for k, reached in base.by_kind.items() if reached & own}
    assert hit and hit != {k.label for k in base.by_kind}
    token = {model_base.target(o, n) for o, n, _ in MUTANTS["manifest-without-token"].patches}
    assert base.reached("submit-manifest") & token


def test_a_base_noting_nothing_would_miss_a_kill(monkeypatch):
    """Without the notes (every piece taken as reaching nothing) the frames a patched function
    changes would be taken from the model: the kill is lost. So the notes are what keeps it."""
    m = MUTANTS["explore-reads-main"]
    monkeypatch.setattr(model_base, "_BASES", {})
    monkeypatch.setattr(model_base.ModelBase, "_noting", lambda self, key, fn: fn)
    assert _frame(refute(m)) != _frame(_own(m))


def test_the_kinds_asking_who_of_a_semantics_replacing_rules_are_found_on_those_kinds():
    """``actor_sensitive`` of a mutant that only replaces rules runs the replaced kinds and
    takes the model's answer for the others: the answer running every kind gives."""
    from wgk.conformance.z3 import transition
    from wgk.conformance.z3.prove import chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    graph = symbolic_graph(Instance.proof(tasks=1).task_names(), chain_deps(1))
    ruled = [m for m in MUTANTS.values() if transition.changed_kinds(m.semantics())]
    assert len(ruled) > 30
    for m in ruled:
        sem = m.semantics()
        assert transition.actor_sensitive(graph, sem) == \
            transition._actor_sensitive(graph, sem), m.name
    from wgk.model.rules import RULES
    from wgk.model.vocab import Kind

    def asking(s, i, t, r):                   # dispatch that asks who sent it
        return RULES[Kind.DISPATCH](s, i, t, r) if r.actor != "nobody" else None
    sem = transition.Semantics("asks", {**RULES, Kind.DISPATCH: asking})
    assert Kind.DISPATCH not in transition.actor_sensitive(graph, transition.MODEL)
    assert transition.actor_sensitive(graph, sem) == \
        transition.actor_sensitive(graph, transition.MODEL) | {Kind.DISPATCH}
