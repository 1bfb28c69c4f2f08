"""Mutants that break liveness and are killed by exploration (``wgk explore --mutant NAME``).

Each is an alternative rule table that wraps one of the model's rules and changes one
thing. Safety alone does not see them: nothing wrong ever happens, the wrong thing is
that something right never does.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace as dc_replace
from typing import Callable

from wgk.model.actions import Instance
from wgk.model.logic import ite
from wgk.model.rules import RULES, guarded
from wgk.model.vocab import Kind as K


@dataclass(frozen=True)
class LivenessMutant:
    name: str
    doc: str
    kills: str                 # the eventually-property whose check kills it
    instance: Instance
    rules: dict = field(default_factory=dict, hash=False)

    def rule_table(self) -> dict:
        return {**RULES, **self.rules}


def _never_acts(kind: K) -> Callable:
    """The model's rule for ``kind``, its guards kept and its update a no-op."""
    base = RULES[kind]

    def rule(s, i, t, r):
        g = base(s, i, t, r)
        return guarded(g.checks, lambda: s, g.kind)
    rule.__name__ = f"{kind.name.lower()}_never_acts"
    return rule


def _dispatch_without_budget(s, i, t, r):
    """Dispatch that reopens the same attempt number and counts no retry: neither the attempt
    count nor the retry budget ever runs out."""
    g = RULES[K.DISPATCH](s, i, t, r)

    def update():
        s2 = g.update()
        t2 = s2.tasks[i]
        return s2.put(i, dc_replace(t2, attempt=t.attempt, fence=ite(t.fence >= 1, t.fence, 1),
                                    lease_epoch=ite(t.lease_epoch >= 1, t.lease_epoch, 1),
                                    retries=t.retries))
    return guarded(g.checks, update, g.kind)


LIVENESS_MUTANTS: dict[str, LivenessMutant] = {m.name: m for m in (
    LivenessMutant(
        "convergence-never-acts",
        "Declare-lost is accepted but changes nothing: a proven-dead owner stays in progress "
        "while the daemon takes the due action forever.",
        "eventually-settles", Instance(tasks=1, groups=("core", "env", "clock")),
        {K.DECLARE_LOST: _never_acts(K.DECLARE_LOST)}),
    LivenessMutant(
        "retry-without-budget",
        "Dispatch reopens the same attempt number and counts no retry, so a dying owner is "
        "retried without limit: "
        "the task cycles through dispatch, death and declare-lost forever.",
        "eventually-settles", Instance(tasks=1, groups=("core", "env")),
        {K.DISPATCH: _dispatch_without_budget}),
)}
