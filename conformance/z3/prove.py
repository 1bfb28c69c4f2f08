"""Inductive proofs of every ``always`` invariant over the model's own transitions.

Environment assumptions (kind ``assume``) are assumed in the pre-state with the
invariants; their frames show that the model's own steps (its kernel and its
environment) keep them, so the assumption is consistent with the model. They
are reported as assumption frames, not as kernel invariants.

For each transition kind (a request kind, or an environment step kind) and
each property, one solver frame checks

    Domain(s) ∧ Inv(s) ∧ Lemmas(s) ∧ T_kind(s, s') ∧ ¬P(s')         (state properties)
    Domain(s) ∧ Inv(s) ∧ Lemmas(s) ∧ T_kind(s, s') ∧ ¬P(s, r, d, s')  (step properties)

where ``T_kind`` is the disjunction of that kind's templates on every task,
obtained by running ``decide`` (or the environment step) on the symbolic
pre-state. The state properties (invariants, lemmas, the type domain) are
assumed together in the pre-state and each is shown preserved, so their
conjunction is inductive. UNSAT proves the frame; SAT is a counterexample to
induction, decoded into a concrete pre-state and request and run back through
the executable model, which must agree on the decision, the post-state and
the verdicts (``SymbolicMismatch`` otherwise).

Per-task state properties are checked only for the tasks whose leaves the
step changes among those the property reads (its free constants): an
unaffected task keeps its verdict from the pre-state.
"""
from __future__ import annotations

import time
from dataclasses import replace
from multiprocessing import get_all_start_methods, get_context
from typing import Any, Callable, Collection

import z3

from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY, Property
from wgk.model.logic import ite
from wgk.model.state import State
from wgk.model.vocab import INTRUDER, Kind

from wgk.conformance.check.explore import rare_collections
from wgk.conformance.z3.basecase import enabledness, init_frames
from wgk.conformance.z3.crosscheck import (  # noqa: F401  (re-exported: callers import them from here)
    SymbolicMismatch, compare_step, crosscheck, decode_decision,
)
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.proof_report import (  # noqa: F401  (re-exported)
    Counterexample, ProofReport, ProofResult,
)
from wgk.conformance.z3.symbolic import (
    BACKEND, Space, decode_graph, decode_state, domain, fresh_state, free_constants, leaf_domain,
    leaf_types, leaves, symbolic, symbolic_graph, value, substitute, within_type,
)
from wgk.conformance.z3.catalogue import (
    POOL, Catalogue, Pool, env_templates, intruder_templates, request_templates,
)
from wgk.conformance.z3.templates import journal_keys
from wgk.conformance.z3.transition import (
    MODEL, Branch, Semantics, actor_sensitive, as_term, branches, delta, discover_universe,
    transition_of,
)

DOMAIN = Property("domain", "always", "state",
                  "Every field stays in its type: enums in range, ids and counters natural.",
                  lambda s, i, t: True)


class VacuousProof(AssertionError):
    """The assumptions of the inductive step are contradictory: nothing would be proved."""


def chain_deps(n: int) -> tuple[tuple[int, ...], ...]:
    return tuple(() if i == 0 else (i - 1,) for i in range(n))


