"""The intruder's templates: every actor of a template's class is treated alike by the
kernel's role check, so whichever of its shapes the solver picks, the request it decodes to
is decided as the symbolic one was."""
from __future__ import annotations

import z3

from wgk.model.kernel import role_held
from wgk.model.vocab import INTRUDER, Actor, Code, DecisionKind as D, Kind

from wgk.conformance.traces.export import step_label
from wgk.conformance.z3.crosscheck import compare_step, decode_decision
from wgk.conformance.z3.symbolic import decode_state, value

from wgk.conformance.z3.bmc import goal_for
from wgk.conformance.z3.catalogue import POOL, intruder_templates
from wgk.conformance.z3.mutants import MUTANTS
from wgk.conformance.z3.unrolling import Unrolling


def test_an_intruder_template_holds_actors_whose_role_the_intruder_holds_alike():
    """Per template, the actors' role check (``role_held``) answers one way; a kind whose
    authorized actors the intruder partly holds has a template for each part."""
    inst = MUTANTS["continuation-by-session"].instance
    s = inst.initial()
    held = s.graph.principals[INTRUDER]
    templates = intruder_templates(list(Kind), ["t1"], ("e1",), held)
    values = {name: 0 for name in POOL}
    mixed = set()
    for tpl in templates:
        answers = {role_held(s, tpl.concrete(values, a, None, s.graph.graph_id))
                   for a in tpl.actors}
        assert len(answers) == 1, f"{tpl.label}: {[a.label for a in tpl.actors]}"
        if tpl.unheld:
            mixed.add(tpl.kind)
            assert answers == {False}
    assert Kind.RESUME in mixed and Kind.MESSAGE in mixed
    labels = [t.label for t in templates]
    assert len(labels) == len(set(labels))


def test_an_intruder_template_of_a_kind_whose_rule_asks_who_sent_it_is_one_actor():
    """For the kinds in ``by_actor`` each actor the intruder holds is a template of its own
    (as the role labels' templates are); those it does not hold stay one class."""
    held = {Actor.DAEMON, Actor.EVALUATOR}
    split = intruder_templates([Kind.ACCEPT, Kind.RESUME], ["t1"], ("e1",), held,
                               by_actor=frozenset({Kind.ACCEPT}))
    accept = [t for t in split if t.kind == Kind.ACCEPT]
    assert sorted(t.actors for t in accept) == sorted([(Actor.DAEMON,), (Actor.EVALUATOR,)])
    assert all(t.by_actor for t in accept) and len({t.label for t in accept}) == 2
    resume = [t for t in split if t.kind == Kind.RESUME]
    assert [(t.actors, t.unheld) for t in resume] == [((Actor.DAEMON,), False),
                                                     ((Actor.WRAPPER,), True)]
    plain = intruder_templates([Kind.ACCEPT], ["t1"], ("e1",), held)
    assert [t.actors for t in plain] == [(Actor.DAEMON, Actor.EVALUATOR)]


def _replay(u: Unrolling, model, length: int) -> list:
    """Each of the first ``length`` steps of ``model`` decoded and run through the
    unrolling's semantics, its decision and post-state compared with the solver's (as
    ``Unrolling.trace`` does, without asking the goal); the concrete decisions."""
    s, out = u.initial, []
    with u.sem.active():
        for k in range(length):
            b = u.steps[k].branches[value(model, u.steps[k].sel)]
            step = u.cat.concrete_step(b.index, model, u.steps[k].pool, u.keys)
            d, s2 = u.sem.run(s, step)
            compare_step(f"step {k + 1} {step_label(step)}", decode_decision(model, b.decision),
                         decode_state(model, u.space, u.states[k + 1], s.graph), d, s2)
            out.append(d)
            s = s2
    return out


def test_each_shape_of_the_intruders_resume_replays_as_the_solver_decided():
    """The path on which the bounded check of continuation-by-session found a trace the
    mutant did not replay (solver: applied; mutant: role-not-held): a dispatch, the owner
    dies, the observer probes it, the intruder resumes. With each shape of the intruder's
    resume forced in turn, the path's model replays step by step with the solver's decisions,
    and so does the goal's trace when the solver finds one: posing as the wrapper, whose
    role it holds, the intruder resumes without the token (the mutant's bug); posing as the
    daemon it is rejected as role-not-held on both sides."""
    m = MUTANTS["continuation-by-session"]
    goal, sem = goal_for(m.kills), m.semantics()
    cat = Unrolling(m.instance, sem).cat
    index = {t.label: n for n, t in enumerate(cat.templates)}
    resumes = [n for n, t in enumerate(cat.templates)
               if not t.is_env and t.kind == Kind.RESUME and t.principal == INTRUDER]
    path = [index["dispatch(t1)"], index["env:owner-dies(t1)"], index["probe-owner(t1,ev=e1)"]]
    decided, found = {}, 0
    for n in resumes:
        for shape in cat.templates[n].shapes:
            u = Unrolling(m.instance, sem)
            for step in path + [n]:
                u.extend([step])
            u.solver.add(u.steps[-1].pool.shape == shape)
            hit = u.solve(z3.BoolVal(True))
            assert isinstance(hit, z3.ModelRef)
            decided[cat.shapes[shape][1]] = _replay(u, hit, 4)[-1]
            hit = u.solve(u.step_goal(goal, 3))
            if hit is not None:
                found += 1
                assert len(u.trace(hit, 4, goal).steps) == 4
    assert (decided[Actor.DAEMON].kind, decided[Actor.DAEMON].code) == \
        (D.REJECTED, Code.ROLE_NOT_HELD)
    assert found == 1 and len(resumes) == 2
