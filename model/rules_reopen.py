"""Reopening a Done task into a new generation (the operator's ``reopen``).

Each rule is a guard-then-update function declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from .logic import not_
from .predicates import dependents_committed, graph_saved
from .ruleset import EDGE, EXIT, guarded, rule
from .state import NO_RECEIPTS, replace_task as replace
from .updates import retain_base, retain_work
from .vocab import AttemptState as AS, Code, Disposition, Exit, Failure, Kind as K, Phase, Reason

#: What a reopen changes: the generation, the fence, the closed attempt and its transaction,
#: the result (kept as retained work) and the per-generation counts.
REOPEN_TOUCHES = EDGE | EXIT | frozenset({
    "generation", "fence", "attempt", "attempt_state", "candidate", "base", "version",
    "disposition", "receipts", "effect_done", "promotions", "retries", "failure",
    "reconstructed", "retained", "retained_base", "imported", "reopening"})


@rule(K.REOPEN, touches=REOPEN_TOUCHES, reads={"self", "dependents.committed"})
def reopen(s, i, t, r):
    """A Done task opens a new generation: no attempt, an empty transaction, its result kept
    as retained work; a dependent whose effect is already prepared or Done wins the race."""
    def update():
        return s.put(i, replace(
            t, generation=t.generation + 1, fence=t.fence + 1, attempt=0,
            attempt_state=AS.NONE, phase=Phase.ABSENT, exit=Exit.NONE, reason=Reason.NONE,
            revision=0, candidate=0, base=0, version=0, disposition=Disposition.NONE,
            receipts=NO_RECEIPTS, effect_done=False, promotions=0, retries=0,
            failure=Failure.NONE, reconstructed=False, imported=0, reopening=False,
            retained=retain_work(t), retained_base=retain_base(t),
        ))
    return guarded(
        [
            (r.expected_generation == t.generation, Code.CAS_MOVED),
            (graph_saved(t), Code.ILLEGAL_PHASE_EDGE),
            (t.archived == 0, Code.HELD),
            (not_(dependents_committed(s, i)), Code.TERMINAL_ALREADY),
        ],
        update,
    )