class Prover:
    """The symbolic pre-state, the branches on it, and one solver holding the assumptions.

    ``transitions`` (None: all) are the transition kinds whose branches are built up front;
    ``build`` adds others later. The catalogue, the state space and the assumptions are
    always those of the whole prover, so a frame checked on a prover built in part is the
    same frame as on the whole prover."""

    #: a request with a key is a branch per answer of the journal (``build``); False: one
    #: branch, the if-then-else over the answers on every leaf it changes (the same frames)
    by_answer = True

    def __init__(self, inst: Instance = Instance.proof(), sem: Semantics = MODEL,
                 lemmas: dict[str, Property] | None = None, timeout_ms: int = 60_000,
                 deps: tuple[tuple[int, ...], ...] | None = None,
                 initial: State | None = None, transitions: Collection[str] | None = None,
                 params: dict[str, Any] | None = None):
        t0 = time.perf_counter()
        self.inst = inst
        self.initial = initial        # None: every task open (a test hook may give another)
        self.sem = sem
        self.lemmas = dict(LEMMAS if lemmas is None else lemmas)
        names = inst.task_names()
        graph = symbolic_graph(names, chain_deps(inst.tasks) if deps is None else deps)
        self.by_actor = actor_sensitive(graph, sem)
        self.cat = Catalogue(request_templates(list(Kind), names, inst.ids(),
                                               by_actor=self.by_actor)
                             + intruder_templates(list(Kind), names, inst.ids(),
                                                 graph.principals.get(INTRUDER, ()), self.by_actor)
                             + env_templates(names), graph.graph_id)
        #: every transition kind of the catalogue, in the order of its templates
        self.transitions = list(dict.fromkeys(transition_of(t) for t in self.cat.templates))
        universe = discover_universe(graph, inst.ids(), sem)
        self.space = Space(graph, universe, journal_keys(inst.key_names(), self.cat.templates),
                           len(POOL), len(self.cat.shapes), self.cat.decode_digest)
        self.s = fresh_state(self.space, "pre")
        self.pool = Pool("r", inst.keys)
        self.pre = leaves(self.space, self.s)
        self.types = leaf_types(self.space)
        #: the name of every pre-state leaf, in ``leaves`` order (z3's ``decl().name()`` is slow)
        self.pre_names = [x.decl().name() for x in self.pre]
        self.var_types = dict(zip(self.pre_names, self.types))
        self.var_types.update({v.decl().name(): int for v in self.pool.vars.values()})
        self.var_types[self.pool.shape.decl().name()] = ("shape", len(self.cat.shapes))
        self.type_memo: dict = {}
        #: per (type, leaf object) its domain constraint on a post-state (``_violations``)
        self.in_type: dict = {}
        self.branches: list[Branch] = []
        self.groups: dict[str, list[Branch]] = {}     # by transition kind, in build order
        #: the templates whose branches are built (by their index in the catalogue)
        self.built: set[int] = set()
        #: templates built as one branch, not split by the journal's answers (``touches``),
        #: and their post-states joined from their cases' (``joined``)
        self.whole: dict = {}
        #: per branch (by ``id``: the prover keeps its branches), the leaves it changes, and
        #: by each one's name the pair (pre-state leaf, new value) substituted in a property
        self.delta: dict[int, list] = {}
        self.changed: dict[int, set[str]] = {}
        self.substitution: dict[int, dict] = {}
        #: the terms built by the rules and properties on this prover's states (the backend's
        #: memo while they run: ``Z3Backend.memo_of``)
        self.memo: dict = {}
        #: the at-most-one constraints of the assumptions as their overlapping pairs
        #: (``Z3Backend.pairwise_of``)
        self.pairs: dict = {}
        self.build(self.transitions if transitions is None else transitions)
        # environment assumptions are assumed like the invariants; their frames check only
        # that the model's own steps keep them (reported as assumption frames)
        self.state_props = [DOMAIN] + list(self.lemmas.values()) + [
            p for p in REGISTRY.values() if p.kind in ("always", "assume") and p.scope == "state"]
        self.step_props = [p for p in REGISTRY.values() if p.kind == "always" and p.scope == "step"]
        # The plain incremental core (no tactic preprocessing) is the fastest on these frames.
        self.solver = z3.SimpleSolver()
        # ``bare`` holds the type domain alone: a frame it refutes is refuted with every
        # assumption too (fewer assumptions, the same goal), and most frames need none of the
        # invariants, which make every query search over every task
        self.bare = z3.SimpleSolver()
        for solver in (self.solver, self.bare):
            solver.set("timeout", timeout_ms)
            for name, v in (params or {}).items():
                solver.set(name, v)
        #: the properties with a frame the bare solver did not refute: asked of ``solver`` alone
        self.needs_assumptions: set[str] = set()
        # an at-most-one among the assumptions (the ways forward of a task: 13 of their 325
        # pairs can hold together) as those pairs excluded, not a cardinality constraint the
        # solver searches through in every frame (the goals substitute the same terms)
        with symbolic(), sem.active(), BACKEND.memo_of(self.memo), \
                BACKEND.pairwise_of(self.pairs):
            self.solver.add(*domain(self.space, self.s), *self.pool.domain())
            self.bare.add(*self.solver.assertions())
            self.assumed: dict[str, list] = {}
            self.reads: dict[str, list[set[str]]] = {}
            for p in self.state_props[1:]:
                terms = [p.holds_for(self.s, i) for i in range(inst.tasks)]
                if any(x is False for x in terms):
                    raise VacuousProof(f"{p.id} is false in every state")
                self.assumed[p.id] = terms
                self.reads[p.id] = [free_constants(x) for x in terms]
                self.solver.add(*[x for x in terms if x is not True])
        if self.solver.check() != z3.sat:     # contradictory assumptions would prove anything
            raise VacuousProof("the invariants and lemmas together admit no state")
        self.build_seconds = time.perf_counter() - t0

    def sharing(self, sem: Semantics) -> "Prover":
        """A prover of ``sem`` on this one's set-up: its catalogue, state space, assumptions
        and solvers (each frame is asked inside a push and pop of its own, so they are left
        as they were), with no branch built. For a semantics whose set-up is this one's: the
        same kinds asking who sent a request, the same evidence universe, the same
        assumptions (the caller knows: ``kills.ModelBase``)."""
        p = object.__new__(Prover)
        p.__dict__.update(self.__dict__)
        p.sem = sem
        p.type_memo, p.branches, p.groups, p.built, p.whole = {}, [], {}, set(), {}
        p.in_type = {}
        p.delta, p.changed, p.substitution = {}, {}, {}
        p.needs_assumptions, p.memo = set(), {}
        return p

    def build(self, transitions: Collection[str]) -> None:
        """Evaluate the branches of these transition kinds (those not built yet): a request
        with a key one branch per answer of the journal (``branches(by_answer=True)``), so
        no goal carries the if-then-else over the answers on every leaf the step changes."""
        wanted = set(transitions)
        todo = [n for n, tpl in enumerate(self.cat.templates)
                if n not in self.built and transition_of(tpl) in wanted]
        self.built.update(todo)
        with BACKEND.memo_of(self.memo):
            built = branches(self.cat, self.s, self.pool, self.sem, indices=todo,
                             by_answer=self.by_answer)
        for b in built:
            self.branches.append(b)
            self.groups.setdefault(b.transition, []).append(b)
            d = delta(self.space, self.s, b.post)
            self.delta[id(b)] = d
            self.changed[id(b)] = {self.pre_names[n] for n, _ in d}
            self.substitution[id(b)] = {self.pre_names[n]: (self.pre[n], as_term(v))
                                        for n, v in d}

    @property
    def properties(self) -> list[Property]:
        return self.state_props + self.step_props

    # -- goals -------------------------------------------------------------------

    def _violations(self, p: Property, b: Branch) -> list[tuple[Any, list[int]]]:
        """(term that is true when ``b`` breaks ``p``, tasks concerned).

        A per-task state property on the post-state is its pre-state term with the
        changed leaves substituted: the same function of the same fields."""
        if p.id == "domain":
            new = []
            for n, v in self.delta[id(b)]:
                tp = self.types[n]
                if tp is bool:                    # a Bool is in its type
                    continue
                # a leaf's domain constraint when it is not syntactically in its type (True
                # when there is none), kept by the leaf's object: branches share their leaves
                hit = self.in_type.get((tp, id(v)))
                if hit is None:
                    c = True if within_type(tp, v, self.var_types, self.type_memo) \
                        else leaf_domain(tp, v)
                    hit = self.in_type[(tp, id(v))] = (c, v)
                if hit[0] is not True:
                    new.append(hit[0])
            return [(BACKEND.not_(BACKEND.and_(new)), [])] if new else []
        if p.scope == "step":
            if b.decision is None:        # step properties judge decided requests only
                return []
            if b.pre is None:
                ok = p.holds(self.s, b.step, b.decision, b.post)
                return [] if ok is True else [(BACKEND.not_(ok) if ok is not False else z3.BoolVal(True), [])]
            b.pre.journal.asked = False
            ok = p.holds(b.pre, b.step, b.decision, b.post)
            if ok is True:
                # it holds in this case; one that asks the journal's answer is one the step
                # can affect (``touches``)
                return [(BACKEND.term(False), [])] if b.pre.journal.asked else []
            return [(BACKEND.not_(ok) if ok is not False else z3.BoolVal(True), [])]
        out = []
        moved = self.changed[id(b)]
        for m in range(self.inst.tasks):
            reads = self.reads[p.id][m]
            if not reads.isdisjoint(moved):
                out.append((BACKEND.not_(self.substituted(p.id, m, b, reads & moved)), [m]))
        return out

    def substituted(self, pid: str, m: int, b: Branch, hit: set[str]) -> Any:
        """The assumed term of state property ``pid`` at task ``m`` on branch ``b``'s
        post-state: its changed leaves ``hit`` (those the term reads) substituted, which is
        the term with every leaf ``b`` changes substituted."""
        pairs = self.substitution[id(b)]
        return substitute(self.assumed[pid][m], [pairs[x] for x in hit])

    def goal(self, p: Property, transition: str) -> list[tuple[Branch, Any, list[int]]]:
        out = []
        with symbolic(), self.sem.active(), BACKEND.memo_of(self.memo):
            holds: dict[int, Branch] = {}     # templates of which every case holds as such
            for b in self.groups[transition]:
                bads = self._violations(p, b)
                if b.pre is not None and p.scope == "step":
                    holds[b.index] = b if not bads and holds.get(b.index, b) else None
                for bad, tasks in bads:
                    out.append((b, BACKEND.and_([b.guard, bad]), tasks))
            # a step property that holds in every case of every template, without asking the
            # journal's answer, is one the step can still affect (the frame is asked, and
            # ``solved``, as it is without the cases) when it does not hold as such on some
            # template's one branch
            if not out:
                b = next((b for b in holds.values()
                          if b is not None and self.touches(p, b.index, b.step)), None)
                if b is not None:
                    out.append((b, BACKEND.and_([b.guard, BACKEND.term(False)]), []))
        return out

    def joined(self, index: int, journal: bool = True) -> State:
        """The post-state of template ``index``'s one branch joined from its cases' (an
        if-then-else over the journal's answer, as the reducer joins them): the same terms,
        without deciding the request again. Kept in ``whole``. ``journal`` False: every field
        but the journal, which is ``_UNREAD`` (joining the journals, entry by entry, is most
        of the cost, and most properties never read the post-state's)."""
        post = self.whole.get(("post", index, journal))
        if post is None:
            cases = [b for b in self.groups[transition_of(self.cat.templates[index])]
                     if b.index == index]
            step = cases[0].step
            used, same, _, _ = self.s.journal.lookup(step.journal_key, step.digest)
            both, other, unused = (b.post if journal else replace(b.post, journal=_UNREAD)
                                   for b in cases)
            post = self.whole[("post", index, journal)] = ite(used, ite(same, both, other),
                                                              unused)
        return post

    def touches(self, p: Property, index: int, step: Any = None) -> bool:
        """The step property ``p`` is not true as such on template ``index``'s one branch
        (not split by the journal's answers). Asked first of the request alone, its decision
        and post-state left unread: a property true without reading them is true of the one
        branch too, which is then not built; otherwise it is built once (kept in ``whole``).
        ``step``: the template's request its cases were decided for (None: made afresh)."""
        step = self.cat.step(index, self.pool) if step is None else step
        try:
            return p.holds(self.s, step, _UNREAD, _UNREAD) is not True
        except Exception:       # it read them (``_Read``), or did with them what it cannot
            pass
        for journal in (False, True):     # the post-state's journal left unread first
            try:
                return p.holds(self.s, step, _UNREAD, self.joined(index, journal)) is not True
            except Exception:
                pass
        b = self.whole.get(index)
        if b is None:
            b = self.whole[index] = branches(self.cat, self.s, self.pool, self.sem,
                                             indices=[index])[0]
        return p.holds(self.s, b.step, b.decision, b.post) is not True

    # -- checking -----------------------------------------------------------------

    def check(self, p: Property, transition: str, replay: bool = True) -> ProofResult:
        t0 = time.perf_counter()
        disjuncts = self.goal(p, transition)
        if not disjuncts:
            return ProofResult(p.id, transition, "proved", time.perf_counter() - t0, solved=False)
        goal = BACKEND.or_([d for _, d, _ in disjuncts])
        if p.id not in self.needs_assumptions:
            if _ask(self.bare, goal, model=False)[0] == z3.unsat:
                return ProofResult(p.id, transition, "proved", time.perf_counter() - t0)
            self.needs_assumptions.add(p.id)
        verdict, model = _ask(self.solver, goal)
        seconds = time.perf_counter() - t0
        if verdict == z3.unsat:
            return ProofResult(p.id, transition, "proved", seconds)
        if verdict == z3.unknown:
            return ProofResult(p.id, transition, "unknown", seconds)
        cex = self.counterexample(model, p, transition, disjuncts, replay)
        return ProofResult(p.id, transition, "counterexample", seconds, counterexample=cex)

    def counterexample(self, model: z3.ModelRef, p: Property, transition: str,
                       disjuncts: list, replay: bool = True) -> Counterexample:
        hits = [(b, tasks) for b, d, tasks in disjuncts if value(model, d)]
        if not hits:
            raise SymbolicMismatch(f"{p.id} after {transition}: the model satisfies no disjunct")
        b = hits[0][0]
        tasks = sorted({self.space.graph.tasks[m] for hb, ts in hits if hb is b for m in ts})
        graph = decode_graph(model, self.space.graph)
        pre = decode_state(model, self.space, self.s, graph)
        step = self.cat.concrete_step(b.index, model, self.pool, self.space.keys)
        decision = decode_decision(model, b.decision)
        if p.id == "domain":
            return Counterexample(p.id, transition, b.label, pre, step, decision, pre, [])
        post = decode_state(model, self.space, b.post, graph)
        cex = Counterexample(p.id, transition, b.label, pre, step, decision, post, tasks)
        if replay:
            self.replay(cex, p)
        return cex

    def replay(self, cex: Counterexample, p: Property) -> None:
        """Run the decoded pre-state and step through the executable model; raise on disagreement."""
        where = f"{p.id} after {cex.step_label}"
        with self.sem.active():
            for q in self.state_props[1:]:
                if q.holds(cex.pre) is not True:
                    raise SymbolicMismatch(f"{where}: the decoded pre-state breaks assumed {q.id}")
            d, post = self.sem.run(cex.pre, cex.step)
            if post is None:
                raise SymbolicMismatch(f"{where}: the environment step is not enabled concretely")
            compare_step(where, cex.decision, cex.post, d, post)
            if p.scope == "state":
                broken = p.holds(post) is not True
            else:
                broken = p.holds(cex.pre, cex.step, d, post) is not True
        if not broken:
            raise SymbolicMismatch(f"{where}: the executable model says it holds")

    def frames(self, transition: str, only: list[str] | None = None, replay: bool = True
               ) -> list[ProofResult]:
        """The frames of one transition kind built: every property (or those in ``only``)."""
        return [self.check(p, transition, replay) for p in self.properties
                if only is None or p.id in only]

    def run(self, only: list[str] | None = None, replay: bool = True,
            progress: Callable[[str], None] | None = None, base_case: bool = True
            ) -> ProofReport:
        """Every frame of the transitions built; ``base_case``: the init frames too (the
        enabledness of each transition built is always checked)."""
        t0 = time.perf_counter()
        results = []
        for transition in self.groups:
            results += self.frames(transition, only, replay)
            if progress:
                done = sum(r.status == "proved" for r in results)
                progress(f"{transition}: {done}/{len(results)} frames proved")
        init = init_frames(self, self.initial, only) if base_case else []
        enabled = enabledness(self)
        if progress:
            progress(f"base case: {sum(f.status == 'proved' for f in init)}/{len(init)} init frames, "
                     f"{sum(e.status == 'enabled' for e in enabled)}/{len(enabled)} transitions "
                     "enabled")
        return ProofReport(self.inst, self.sem.name, results, time.perf_counter() - t0
                           + self.build_seconds, self.build_seconds, list(self.lemmas),
                           init, enabled)


