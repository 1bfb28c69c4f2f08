"""The model's prover set up once and shared by the proofs of the mutants that leave its
set-up alone, with the frames they share with it checked once.

A mutant of the model replaces some kinds' rules, patches functions of the model
(``patches``: module attributes or entries of a table) or brings a reducer of its own.
Its prover's set-up (the kinds asking who sent a request, the evidence universe, the
assumptions) and each of its frames (a transition kind's branches and one property's
goal on them) are functions of the code they run. The model's base runs them with
every patch target of the catalogue wrapped to note its calls (the wrappers call the
model's function: the terms are the model's), so it knows which targets each one
reached:

- a piece that reached none of the mutant's targets runs the same code under the
  mutant, so it is the model's: the same set-up (then shared, ``Prover.sharing``), the
  same branches, the same goal;
- a kind's branches run that kind's rule only (``rules[kind]``); the properties and the
  assumptions run the model's table (``decide_authenticated``), not the mutant's, so a
  replaced rule reaches the branches of its own kind and nothing else.

A frame the mutant shares with the model has the model's verdict; only ``proved`` is
taken from the base (any other verdict is asked of the mutant's own prover, whose
counterexample then runs through the mutant). A mutant with a reducer of its own, or a
target the base does not watch, is proved on a prover of its own, as before.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

from wgk.model.actions import Instance

from wgk.conformance.z3.mutation import Mutant, patched
from wgk.conformance.z3.prove import ProofResult, Prover, chain_deps
from wgk.conformance.z3.symbolic import symbolic_graph
from wgk.conformance.z3 import transition
from wgk.conformance.z3.transition import Semantics, _cached, universe_of


def target(obj: Any, name: str) -> tuple[int, str]:
    """A patch target's identity: the object patched (a module, a table) and the name."""
    return id(obj), name


class ModelBase:
    """The model's prover on ``inst`` (set up with ``targets`` watched: ``(obj, name)``) and
    what each piece of it reached of them."""

    def __init__(self, inst: Instance, targets: list[tuple[Any, str]]):
        self.wrapped, seen = [], set()
        for obj, name in targets:
            fn = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
            if target(obj, name) not in seen and callable(fn):
                seen.add(target(obj, name))
                self.wrapped.append((obj, name, self._noting(target(obj, name), fn)))
        self.watched = frozenset(target(o, n) for o, n, _ in self.wrapped)
        self.calls: set | None = None
        sem = Semantics()
        graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
        ids = inst.ids()
        #: per kind, the targets its rule reached asked who sent it, and logging its evidence
        self.by_kind: dict = {}
        who = transition._actor_sensitive(graph, sem, around=self._kind)
        self.logs = transition._logs_by_kind(graph, ids, sem, around=self._kind)
        # the prover's set-up takes those (kept under ``sem``) and assumes the properties
        _cached(sem, "by-actor", lambda: who)
        _cached(sem, ("universe", ids), lambda: universe_of(self.logs, ids))
        with self.noting() as setup:
            self.prover = Prover(inst, sem, transitions=())
        self.setup = frozenset(setup)
        self.built: dict[str, frozenset] = {}
        self.frames: dict[tuple[str, str], tuple[ProofResult, frozenset]] = {}

    @contextlib.contextmanager
    def _kind(self, kind) -> Iterator[None]:
        with self.noting() as calls:
            yield
        self.by_kind[kind] = self.by_kind.get(kind, frozenset()) | calls

    def _noting(self, key: tuple[int, str], fn: Any) -> Any:
        @functools.wraps(fn)
        def noted(*args, **kw):
            if self.calls is not None:
                self.calls.add(key)
            return fn(*args, **kw)
        return noted

    @contextlib.contextmanager
    def noting(self) -> Iterator[set]:
        """The watched targets wrapped for the while; yields the set their calls go to."""
        calls: set = set()
        self.calls = calls
        try:
            with patched(tuple(self.wrapped)):
                yield calls
        finally:
            self.calls = None

    def reached(self, transition: str) -> frozenset:
        """The targets the model's branches of ``transition`` reached (built if need be)."""
        if transition not in self.built:
            with self.noting() as calls:
                self.prover.build([transition])
            self.built[transition] = frozenset(calls)
        return self.built[transition]

    def frame(self, prop, transition: str) -> tuple[ProofResult, frozenset]:
        """The model's verdict of ``prop``'s frame at ``transition`` and the targets it
        reached (its branches' and its goal's)."""
        key = (prop.id, transition)
        if key not in self.frames:
            built = self.reached(transition)
            with self.noting() as calls:
                r = self.prover.check(prop, transition)
            self.frames[key] = (r, built | frozenset(calls))
        return self.frames[key]


