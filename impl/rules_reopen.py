"""The operator's reopen: a Done task opens a new generation (docs/vocabulary.md,
"Reopening a Done task")."""
from __future__ import annotations

from .decision import Ctx, Effect, Outcome, reject, retain_work, succeeded
from .records import NO_RECEIPTS, evolve as replace


def reopen(ctx: Ctx) -> Outcome:
    """A Done task gets the next generation: no attempt, an empty transaction, its result kept
    as retained work. A dependent whose effect is prepared, committed or Done came first."""
    t = ctx.record
    if ctx.request.expected_generation != t.generation:
        return reject(ctx, "cas-moved")
    if not t.graph_saved:
        return reject(ctx, "illegal-phase-edge")
    if t.candidate is not None and ctx.seen("archive", t.candidate):
        return reject(ctx, "held")
    # guards: reopen-fences-dependents
    if ctx.dependents_committed():
        return reject(ctx, "terminal-already")
    effects: list[Effect] = []
    retained, retained_base = retain_work(ctx, t, effects)
    generation = t.generation + 1
    new = replace(
        t, generation=generation, fence=t.fence + 1, attempt=0, attempt_state="none",
        phase="absent", exit="none", reason="none", revision=0, candidate=None, base=None,
        version=0, disposition="none", receipts=NO_RECEIPTS, effect_done=False, retries=0,
        failure="none", reconstructed=False, imported=None,
        retained=retained, retained_base=retained_base,
    )
    return succeeded(ctx, new, effects=effects,
                     facts=[("generation-opened", {"generation": generation, "cause": "reopen"})])
