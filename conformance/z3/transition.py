"""The transition relation, obtained by running the model's own ``decide`` and
environment steps on a symbolic state.

``branches`` evaluates every template of a catalogue once on a symbolic state
and a pool of request variables: each ``Branch`` is one template's guard, its
decision and its post-state (the model's own ``State`` holding z3 terms).
Proofs take the disjunction of branches of one transition kind; bounded
model checking chains every branch with a selector variable per step.

``Semantics`` bundles what a mutant may replace: the rule table, ``decide``
and a context that installs alternative functions (always restored).
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ContextManager, Iterator

import z3

from wgk.model import kernel
from wgk.model.env import EnvStep, guard_and_update
from wgk.model.kernel import Decision
from wgk.model.logic import all_of, not_
from wgk.model.vocab import Kind
from wgk.model.rules import RULES
from wgk.model.state import Graph, State

from wgk.conformance.z3.symbolic import (
    BACKEND, Space, SymEvidence, as_bool, fresh_state, identical, leaves, symbolic, tail_leaves,
    task_leaves,
)
from wgk.conformance.z3.catalogue import POOL, Catalogue, Pool, request_templates


@dataclass(frozen=True)
class Semantics:
    """The model a check runs: rule table, reducer and a context for patched functions."""

    name: str = "model"
    rules: Any = field(default_factory=lambda: RULES)
    decide: Callable[..., tuple[Decision, State]] | None = None
    context: Callable[[], ContextManager] | None = None

    @contextmanager
    def active(self) -> Iterator[None]:
        """Install this semantics' patched functions (if any) for the duration."""
        with (self.context() if self.context is not None else nullcontext()):
            yield

    def run(self, s: State, step: Any) -> tuple[Decision | None, State | None]:
        """Apply one concrete or symbolic step; an env step that is not enabled gives (None, None)."""
        if isinstance(step, EnvStep):
            ok, update = guard_and_update(s, step)
            return None, (update() if ok is True else None)
        decide = self.decide or kernel.decide
        return decide(s, step, self.rules)


MODEL = Semantics()


@dataclass
class Branch:
    """One template evaluated on a symbolic state."""

    index: int
    template: Any
    step: Any
    guard: Any                 # z3 Bool: the template's constraints and, for env steps, its guard
    decision: Decision | None
    post: State
    #: the pre-state the branch was decided on when it is not the symbolic state itself: the
    #: same state with its journal answering the request's own lookup as this case assumes
    #: (``branches(by_answer=True)``; the case's condition is in ``guard``)
    pre: State | None = None

    @property
    def label(self) -> str:
        return self.template.label

    @property
    def transition(self) -> str:
        """The transition kind this branch belongs to (request kind or env step kind)."""
        return transition_of(self.template)


def transition_of(template: Any) -> str:
    """The transition kind of a template: its request kind, or ``env:`` and its step kind."""
    return f"env:{template.kind.label}" if template.is_env else template.kind.label


def branches(cat: Catalogue, s: State, pool: Pool, sem: Semantics = MODEL,
             indices: list[int] | None = None,
             bound: Callable[[Any, Any, State], Any] | None = None,
             by_answer: bool = False) -> list[Branch]:
    """Every (or the listed) template of ``cat`` evaluated on symbolic state ``s``.

    ``by_answer``: a request with a key (under the model's own reducer) is one branch per
    answer the journal can give its key and digest (``answers``): used with the same bytes,
    used with others, unused; each decided on ``s`` with its journal giving that answer, and
    the answer's condition in its guard. The branches of a template are then exclusive and
    together the one branch it is otherwise: under each condition the journal does give that
    answer, and the reducer's decision and post-state are the ones it gives on ``s``, without
    the if-then-else over the answers every decision and leaf it changes otherwise carries."""
    out = []
    with symbolic(), sem.active():
        for n in (range(len(cat.templates)) if indices is None else indices):
            tpl = cat.templates[n]
            step = cat.step(n, pool)
            cases = answers(s, step) if by_answer and not tpl.is_env and sem.decide is None \
                else [(True, None)]
            constraints = list(tpl.constraints(pool))     # the same terms for every case
            for cond, pre in cases:
                guard = list(constraints)
                if tpl.is_env:
                    ok, update = guard_and_update(s, step)
                    decision, post = None, update()
                    guard.append(ok)
                else:
                    decision, post = (sem.decide or kernel.decide)(
                        s if pre is None else pre, step, sem.rules)
                if bound is not None:
                    guard.append(bound(tpl, step, s))
                guard = [as_bool(g) for g in guard + [cond] if g is not True]
                # ``z3.And``'s term, built without z3py's coercion of each operand
                out.append(Branch(n, tpl, step, BACKEND.and_(guard) if guard else z3.BoolVal(True),
                                  decision, post, pre))
    return out


