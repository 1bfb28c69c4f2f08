"""z3 proofs over the model's own rules: every always invariant inductive, counterexamples
decoded and replayed, the symbolic transition equal to the executable one."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.prove import (
    DOMAIN, Prover, SymbolicMismatch, crosscheck, prove,
)
from wgk.conformance.z3.symbolic import symbolic
from wgk.model.env import EnvKind
from wgk.conformance.check.interning import successor
from wgk.model.actions import Instance, steps
from wgk.model.vocab import REVIEW_KINDS, ReviewPhase
from wgk.model.invariants import REGISTRY
from wgk.model.kernel import decide
from wgk.model.rules import RULES
from wgk.model.vocab import Kind


@pytest.fixture(scope="module")
def report():
    return prove(Instance.proof(tasks=2))


def test_every_always_property_is_proved_for_every_transition(report):
    assert report.ok, [(r.invariant, r.transition) for r in report.failed()]
    # environment assumptions of a state are proved kept by the model's own steps too
    always = {p.id for p in REGISTRY.values()
              if p.kind == "always" or (p.kind == "assume" and p.scope == "state")}
    proved = {r.invariant for r in report.results}
    assert always | set(LEMMAS) | {DOMAIN.id} == proved
    transitions = {r.transition for r in report.results}
    assert {k.label for k in Kind} <= transitions
    assert {f"env:{k.label}" for k in (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE,
                                        EnvKind.MOVE_TARGET, EnvKind.TICK)} <= transitions
    assert len(report.results) == len(proved) * len(transitions)
    # most frames need the solver: the proof is not passed by skipping
    assert sum(r.solved for r in report.results) > len(report.results) / 3


def test_proof_json_shape(report):
    data = report.to_json()
    assert data["proved"] == len(data["results"]) and data["failed"] == data["unknown"] == 0
    row = data["results"][0]
    assert set(row) >= {"invariant", "transition", "status", "seconds"}
    assert row["status"] == "proved"


def test_without_lemmas_the_invariants_are_not_inductive_and_the_cti_replays():
    """A counterexample to induction is a concrete pre-state and request; run it ourselves."""
    prover = Prover(Instance.proof(tasks=1), lemmas={})
    p = REGISTRY["done-iff-graphsave"]
    results = [prover.check(p, t) for t in prover.groups]
    bad = [r for r in results if r.status == "counterexample"]
    assert bad, "done-iff-graphsave is not inductive on its own"
    cex = bad[0].counterexample
    assert p.holds(cex.pre) is True                     # the assumed invariant holds before
    d, post = decide(cex.pre, cex.step, RULES)          # the executable model, by hand
    assert post == cex.post and d.kind == cex.decision.kind
    assert p.holds(post) is not True                    # and it is broken after
    assert cex.tasks and cex.step_label.startswith(bad[0].transition)
    assert "pre t1" in cex.render() and bad[0].transition in cex.render()


def test_a_disagreement_between_solver_and_model_is_an_error():
    prover = Prover(Instance.proof(tasks=1), lemmas={})
    p = REGISTRY["done-iff-graphsave"]
    cex = next(r.counterexample for t in prover.groups
               if (r := prover.check(p, t)).status == "counterexample")
    t = cex.post.tasks[0]
    forged = replace(cex, post=cex.post.put(0, replace(t, revision=t.revision + 7)))
    with pytest.raises(SymbolicMismatch, match="post-states differ"):
        prover.replay(forged, p)


def test_symbolic_transition_equals_the_executable_one_on_random_walks():
    inst = Instance(tasks=2, attempts=2, generations=2, versions=2, review=True,
                    groups=("core", "evidence", "operator", "legacy", "env"))
    rng = random.Random(7)
    checked = 0
    for _ in range(4):
        s = inst.initial()
        for _ in range(20):
            step = rng.choice([x for x in steps(inst, s) if x is not None])
            crosscheck(s, step)
            checked += 1
            _, s2, _ = successor(inst, s, step, RULES)
            s = s2 if s2 is not None else s
    assert checked == 80


def test_symbolic_transition_equals_the_executable_one_on_the_review_valve():
    """Walks that mostly send the valve's kinds: the solver decides each as the model does
    (manifests of both contracts, every verdict the bounded actors send, publications)."""
    inst = Instance(tasks=2, groups=("core", "valve", "env"))
    rng = random.Random(11)
    phases = set()
    for _ in range(4):
        s = inst.initial()
        for _ in range(40):
            todo = [x for x in steps(inst, s) if x is not None]
            valve = [x for x in todo if getattr(x, "kind", None) in REVIEW_KINDS]
            step = rng.choice(valve if valve and rng.random() < 0.85 else todo)
            crosscheck(s, step)
            _, s2, _ = successor(inst, s, step, RULES)
            s = s2 if s2 is not None else s
            phases.update(t.review_phase for t in s.tasks)
    assert {ReviewPhase.REVIEW_BLOCKED, ReviewPhase.REVIEW_UNAVAILABLE, ReviewPhase.ACCEPTED} <= phases


def test_symbolic_backend_is_restored_after_use():
    from wgk.model import logic
    before = logic._backend
    with pytest.raises(RuntimeError):
        with symbolic():
            assert logic._backend is not None
            raise RuntimeError("boom")
    assert logic._backend is before


class _Unread:
    """A request field a template claims the rules never read: any use of it fails."""

    def __init__(self, name: str):
        self.name = name

    def _fail(self, *args):
        raise AssertionError(f"a rule read request field {self.name}")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __add__ = __radd__ = _fail
    __bool__ = __int__ = __index__ = __hash__ = _fail
    __getattr__ = _fail


def test_templates_leave_concrete_only_what_the_rules_do_not_compare():
    """Every request field a rule reads is symbolic in the template (or one of its concrete
    class parameters): poisoning the others changes nothing."""
    from wgk.conformance.z3.symbolic import Space, fresh_state
    from wgk.conformance.z3.catalogue import POOL, Catalogue, Pool, request_templates
    from wgk.conformance.z3.transition import actor_sensitive, discover_universe
    from wgk.model.kernel import decide
    from wgk.model.state import Graph
    from wgk.model.vocab import Kind
    g = Graph.build(["t1", "t2"], {"t2": ["t1"]}, graph_id="g")
    cat = Catalogue(request_templates(list(Kind), ["t2"], ("e1",), rejections=False,
                                      by_actor=actor_sensitive(g)), "g")
    space = Space(g, discover_universe(g, ("e1",)), ("k1",), len(POOL), len(cat.shapes),
                  cat.decode_digest)
    s = fresh_state(space, "p")
    pool = Pool("pr", 1)
    checked = 0
    with symbolic():
        for n, tpl in enumerate(cat.templates):
            r = cat.step(n, pool)
            for name in ("candidate", "base", "expected_attempt", "expected_generation"):
                if name not in tpl.params:
                    object.__setattr__(r, name, _Unread(name))
            if "pid" not in tpl.params:
                object.__setattr__(r, "owner", _Unread("owner"))
            decide(s, r)
            checked += 1
    assert checked == len(cat.templates) > 40


def test_lemmas_have_one_sentence_docstrings():
    for lem in LEMMAS.values():
        assert lem.doc.endswith(".") and ". " not in lem.doc, lem.id


def test_contradictory_lemmas_are_refused_not_used_to_prove_everything():
    from wgk.conformance.z3.prove import VacuousProof
    from wgk.model.invariants import Property
    from wgk.model.logic import all_of
    never = Property("never", "always", "state", "No attempt is ever open.",
                     lambda s, i, t: all_of(t.attempt == 0, t.attempt == 1))
    with pytest.raises(VacuousProof):
        Prover(Instance.proof(tasks=1), lemmas={"never": never})


def test_a_symbolic_count_compared_with_a_number_is_the_sum_it_stands_for():
    """``count`` under the z3 backend compares as a cardinality constraint: for every
    comparison and number it is equivalent to the sum of if-then-elses, and it still adds."""
    import z3
    from wgk.model.logic import count
    xs = [z3.Bool(f"count.x{n}") for n in range(4)]
    with symbolic():
        for known in ([], [True], [True, False, True]):
            c = count(known + xs)
            plain = z3.Sum([z3.IntVal(sum(known))] + [z3.If(x, 1, 0) for x in xs])
            for k in range(-1, 8):
                for a, b in ((c == k, plain == k), (c != k, plain != k), (c <= k, plain <= k),
                             (c < k, plain < k), (c >= k, plain >= k), (c > k, plain > k)):
                    s = z3.Solver()
                    s.add(a != b)
                    assert s.check() == z3.unsat, (known, k, a)
            s = z3.Solver()
            s.add(c + 1 != plain + 1)
            assert s.check() == z3.unsat
    assert count([True, False, True]) == 2          # concrete: a plain number


def test_an_at_most_one_built_pairwise_excludes_exactly_the_pairs_that_can_hold_together():
    """Within ``pairwise_of`` a count compared with a number builds its at-most-one as the
    overlapping pairs excluded: equivalent to the cardinality constraint in every assignment,
    on terms of which only some pairs can hold together and on the prover's ways forward
    (the assumption the pairwise form replaces); outside it, z3's ``AtMost``."""
    import z3
    from wgk.conformance.z3.sym_backend import BACKEND, overlapping
    from wgk.model.logic import count
    from wgk.model.projections import WAYS
    x, y = z3.Int("pairs.x"), z3.Int("pairs.y")
    terms = [x == 1, x == 2, y == 1, z3.And(y == 1, x == 2), y == 2]
    assert sorted(overlapping(terms)) == [(0, 2), (0, 4), (1, 2), (1, 3), (1, 4), (2, 3)]

    def equivalent(a, b):
        s = z3.Solver()
        s.add(a != b)
        return s.check() == z3.unsat

    memo: dict = {}
    with symbolic():
        assert "AtMost" in str(count(terms) <= 1)
        with BACKEND.pairwise_of(memo):
            for k in (0, 1, 2):
                assert equivalent(count(terms) == k, z3.PbEq([(t, 1) for t in terms], k))
                assert equivalent(count(terms) <= k, z3.AtMost(*terms, k))
            assert "AtMost" not in str(count(terms) <= 1)
            assert len(memo) == 1                   # one search for the same terms
        assert BACKEND.pairwise is None
    prover = Prover(Instance.proof(tasks=2), transitions=())
    # the ways' at-most-one of each task went through it
    assert len(prover.pairs) == 2
    with symbolic(), prover.sem.active():
        for i in range(2):
            ways = [w.enabled(prover.s, i) for w in WAYS]
            ways = [z3.BoolVal(w) if isinstance(w, bool) else w for w in ways]
            pairs = overlapping(ways)
            assert 0 < len(pairs) < len(ways) * (len(ways) - 1) // 2 // 4
            assert equivalent(z3.And([z3.Not(z3.And(ways[a], ways[b])) for a, b in pairs]),
                              z3.AtMost(*ways, 1))


