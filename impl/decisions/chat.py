"""The running attempt's chat: the daemon's one creation request under the attempt's opening
key, then its reconciliation.

``request-chat`` records the creation request as an evidence row named by the attempt's
fence (its opening key); a second request under the same key is refused
(``chat-requested``), whatever became of the first one's answer. ``reconcile-chat`` records
that the chat the request created was looked up by that key (an evidence row of the same
name); nothing is created again. Each kind is a ``Rule``: the conditions of its write in the
contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .attempts import attempt_running
from .decision import Condition as C, Ctx, Outcome, Rule, evidence_fact, succeeded
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY


def opening_key(ctx: Ctx) -> str:
    """The attempt-opening key a chat creation request is made under: the attempt's fence."""
    return str(ctx.record.fence)


def not_requested_under_the_key(ctx: Ctx) -> bool:
    # guards: one-chat-request-per-opening-key
    return not ctx.seen("request-chat", opening_key(ctx))


def requested_under_the_key(ctx: Ctx) -> bool:
    return ctx.seen("request-chat", opening_key(ctx))


def _requested(ctx: Ctx) -> Outcome:
    return succeeded(ctx, ctx.record, facts=[evidence_fact("request-chat", opening_key(ctx))])


def _reconciled(ctx: Ctx) -> Outcome:
    key = opening_key(ctx)
    return succeeded(ctx, ctx.record, kind=EVIDENCE_ONLY if ctx.seen("reconcile-chat", key) else APPLIED,
                     facts=[evidence_fact("reconcile-chat", key)])


RULES: dict[str, Rule] = {
    "request-chat": Rule((C(attempt_running, "terminal-already"),
                          C(not_requested_under_the_key, "chat-requested")), _requested),
    "reconcile-chat": Rule((C(attempt_running, "terminal-already"),
                            C(requested_under_the_key, "chat-unrequested")), _reconciled),
}