_BASES: dict[tuple, ModelBase] = {}


def base_for(inst: Instance, targets: list[tuple[Any, str]]) -> ModelBase:
    """The base of ``inst`` watching ``targets`` (kept for the process)."""
    key = (inst, frozenset(target(o, n) for o, n in targets))
    if key not in _BASES:
        _BASES[key] = ModelBase(inst, targets)
    return _BASES[key]


#: the patch targets every base watches: the catalogue's (``watch``), in its order
WATCHED: list[tuple[Any, str]] = []


def watch(mutants) -> None:
    """Every base watches the patch targets of these mutants (the catalogue registers its own)."""
    WATCHED.extend((obj, name) for m in mutants for obj, name, _ in m.patches)


def first_failure(m: Mutant, inst: Instance, props: Callable[[str], bool], walk: Callable
                  ) -> ProofResult | None:
    """``walk(m, prover, properties, shared=...)`` (``kills._first_failure``) of the
    properties whose id ``props`` accepts, in the prover's order, on a prover of ``m``, with
    the set-up and the frames it shares with the model's base taken from it (the base
    watching the catalogue's targets and ``m``'s)."""
    sem = m.semantics()
    own = [target(o, n) for o, n, _ in m.patches]
    base = None if m.decide is not None else \
        base_for(inst, WATCHED + [(o, n) for o, n, _ in m.patches])
    if base is None or not set(own) <= base.watched or base.setup & set(own) or \
            not _same_set_up(base, m, sem):
        prover = Prover(inst, sem, transitions=())
        return walk(m, prover, [p for p in prover.properties if props(p.id)])
    prover = base.prover.sharing(sem)
    named = [p for p in prover.properties if props(p.id)]
    replaced = {k.label for k in m.changed_kinds}
    return walk(m, prover, named, shared=lambda p, t: _shared(base, own, replaced, p, t))


def _same_set_up(base: ModelBase, m: Mutant, sem: Semantics) -> bool:
    """The kinds asking who and the evidence universe of ``sem`` are the base's: the kinds
    whose set-up reached one of its targets under the model, or whose rule it replaces, run
    again under ``sem``; every other kind does what it did under the model."""
    own = {target(o, n) for o, n, _ in m.patches}
    again = frozenset(k for k, reached in base.by_kind.items() if reached & own) | \
        frozenset(m.rules)
    if not again:
        return True
    graph, ids = base.prover.space.graph, base.prover.inst.ids()
    who = (base.prover.by_actor - again) | transition._actor_sensitive(graph, sem, again)
    if who != base.prover.by_actor:
        return False
    _cached(sem, "by-actor", lambda: who)           # the probe's catalogue is the base's
    logs = {k: v for k, v in base.logs.items() if k not in again}
    logs.update(transition._logs_by_kind(graph, ids, sem, again))
    return universe_of(logs, ids) == base.prover.space.universe


def _shared(base: ModelBase, own: list, replaced: set[str], p, transition: str) -> bool:
    """Whether the mutant's frame of ``p`` at ``transition`` is the base's, and proved."""
    if transition in replaced or base.reached(transition) & set(own):
        return False
    r, reached = base.frame(p, transition)
    return r.status == "proved" and not reached & set(own)