def test_a_proof_shared_among_processes_reports_what_one_process_does():
    """``prove(jobs=2)``: the same frames with the same verdicts in the same order, the same
    base case, and a counterexample found in a forked share comes back decoded."""
    from wgk.conformance.z3.prove import queue
    inst = Instance.proof(tasks=1)
    one, two = prove(inst), prove(inst, jobs=2)
    key = lambda rep: [(r.invariant, r.transition, r.status, r.solved) for r in rep.results]
    assert key(one) == key(two) and two.ok
    assert [(f.invariant, f.status) for f in one.init] == \
        [(f.invariant, f.status) for f in two.init]
    assert [(e.transition, e.status) for e in one.enabled] == \
        [(e.transition, e.status) for e in two.enabled]
    kinds = queue(Prover(inst, transitions=()))
    assert sorted(kinds) == sorted({r.transition for r in one.results})
    only = ["done-iff-graphsave"]
    alone, shared = prove(inst, only=only, lemmas={}), prove(inst, only=only, lemmas={}, jobs=2)
    assert key(alone) == key(shared) and shared.failed()
    for r in shared.failed():
        assert r.status == "counterexample" and r.counterexample.step_label.startswith(r.transition)


def _taking(kinds: list[str]) -> list[str]:
    """What one process of ``prove(jobs=N)`` takes of ``kinds``, a kind at a time."""
    import time
    from wgk.conformance.z3.prove import _take
    out = []
    while (tr := _take(kinds)) is not None:
        out.append(tr)
        time.sleep(0.01)          # a kind's frames take a while: the other process takes meanwhile
    return out


