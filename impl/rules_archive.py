"""The rules of archiving a Done task: the operator's confirmation of the exact digest of
what is archived, recorded first as evidence, then the archive naming that same digest.

The digest of what is archived is the content id of the Done task's result (its candidate:
a commit id, the digest of its tree and history). Both receipts are evidence rows of the
task (``confirm-archive``, ``archive``), each by the digest it names.
"""
from __future__ import annotations

from .decision import Ctx, Outcome, evidence_fact, reject, succeeded


def _done_and_unarchived(ctx: Ctx) -> str | None:
    t = ctx.record
    if not t.graph_saved:
        return "illegal-phase-edge"
    if t.candidate is not None and ctx.seen("archive", t.candidate):
        return "terminal-already"
    return None


def confirm_archive(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    code = _done_and_unarchived(ctx)
    if code is None and r.candidate != t.candidate:
        code = "candidate-mismatch"
    if code:
        return reject(ctx, code)
    return succeeded(ctx, t, facts=[evidence_fact("confirm-archive", r.candidate)])


def archive(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    code = _done_and_unarchived(ctx)
    # guards: archive-needs-confirmed-digest
    if code is None and (r.candidate is None or not ctx.seen("confirm-archive", r.candidate)):
        code = "archive-unconfirmed"
    if code is None and r.candidate != t.candidate:
        code = "candidate-mismatch"
    if code:
        return reject(ctx, code)
    return succeeded(ctx, t, facts=[evidence_fact("archive", r.candidate)])
