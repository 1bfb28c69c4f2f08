"""Which invariants a trace exercises: those whose antecedent holds in one of its states.

An invariant written ``implies(A, B)`` says nothing about a run in which ``A`` never
holds; one written ``iff(A, B)`` says something once either side holds. A trace
supports an invariant only if, replayed through the model, it reaches a state (for a
step property: a step) in which the invariant's own antecedent holds — whatever the
incident numbers it is tagged with. The antecedents are observed by evaluating each
predicate with recording versions of ``implies`` and ``iff`` installed in the
predicate's own module (only its own, top-level implications count); a
predicate with neither names its antecedent in ``ANTECEDENTS``.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from wgk.model.invariants import Property, pairs
from wgk.model.logic import iff as _IFF, implies as _IMPLIES
from wgk.model.predicates import receipt_of
from wgk.model.vocab import Receipt

from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.traces.format import Trace


def _any_receipt(s, i, t) -> bool:
    return any(receipt_of(t, k).fence != 0 for k in Receipt)


def _role_missing(s, r, d, s2) -> bool:
    from wgk.model.kernel import authenticated, role_held
    return not (authenticated(s, r) and role_held(s, r))


def _valve_request(s, r, d, s2) -> bool:
    from wgk.model.vocab import REVIEW_KINDS
    return r.kind in REVIEW_KINDS


def _changed_a_task(s, r, d, s2) -> bool:
    return s2 is not s and bool(pairs(s, s2))


#: The antecedent of a predicate that is neither an implication nor an equivalence:
#: the situation in which it can fail at all.
ANTECEDENTS: dict[str, Callable[..., bool]] = {
    "receipts-fenced": _any_receipt,
    "promotion-at-most-once": lambda s, i, t: t.promotions >= 1,
    "one-chat-request-per-opening-key": lambda s, i, t: t.chat_requests >= 1,
    "compaction-occurrences-counted-once": lambda s, i, t: (
        t.compactions + t.continuations + t.acks + t.provider_failures) > 0,
    "review-publication-at-most-once": lambda s, i, t: t.publications >= 1,
    "review-no-event-replaces-source": _valve_request,  # a request of the review valve
    "role-held": _role_missing,                       # a request without the role it claims
    "unchanged-outside-touches": _changed_a_task,     # a request that changed a task
}


class _Recorder:
    def __init__(self) -> None:
        self.hit = False
        self.seen = False          # an implication or equivalence was evaluated at all

    def implies(self, a: Any, b: Any) -> Any:
        self.seen = True
        self.hit = self.hit or a is True
        return _IMPLIES(a, b)

    def iff(self, a: Any, b: Any) -> Any:
        self.seen = True
        self.hit = self.hit or a is True or b is True
        return _IFF(a, b)


@contextmanager
def _recording(rec: _Recorder, p: Property) -> Iterator[None]:
    """``implies`` and ``iff`` of the module that defines ``p``'s predicate, recording."""
    names = p.pred.__globals__
    saved = {n: names[n] for n in ("implies", "iff") if n in names}
    names.update({n: getattr(rec, n) for n in saved})
    try:
        yield
    finally:
        names.update(saved)


def antecedent_holds(p: Property, args: tuple) -> bool | None:
    """Whether ``p``'s antecedent holds for ``args`` (a state: ``(s,)``; a step:
    ``(s, r, d, s2)``); None when it has no antecedent this module can see."""
    if p.scope == "state":
        (s,) = args
        named = ANTECEDENTS.get(p.id)
        if named is not None:
            return any(named(s, i, t) for i, t in enumerate(s.tasks))
        rec = _Recorder()
        with _recording(rec, p):
            for i, t in enumerate(s.tasks):
                p.pred(s, i, t)
        return rec.hit if rec.seen else None
    named = ANTECEDENTS.get(p.id)
    if named is not None:
        return named(*args)
    rec = _Recorder()
    with _recording(rec, p):
        p.pred(*args)
    return rec.hit if rec.seen else None


def supported(trace: Trace, properties: list[Property]) -> set[str]:
    """The ids of ``properties`` whose antecedent holds in one of the trace's states
    (state properties, the initial state included) or steps (step properties)."""
    system = ModelSystem(trace)
    out: set[str] = set()
    state_props = [p for p in properties if p.scope == "state"]
    step_props = [p for p in properties if p.scope == "step"]

    def look(step: tuple | None) -> None:
        for p in state_props:
            if p.id not in out and antecedent_holds(p, (system.state,)):
                out.add(p.id)
        for p in step_props if step is not None else ():
            if p.id not in out and antecedent_holds(p, step):
                out.add(p.id)
    look(None)
    for step in trace.steps:
        try:
            system.apply(step)
        except StepError:
            break                     # the rest of the trace is not a run of the model
        look(system.last)
    return out


def passed_cuts(checks) -> dict[str, int]:
    """Passed in-process crash cuts per trace id, from the gate's crash-cuts checks."""
    out: dict[str, int] = {}
    for c in checks:
        if c.group and c.name.endswith("(in-process)"):
            out[c.group] = out.get(c.group, 0) + (c.verdict == "pass")
    return out


__all__ = ["ANTECEDENTS", "antecedent_holds", "passed_cuts", "supported"]