def test_the_processes_of_a_shared_proof_take_every_kind_once_as_they_come_free():
    """Each process takes the next kind no process has taken, so every kind is checked by
    exactly one process and neither waits while kinds are left; the largest kinds come first."""
    from multiprocessing import get_context
    from wgk.conformance.z3 import prove as proving
    prover = Prover(Instance.proof(tasks=2), transitions=())
    kinds = proving.queue(prover)
    size = {tr: sum(proving.transition_of(t) == tr for t in prover.cat.templates) for tr in kinds}
    assert [size[tr] for tr in kinds] == sorted(size.values(), reverse=True)
    assert sorted(kinds) == sorted(prover.transitions)
    ctx = get_context("fork")
    proving._JOB.update(taken=ctx.Value("i", 0))
    try:
        with ctx.Pool(2) as pool:
            took = pool.map(_taking, [kinds, kinds])
    finally:
        proving._JOB.clear()
    assert all(took), "a process took no kind"
    assert sorted(took[0] + took[1]) == sorted(kinds)


def test_a_frame_the_type_domain_alone_cannot_refute_is_asked_under_every_assumption():
    """The solver holding only the type domain proves a frame only when it refutes it; a frame
    that needs an invariant or a lemma goes to the solver holding them all, and is proved
    there, or found a counterexample there."""
    import z3
    from wgk.conformance.z3.prove import _ask
    prover = Prover(Instance.proof(tasks=1))
    assert prover.run(base_case=False).ok
    assert prover.needs_assumptions, "every frame refuted by the type domain alone"
    assert prover.needs_assumptions < {p.id for p in prover.properties}
    pid = sorted(prover.needs_assumptions)[0]
    p = next(q for q in prover.properties if q.id == pid)
    needing = []
    for transition in prover.groups:
        goal = prover.goal(p, transition)
        if goal:
            disjunction = z3.Or([d for _, d, _ in goal])
            if _ask(prover.bare, disjunction)[0] != z3.unsat:
                needing.append((transition, _ask(prover.solver, disjunction)[0]))
    assert needing and all(v == z3.unsat for _, v in needing)
    # the same frame is proved whether or not it is first asked of the type domain alone
    transition = needing[0][0]
    prover.needs_assumptions.clear()
    assert prover.check(p, transition).status == "proved"
    # without the lemmas, the frames the invariants alone do not prove are counterexamples
    bare = Prover(Instance.proof(tasks=1), lemmas={})
    found = [bare.check(REGISTRY["done-iff-graphsave"], t) for t in bare.groups]
    assert any(r.status == "counterexample" for r in found)


