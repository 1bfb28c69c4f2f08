"""The rule of a completion receipted before its transaction: the owner's finish recorded
durably on its own (WG's runtime reducer receipts a worker's finish before the wrapper's
handoff opens the transaction); the transaction is opened by a later ``submit``.

A receipted completion is not Done and reserves nothing: the planner waits for the handoff
while the owner may be alive (``await-handoff``), and resumes the same session while its
proven-dead owner's window is open (``resume-continuation``). The first receipt of an
attempt stands: a second one is refused, and nothing but a new attempt clears it.

Declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from .logic import all_of
from .predicates import running
from .ruleset import guarded, rule
from .state import replace_task as replace
from .vocab import Code, Exit, Kind as K, Phase


@rule(K.RECEIPT_COMPLETION, touches={"completion_receipt"}, reads={"self"})
def receipt_completion(s, i, t, r):
    """The owner's completion is receipted on its own, bound to the exact worktree bytes, while
    no transaction is open; the first receipt stands, a second one is refused."""
    return guarded(
        [
            (running(t), Code.TERMINAL_ALREADY),
            (all_of(t.phase == Phase.ABSENT, t.exit == Exit.NONE), Code.ILLEGAL_PHASE_EDGE),
            (t.completion_receipt == 0, Code.TERMINAL_ALREADY),
            (t.worktree_present, Code.WORKTREE_MISSING),
            (t.worktree == r.candidate, Code.CANDIDATE_MISMATCH),
        ],
        lambda: s.put(i, replace(t, completion_receipt=r.candidate)),
    )