def answers(s: State, step: Any) -> list[tuple[Any, State | None]]:
    """``(condition, pre-state)`` for each answer the journal of ``s`` can give the lookup of
    ``step``'s key and digest: the condition under which it gives it, and ``s`` with its
    journal giving it (``[(True, None)]``: a request without a key, or an answer already
    known)."""
    if step.key is None:
        return [(True, None)]
    key, digest = step.journal_key, step.digest
    used, same, kind, code = s.journal.lookup(key, digest)
    if isinstance(used, bool) or isinstance(same, bool):
        return [(True, None)]
    out = []
    for cond, answer in ((all_of(used, same), (True, True, kind, code)),
                         (all_of(used, not_(same)), (True, False, kind, code)),
                         (not_(used), (False, same, kind, code))):
        out.append((cond, replace(s, journal=s.journal.answering(key, digest, answer))))
    return out


def delta(space: Space, s: State, post: State) -> list[tuple[int, Any]]:
    """``(leaf position, new value)`` for every leaf ``post`` changes (by identity).

    A task ``post`` holds as the very object of ``s`` (the rules give back the task they do
    not change) has every leaf of it unchanged, and is not flattened."""
    out: list[tuple[int, Any]] = []
    at = 0
    for t, t2 in zip(s.tasks, post.tasks, strict=True):
        if t2 is t:
            at += space.task_width
            continue
        before = task_leaves(space, t)
        out += [(at + n, b) for n, (a, b) in enumerate(zip(before, task_leaves(space, t2)))
                if not identical(a, b)]
        at += len(before)
    if post.target is not s.target or post.now is not s.now or post.journal is not s.journal:
        out += [(at + n, b) for n, (a, b) in enumerate(zip(tail_leaves(s), tail_leaves(post)))
                if not identical(a, b)]
    return out


def as_term(x: Any) -> Any:
    """A leaf value as a z3 term (Python bools and ints become values)."""
    if isinstance(x, bool):
        return z3.BoolVal(x)
    if isinstance(x, int):
        return z3.IntVal(int(x))
    return x


_CACHE: dict[int, tuple[Semantics, dict]] = {}