class _Read(Exception):
    """A property read what ``_UNREAD`` stands for."""


class _Unread:
    """A decision or post-state not built: reading anything of it raises ``_Read``."""

    def __getattribute__(self, name: str) -> Any:
        raise _Read(name)

    def _read(self, *args: Any) -> Any:
        raise _Read()

    __eq__ = __ne__ = __bool__ = __hash__ = __iter__ = __len__ = __getitem__ = _read  # type: ignore


_UNREAD = _Unread()


def _ask(solver: z3.Solver, goal: Any, model: bool = True) -> tuple[Any, z3.ModelRef | None]:
    """The verdict of ``goal`` under ``solver``'s assertions (and its model when SAT and
    ``model``: a model of every assertion is costly to complete, and only a counterexample
    needs one)."""
    solver.push()
    try:
        solver.add(goal)
        verdict = solver.check()
        return verdict, (solver.model() if verdict == z3.sat and model else None)
    finally:
        solver.pop()


#: z3 settings of ``prove``'s solver: no relevancy filter and the simplex arithmetic solver
#: (about half the solving time of the defaults on the 6-task frames, the same verdicts),
#: and no eager propagation of the equalities the arithmetic implies (the solver holding
#: every assumption about a tenth faster; the theories are still combined at its final check)
FAST = {"relevancy": 0, "arith.solver": 2, "arith.propagate_eqs": False}