def _goals(prover: Prover, transitions: list[str]) -> list[tuple[str, str, list]]:
    return [(p.id, tr, [d for _, d, _ in prover.goal(p, tr)])
            for tr in transitions for p in prover.properties]


def _ids(goals: list[tuple[str, str, list]]) -> list[tuple[str, str, list[int]]]:
    """The goals' term ids (compared while both sets of terms are alive: a freed term's id
    may be given to another)."""
    return [(p, tr, [d.get_id() for d in ds]) for p, tr, ds in goals]


def test_the_fast_comparisons_and_the_journal_memo_build_the_terms_z3py_builds(monkeypatch):
    """``IntTerm``'s ``==``/``!=`` through the C API, the goals' And/Not through the backend,
    the journal's memoised lookups and the backend's memo of the terms it built give, term for
    term, the goals the plain z3py operators, an unmemoised journal and a backend building
    every term anew give (z3 shares equal terms: the same id is the same term)."""
    import contextlib
    import z3
    from wgk.conformance.z3.sym_backend import IntTerm, Z3Backend, int_var
    from wgk.conformance.z3.sym_containers import SymJournal
    x, y = int_var("fast.x"), int_var("fast.y")
    for a, b in ((x, 3), (x, y), (x, list(ReviewPhase)[-1]), (3, x)):
        plain_eq = z3.ArithRef.__eq__(*((a, b) if isinstance(a, IntTerm) else (b, a)))
        plain_ne = z3.ArithRef.__ne__(*((a, b) if isinstance(a, IntTerm) else (b, a)))
        assert (a == b).get_id() == plain_eq.get_id() and (a != b).get_id() == plain_ne.get_id()
    assert (x == z3.Int("fast.z") + 1).get_id() == z3.ArithRef.__eq__(x, z3.Int("fast.z") + 1).get_id()
    inst = Instance.proof(tasks=2)
    transitions = ["dispatch", "submit", "record-disposition", "env:edit"]
    fast = Prover(inst, transitions=transitions)
    assert isinstance(fast.s.tasks[0].phase, IntTerm)
    goals = _goals(fast, transitions)
    assert sum(len(d) for _, _, d in goals) > 100
    assert len(fast.memo) > 1000                    # the backend's terms went through the memo
    monkeypatch.setattr(IntTerm, "_operand", lambda self, other: None)   # z3py's way
    monkeypatch.setattr(SymJournal, "lookup", SymJournal._lookup)
    monkeypatch.setattr(SymJournal, "__sym_eq__", SymJournal._eq)
    monkeypatch.setattr(Z3Backend, "memo_of", lambda self, memo: contextlib.nullcontext())
    plain = Prover(inst, transitions=transitions)
    assert not plain.memo
    assert _ids(_goals(plain, transitions)) == _ids(goals)


