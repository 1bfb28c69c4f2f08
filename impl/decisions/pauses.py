"""The operator's pause: the writes that hold a task's admission and lift it.

``pause`` stops new attempts on a task not yet finished (one already running keeps going);
``unpause`` ends that and stores the request's ``deadline`` as the earliest time of the
next attempt (0 for none). While a task is paused, or before that time, ``dispatch``
and ``retry`` are refused (``paused``, ``not-due``; docs/vocabulary.md, "The operator's
pause"). Each kind is a ``Rule``: the conditions of its write in the contract's order
("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .decision import Condition as C, Ctx, Outcome, Rule, succeeded
from ..storage.records import evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY


def not_done(ctx: Ctx) -> bool:
    return not ctx.record.graph_saved


def not_abandoned(ctx: Ctx) -> bool:
    return not ctx.record.abandoned


def _paused(ctx: Ctx) -> Outcome:
    t = ctx.record
    return succeeded(ctx, replace(t, paused=True), kind=EVIDENCE_ONLY if t.paused else APPLIED)


def _unpaused(ctx: Ctx) -> Outcome:
    t, when = ctx.record, ctx.request.deadline
    same = not t.paused and t.not_before == when
    return succeeded(ctx, replace(t, paused=False, not_before=when),
                     kind=EVIDENCE_ONLY if same else APPLIED)


RULES: dict[str, Rule] = {
    "pause": Rule((C(not_done, "terminal-already"), C(not_abandoned, "terminal-already")), _paused),
    "unpause": Rule((C(not_done, "terminal-already"), C(not_abandoned, "terminal-already")),
                    _unpaused),
}