def _cached(sem: Semantics, key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per semantics and key (a semantics is identified by identity)."""
    entry = _CACHE.get(id(sem))
    if entry is None or entry[0] is not sem:   # new, or an id reused after garbage collection
        entry = _CACHE[id(sem)] = (sem, {})
    if key not in entry[1]:
        entry[1][key] = compute()
    return entry[1][key]


def discover_universe(graph: Graph, evidence_ids: tuple[str, ...], sem: Semantics = MODEL
                      ) -> tuple:
    """The evidence pairs the rules can record: every record kind they use, times the ids.

    Found by running every kind once on a symbolic task whose evidence logs
    each pair the rules ask about or add."""
    return _cached(sem, ("universe", evidence_ids), lambda: _discover(graph, evidence_ids, sem))


def _probe(graph: Graph, evidence_ids: tuple[str, ...], by_actor: frozenset
           ) -> tuple[Catalogue, State, set]:
    """Every kind's templates on one task, and a symbolic state whose evidence logs its use."""
    cat = Catalogue(request_templates(list(Kind), graph.tasks[-1:], evidence_ids[:1],
                                      rejections=False, deadlines=False, by_actor=by_actor),
                    graph.graph_id)
    log: set = set()
    space = Space(graph=graph, universe=(), keys=("k",), width=len(POOL),
                  shapes=len(cat.shapes), decode_digest=cat.decode_digest)
    s = fresh_state(space, "probe")
    s = replace(s, tasks=tuple(replace(t, evidence=SymEvidence({}, log)) for t in s.tasks))
    return cat, s, log


def _discover(graph: Graph, evidence_ids: tuple[str, ...], sem: Semantics) -> tuple:
    # A request runs its own kind's rule alone (``rules[r.kind]``): when a semantics only
    # replaces some kinds' rules (and who is asked stays the same elsewhere), every other
    # kind asks about and adds the pairs it does in the model; only the replaced kinds run.
    changed, logs = changed_kinds(sem), {}
    if changed and actor_sensitive(graph, sem) - changed == actor_sensitive(graph, MODEL) - changed:
        logs = {k: log for k, log in _cached(MODEL, ("logs-by-kind", evidence_ids, repr(graph)),
                                             lambda: _logs_by_kind(graph, evidence_ids, MODEL)
                                             ).items() if k not in changed}
    logs.update(_logs_by_kind(graph, evidence_ids, sem, changed if logs else None))
    return universe_of(logs, evidence_ids)


def universe_of(logs: dict, evidence_ids: tuple[str, ...]) -> tuple:
    """The evidence universe from each kind's logged pairs: every record kind logged, times
    the ids."""
    log = set().union(*logs.values())
    kinds = sorted({k for k, _ in log})
    return tuple(sorted({(k, e) for k in kinds for e in evidence_ids} | log))


def changed_kinds(sem: Semantics) -> frozenset | None:
    """The kinds whose rule ``sem`` replaces, when replacing rules is all it does (None: it
    replaces the reducer or patches functions, which any kind may reach)."""
    if sem.decide is not None or sem.context is not None or set(sem.rules) != set(RULES):
        return None
    return frozenset(k for k in RULES if sem.rules[k] is not RULES[k])


def _logs_by_kind(graph: Graph, evidence_ids: tuple[str, ...], sem: Semantics,
                  kinds: frozenset | None = None,
                  around: Callable[[Any], ContextManager] | None = None) -> dict:
    """Per kind (``kinds``: of those only), the evidence pairs its templates on the probe
    task ask about or add (``around(kind)``: a context each template of the kind runs in)."""
    cat, s, log = _probe(graph, evidence_ids, actor_sensitive(graph, sem))
    pool, out = Pool("probe.r", 1), {}
    for n, tpl in enumerate(cat.templates):
        if kinds is None or tpl.kind in kinds:
            log.clear()
            with around(tpl.kind) if around is not None else nullcontext():
                branches(cat, s, pool, sem, indices=[n])
            out.setdefault(tpl.kind, set()).update(log)
    return out


class _AskedWho(Exception):
    pass


class _Anyone:
    """An actor that cannot be compared: shows whether a rule asks who sent a request."""

    def __eq__(self, other: object) -> bool:
        raise _AskedWho

    __ne__ = __eq__

    def __hash__(self) -> int:
        return 0


def actor_sensitive(graph: Graph, sem: Semantics = MODEL) -> frozenset:
    """The kinds whose rule asks which (authorized) actor sent the request.

    For every other kind the authorized actors behave alike and share a template. A
    semantics that only replaces some kinds' rules asks of the others what the model does
    (a template runs its own kind's rule alone): only the replaced kinds run."""
    changed = changed_kinds(sem)
    if changed:
        return _cached(sem, "by-actor", lambda: frozenset(
            (actor_sensitive(graph, MODEL) - changed) | _actor_sensitive(graph, sem, changed)))
    return _cached(sem, "by-actor", lambda: _actor_sensitive(graph, sem))


def _actor_sensitive(graph: Graph, sem: Semantics, kinds: frozenset | None = None,
                     around: Callable[[Any], ContextManager] | None = None) -> frozenset:
    cat, s, _ = _probe(graph, ("e1",), frozenset())
    pool = Pool("probe.who", 1)
    i = len(graph.tasks) - 1
    found = set()
    with symbolic(), sem.active():
        for n, tpl in enumerate(cat.templates):
            if kinds is not None and tpl.kind not in kinds:
                continue
            r = cat.step(n, pool)
            object.__setattr__(r, "actor", _Anyone())
            try:
                with around(tpl.kind) if around is not None else nullcontext():
                    sem.rules[tpl.kind](s, i, s.tasks[i], r).update()
            except _AskedWho:
                found.add(tpl.kind)
    return frozenset(found)