def test_the_backend_memo_gives_a_term_again_only_for_the_same_operands():
    """Within ``memo_of`` the same operands give the very object built before, other operands
    another term; outside it every term is built anew (and equal: z3 keeps one copy)."""
    import z3
    from wgk.conformance.z3.sym_backend import BACKEND, int_var
    c, d, x, y = z3.Bool("memo.c"), z3.Bool("memo.d"), int_var("memo.x"), int_var("memo.y")
    memo: dict = {}
    with BACKEND.memo_of(memo):
        first = [BACKEND.ite(c, x, y), BACKEND.and_([c, d]), BACKEND.or_([c, d]),
                 BACKEND.not_(c), BACKEND.eq(x, y), x == 3, x != y]
        again = [BACKEND.ite(c, x, y), BACKEND.and_([c, d]), BACKEND.or_([c, d]),
                 BACKEND.not_(c), BACKEND.eq(x, y), x == 3, x != y]
        other = [BACKEND.ite(d, x, y), BACKEND.ite(c, y, x), BACKEND.ite(c, x, 3),
                 BACKEND.and_([d, c]), BACKEND.or_([c, d, c]), BACKEND.not_(d),
                 BACKEND.eq(y, x), x == 4, x != 3]
    assert all(a is b for a, b in zip(first, again)) and len(memo) == len(first) + len(other)
    assert len({t.get_id() for t in first + other}) == len(first) + len(other)
    assert BACKEND.memo is None
    fresh = BACKEND.ite(c, x, y)
    assert fresh is not first[0] and fresh.get_id() == first[0].get_id()


