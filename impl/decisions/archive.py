"""Archiving a finished task: first the operator confirms one digest (an evidence row), then
the archive names it again. The daemon's backlog only proposes a task for archiving
(``propose-archive``, an evidence row of the digest): the planner then waits for the
operator's confirmation of that digest before it plans the archive.

The digest is the content id of the candidate that made the task Done (a commit id, so
it covers the tree and the history). Both are rows in the task's evidence table
task (``confirm-archive``, ``archive``), each by the digest it names (docs/vocabulary.md,
"Archive after confirmation"). Each kind is a ``Rule``: the conditions of its write in the
contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .decision import Condition as C, Ctx, Outcome, Rule, evidence_fact, succeeded
from .generations import done, not_archived
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY


def confirmed(ctx: Ctx) -> bool:
    """The operator confirmed the digest the archive names."""
    d = ctx.request.candidate
    # guards: archive-needs-confirmed-digest
    return d is not None and ctx.seen("confirm-archive", d)


def names_the_result(ctx: Ctx) -> bool:
    return ctx.request.candidate == ctx.record.candidate


def _recorded(ctx: Ctx) -> Outcome:
    return succeeded(ctx, ctx.record, facts=[evidence_fact(ctx.request.kind, ctx.request.candidate)])


def _proposed(ctx: Ctx) -> Outcome:
    again = ctx.seen("propose-archive", ctx.request.candidate)
    return succeeded(ctx, ctx.record, kind=EVIDENCE_ONLY if again else APPLIED,
                     facts=[evidence_fact("propose-archive", ctx.request.candidate)])


_DONE_AND_NOT_ARCHIVED = (C(done, "illegal-phase-edge"), C(not_archived, "terminal-already"))

RULES: dict[str, Rule] = {
    "confirm-archive": Rule(_DONE_AND_NOT_ARCHIVED + (C(names_the_result, "candidate-mismatch"),),
                            _recorded),
    "archive": Rule(_DONE_AND_NOT_ARCHIVED + (C(confirmed, "archive-unconfirmed"),
                                              C(names_the_result, "candidate-mismatch")),
                    _recorded),
    "propose-archive": Rule(_DONE_AND_NOT_ARCHIVED + (C(names_the_result, "candidate-mismatch"),),
                            _proposed),
}