def prove(inst: Instance = Instance.proof(), sem: Semantics = MODEL, only: list[str] | None = None,
          lemmas: dict[str, Property] | None = None, replay: bool = True,
          progress: Callable[[str], None] | None = None, jobs: int = 1,
          deps: tuple[tuple[int, ...], ...] | None = None) -> ProofReport:
    """Prove every ``always`` property (or those in ``only``) inductive.

    ``jobs`` > 1 shares the transition kinds among that many processes (this one and
    ``jobs - 1`` forked from it, before it builds anything): each takes the next kind not
    taken yet (the kinds in ``queue`` order, largest first) until none is left, building the
    branches of the kinds it took only, so a process that drew cheaper kinds takes more of
    them; the report is the one a single prover gives, frame for frame and in the same
    order.

    The cyclic collector runs rarely meanwhile (``rare_collections``): the prover keeps every
    term it builds to its end (the memo, the branches), so the young generation's collections
    free nothing and traverse the survivors again and again."""
    with rare_collections():
        return _prove(inst, sem, only, lemmas, replay, progress, jobs, deps)


def _prove(inst: Instance, sem: Semantics, only: list[str] | None,
           lemmas: dict[str, Property] | None, replay: bool,
           progress: Callable[[str], None] | None, jobs: int,
           deps: tuple[tuple[int, ...], ...] | None) -> ProofReport:
    if jobs <= 1 or "fork" not in get_all_start_methods():
        return Prover(inst, sem, lemmas, deps=deps, params=FAST).run(only, replay, progress)
    t0 = time.perf_counter()
    job = dict(inst=inst, sem=sem, lemmas=lemmas, deps=deps, only=only, replay=replay, jobs=jobs,
               taken=get_context("fork").Value("i", 0))     # the next kind of ``queue`` to take
    _JOB.clear()
    _JOB.update(job)
    try:
        with get_context("fork").Pool(jobs - 1) as pool:
            pending = pool.map_async(_share, range(1, jobs))
            own, first = _prover_share(0)
            parts = [first] + pending.get()
    finally:
        _JOB.clear()
    order = own.transitions
    by: dict[str, list[ProofResult]] = {}
    enabled = {}
    props = {p.id: p for p in own.properties}
    for part in parts:
        for r in part["results"]:
            if r.status == "counterexample" and r.counterexample is None:
                # decoded here: a counterexample holds the solver's model, which stays in
                # the process that found it; the same frame is asked of this process's solver
                own.build([r.transition])
                r = own.check(props[r.invariant], r.transition, replay)
            by.setdefault(r.transition, []).append(r)
        enabled.update({e.transition: e for e in part["enabled"]})
    results = [r for tr in order for r in by.get(tr, [])]
    if progress:
        for tr in order:
            if tr in by:
                progress(f"{tr}: {sum(r.status == 'proved' for r in by[tr])}/{len(by[tr])} "
                         "frames proved")
    build = max(part["build"] for part in parts)
    return ProofReport(inst, sem.name, results, time.perf_counter() - t0, build,
                       list(own.lemmas), first["init"],
                       [enabled[tr] for tr in order if tr in enabled])