def test_a_term_the_backend_cannot_build_is_z3s_error_not_a_null_term():
    """The backend calls z3's constructors without z3py's check: a constructor that gives no
    term (here an ``and`` of integers) raises z3's error."""
    import z3
    from wgk.conformance.z3.sym_backend import BACKEND, int_var
    with pytest.raises(z3.Z3Exception, match="[Ss]ort mismatch"):
        BACKEND.and_([int_var("null.x"), int_var("null.y")])


def test_a_journal_memo_answers_only_the_same_arguments():
    """A memoised lookup is the lookup of the same key and digest; another digest or key is
    looked up anew."""
    from wgk.conformance.z3.sym_containers import SymJournal
    prover = Prover(Instance.proof(tasks=1), transitions=["dispatch"])
    j: SymJournal = prover.s.journal
    steps_ = [b.step for b in prover.branches if b.step.key is not None]
    assert len(steps_) >= 2
    with symbolic():
        got = [j.lookup(r.journal_key, r.digest) for r in steps_]
        again = [j.lookup(r.journal_key, r.digest) for r in steps_]
        fresh = [j._lookup(r.journal_key, r.digest) for r in steps_]
    ident = lambda res: [tuple(x.get_id() if hasattr(x, "get_id") else x for x in t) for t in res]
    assert ident(got) == ident(again) == ident(fresh)
    lookups = [k for k in j._memo if k[0] == "lookup"]
    assert len(lookups) == len({(k[1], id(r.digest)) for r in steps_
                                for k in [("", ("ast", r.journal_key.get_id())
                                           if hasattr(r.journal_key, "get_id")
                                           else ("value", type(r.journal_key), r.journal_key))]})


def _by_answer_and_whole(tasks: int, transitions: list[str]) -> tuple[Prover, Prover]:
    split = Prover(Instance.proof(tasks=tasks), transitions=transitions)
    whole = Prover(Instance.proof(tasks=tasks), transitions=())
    whole.by_answer = False
    whole.build(transitions)
    return split, whole


def test_the_branches_by_the_journals_answer_give_the_goals_of_the_one_branch():
    """A request with a key is one branch per answer of the journal (used with the same bytes,
    with others, unused), and each frame is the frame of the template's one branch: a step
    property's goal is equivalent to the one branch's in every assignment; a state
    property's under the assumptions of the frame (the one branch's goal also holds where
    the journal answers "used" and the pre-state, which the step then leaves as it is,
    breaks the property: the property is assumed there, as in every task a step leaves
    alone). The frame is asked of the solver (``solved``) exactly when it is without the
    cases."""
    import z3
    transitions = ["dispatch", "submit", "accept", "record-disposition", "env:edit"]
    split, whole = _by_answer_and_whole(2, transitions)
    assert len(split.groups["accept"]) == 3 * len(whole.groups["accept"])
    assert len(split.groups["env:edit"]) == len(whole.groups["env:edit"])
    assert all(b.pre is not None for b in split.groups["accept"])
    anywhere = z3.SimpleSolver()
    compared = {"step": 0, "state": 0}
    for tr in transitions:
        for p in split.properties:
            a, b = split.goal(p, tr), whole.goal(p, tr)
            assert bool(a) == bool(b), (p.id, tr)
            if not a:
                continue
            checker = anywhere if p.scope == "step" else split.solver
            checker.push()
            checker.add(z3.Or([d for _, d, _ in a]) != z3.Or([d for _, d, _ in b]))
            assert checker.check() == z3.unsat, (p.id, tr)
            checker.pop()
            compared[p.scope] += 1
    assert compared["step"] > 50 and compared["state"] > 100


