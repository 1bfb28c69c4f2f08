"""A completion receipted before its transaction: the write that records the owner's finish on
its own (a runtime that receipts a worker's finish before the handoff opens the transaction,
as WG's reducer does), written from the contract.

``receipt-completion`` stores the content of the attempt's worktree, exactly as the request
names it, on the task's row; the transaction stays absent and is opened by a later
``submit``. An attempt keeps its first receipt; any later one is refused
(``terminal-already``), and only the next attempt starts without one. The rule is a ``Rule``:
the conditions of its write in the contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .decision import Condition as C, Ctx, Outcome, Rule, succeeded
from ..storage.records import evolve as replace


def attempt_running(ctx: Ctx) -> bool:
    return ctx.record.running


def no_transaction(ctx: Ctx) -> bool:
    t = ctx.record
    return t.phase == "absent" and t.exit == "none"


def not_receipted(ctx: Ctx) -> bool:
    # guards: completion-receipt-never-lost-or-replaced
    return ctx.record.completion_receipt is None


def worktree_present(ctx: Ctx) -> bool:
    return ctx.observe.worktree(ctx.record).present


def names_the_worktree(ctx: Ctx) -> bool:
    return ctx.observe.worktree(ctx.record).content == ctx.request.candidate


def _receipted(ctx: Ctx) -> Outcome:
    """The receipt and nothing else: no transaction opens, the attempt is not closed."""
    # guards: receipted-completion-never-done-without-transaction
    return succeeded(ctx, replace(ctx.record, completion_receipt=ctx.request.candidate))


RULES: dict[str, Rule] = {
    "receipt-completion": Rule((
        C(attempt_running, "terminal-already"), C(no_transaction, "illegal-phase-edge"),
        C(not_receipted, "terminal-already"), C(worktree_present, "worktree-missing"),
        C(names_the_worktree, "candidate-mismatch"),
    ), _receipted),
}