#: what the processes of ``prove(jobs=N)`` share (set before forking, read by ``_share``)
_JOB: dict = {}


def queue(prover: Prover) -> list[str]:
    """The transition kinds in the order the processes of ``prove(jobs=N)`` take them: most
    templates first (the costliest to build and, mostly, to check), so the kinds taken last,
    while the other process finishes, are the smallest."""
    size: dict[str, int] = {}
    for tpl in prover.cat.templates:
        tr = transition_of(tpl)
        size[tr] = size.get(tr, 0) + 1
    return sorted(size, key=lambda t: (-size[t], prover.transitions.index(t)))


def _take(kinds: list[str]) -> str | None:
    """The next kind of ``kinds`` no process has taken (None: every kind is taken)."""
    taken = _JOB["taken"]
    with taken.get_lock():
        n = taken.value
        if n >= len(kinds):
            return None
        taken.value = n + 1
    return kinds[n]


def _share(k: int) -> dict:
    """Share ``k`` of ``prove(jobs=N)`` in a forked process: its frames' results, each
    counterexample left to the first process to decode (see ``prove``)."""
    part = _prover_share(k)[1]
    part["results"] = [replace(r, counterexample=None) for r in part["results"]]
    return part


def _prover_share(k: int) -> tuple[Prover, dict]:
    """Share ``k`` of ``prove(jobs=N)``: the frames and the enabledness of each kind it takes,
    and the base case in share 0."""
    a = _JOB
    t0 = time.perf_counter()
    p = Prover(a["inst"], a["sem"], a["lemmas"], deps=a["deps"], transitions=(), params=FAST)
    kinds = queue(p)
    build = time.perf_counter() - t0
    results, enabled = [], []
    # the base case first: the other processes take more kinds meanwhile
    init = init_frames(p, p.initial, a["only"]) if k == 0 else []
    while (tr := _take(kinds)) is not None:
        t1 = time.perf_counter()
        p.build([tr])
        build += time.perf_counter() - t1
        results += p.frames(tr, a["only"], a["replay"])
        enabled += enabledness(p, [tr])
    return p, {"results": results, "init": init, "enabled": enabled, "build": build}