def test_a_step_property_true_in_every_case_is_asked_when_the_one_branch_can_break_it():
    """``role-held`` holds as such in every case of the intruder's ``accept`` (each decision is
    a constant), while on the template's one branch it is a term: its frame is still asked of
    the solver (``solved``), as it is without the cases; ``unchanged-outside-touches`` holds
    as such on both and is not."""
    split, whole = _by_answer_and_whole(6, ["accept"])
    for pid, solved in (("role-held", True), ("unchanged-outside-touches", False)):
        p = REGISTRY[pid]
        assert whole.check(p, "accept").solved is solved
        assert split.check(p, "accept").solved is solved
        assert split.check(p, "accept").status == "proved"


def test_the_branches_by_the_journals_answer_are_the_one_branch_case_by_case():
    """The cases of a template partition its one branch's guard, and under each case's
    condition the case's decision and post-state are the one branch's, leaf by leaf (a
    conflict's stored response, which no one reads, is left out: the reducer gives none)."""
    import z3
    from wgk.conformance.z3.symbolic import leaves
    from wgk.conformance.z3.transition import as_term
    transitions = ["dispatch", "accept", "save-work", "env:edit"]
    split, whole = _by_answer_and_whole(2, transitions)
    solver = z3.SimpleSolver()

    def never(*terms) -> bool:
        solver.push()
        solver.add(*terms)
        verdict = solver.check()
        solver.pop()
        return verdict == z3.unsat

    checked = 0
    with symbolic():
        for tr in transitions:
            for w in whole.groups[tr]:
                cases = [b for b in split.groups[tr] if b.index == w.index]
                assert cases and (len(cases) == 3) == (w.decision is not None and w.step.key is not None)
                assert never(z3.Or([c.guard for c in cases]) != w.guard)
                for n, c in enumerate(cases):
                    assert all(never(c.guard, o.guard) for o in cases[n + 1:])
                    same = [as_term(x) == as_term(y) for x, y in
                            zip(leaves(split.space, c.post), leaves(whole.space, w.post))
                            if x is not y]
                    if c.decision is not None:
                        fields = ["kind", "code"] + [f for f in ("original_kind", "original_code")
                                                     if getattr(c.decision, f) is not None]
                        same += [as_term(getattr(c.decision, f)) == as_term(getattr(w.decision, f))
                                 for f in fields]
                    same = [x for x in same if not z3.is_true(x)]
                    assert not same or never(c.guard, z3.Not(z3.And(same))), (tr, c.label, n)
                    checked += 1
    assert checked > 100


def _term_ids(xs: list) -> list:
    return [x.get_id() if hasattr(x, "get_id") else x for x in xs]


def test_the_guards_journals_and_substitutions_built_lean_are_the_generic_terms(monkeypatch):
    """The branches' guards and the enabledness conditions built with the backend's C calls,
    a journal's entries joined field by field (``put`` and ``__ite__``), a state property's
    goal substituting only the changed leaves its term reads, and the type domain's goal
    with each leaf's constraint kept by the leaf give, term for term, what
    ``z3.And``/``z3.Or``, the model's generic ``ite``, a substitution of every changed leaf
    and each constraint built anew give."""
    import z3
    from wgk.model import logic
    from wgk.conformance.z3 import basecase, sym_containers, transition
    from wgk.conformance.z3.sym_backend import BACKEND, substitute
    from wgk.conformance.z3.symbolic import leaves
    # submit-manifest: leaves the type domain's goal asks of the solver
    kinds = ["dispatch", "submit", "accept", "record-disposition", "save-work", "env:edit",
             "submit-manifest"]

    def terms(prover: Prover) -> list:
        """Every guard, condition, post-state leaf and goal (the objects: an id compares
        only while its term is alive)."""
        with symbolic():
            return ([b.guard for b in prover.branches]
                    + [basecase._changes(b) for b in prover.branches]
                    + [x for b in prover.branches for x in leaves(prover.space, b.post)]
                    + [d for _, _, ds in _goals(prover, kinds) for d in ds])

    lean = Prover(Instance.proof(tasks=2), transitions=kinds)
    got = terms(lean)
    assert sum(b.pre is not None for b in lean.branches) > 50        # journal puts among them
    assert sum(len(lean.reads[p.id][m] & lean.changed[id(b)]) < len(lean.substitution[id(b)])
               for b in lean.branches for p in lean.state_props[1:]
               for m in range(2) if lean.reads[p.id][m] & lean.changed[id(b)]) > 1000

    class Generic:
        """The backend with z3py's And and Or."""

        def __getattr__(self, name):
            return getattr(BACKEND, name)

        and_ = staticmethod(lambda xs: z3.And(xs))
        or_ = staticmethod(lambda xs: z3.Or(xs))

    monkeypatch.setattr(transition, "BACKEND", Generic())
    monkeypatch.setattr(basecase, "BACKEND", Generic())
    monkeypatch.setattr(sym_containers, "_entry_ite", logic.ite)
    monkeypatch.setattr(Prover, "substituted", lambda self, pid, m, b, hit: substitute(
        self.assumed[pid][m], list(self.substitution[id(b)].values())))
    generic = Prover(Instance.proof(tasks=2), transitions=kinds)

    class Forgetful(dict):
        """A memo that never answers: each leaf's domain constraint built anew."""

        def get(self, key, default=None):
            return default

    generic.in_type = Forgetful()
    assert _term_ids(terms(generic)) == _term_ids(got)
    assert generic.goal(DOMAIN, "submit-manifest")


def test_a_step_property_reading_no_journal_is_asked_of_the_joined_post_state_without_it(
        monkeypatch):
    """``touches`` asks a step property of the one branch's post-state joined without its
    journal first: every other leaf of that state is the joined post-state's, term for term,
    and its journal cannot be read; every step property gets the answer it gets with the
    whole joined post-state, and ``unchanged-outside-touches`` is answered without it."""
    from wgk.conformance.z3.prove import _Read
    from wgk.conformance.z3.symbolic import leaves, task_leaves
    kinds = ["dispatch", "submit", "accept", "save-work"]
    lean, one = _by_answer_and_whole(2, kinds)
    keyed = sorted({b.index: b.step for b in lean.branches if b.pre is not None}.items())
    assert len(keyed) > 20
    but_journal = lambda s: [x for t in s.tasks for x in task_leaves(lean.space, t)] + [
        s.target, s.now]
    with symbolic(), lean.sem.active():
        for n, _ in keyed:
            full, part = lean.joined(n), lean.joined(n, journal=False)
            assert _term_ids(leaves(lean.space, replace(part, journal=full.journal))) == \
                _term_ids(leaves(lean.space, full))
            # and the one branch's post-state, the reducer's own join
            post = next(b.post for b in one.branches if b.index == n)
            assert _term_ids(but_journal(part)) == _term_ids(but_journal(post))
            with pytest.raises(_Read):
                part.journal.entries
        unchanged = REGISTRY["unchanged-outside-touches"]
        lean.whole.clear()
        assert not any(lean.touches(unchanged, n, step) for n, step in keyed)
        assert not any(k[0] == "post" and k[2] for k in lean.whole if isinstance(k, tuple))
        got = [lean.touches(p, n, step) for p in lean.step_props for n, step in keyed]
    joined = Prover.joined

    def whole_only(self, index, journal=True):
        if not journal:
            raise _Read()
        return joined(self, index)

    monkeypatch.setattr(Prover, "joined", whole_only)
    whole = Prover(Instance.proof(tasks=2), transitions=kinds)
    with symbolic(), whole.sem.active():
        assert [whole.touches(p, n, step) for p in whole.step_props for n, step in keyed] == got
    assert any(k[0] == "post" and k[2] for k in whole.whole if isinstance(k, tuple))
