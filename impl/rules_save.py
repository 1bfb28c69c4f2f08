"""The rules of the SaveTransaction: from submit to the GraphSave, repair and revision."""
from __future__ import annotations

from .decision import (
    Ctx, Effect, Observe, Outcome, advance, effect_name, leave_main_line, reject, release_owner,
    succeeded,
)
from .protect import protected_change
from .records import Binding, NO_RECEIPTS, TaskRecord, evolve as replace
from .vocabulary import SAVE_GRAPH_NEEDS


# --- the SaveTransaction ---------------------------------------------------------------------


def submit(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not (t.worktree_lease and ctx.observe.worktree(t).present):
        return reject(ctx, "stale-capability")
    return succeeded(ctx, advance(t, "prepared", deadline=ctx.request.deadline or t.deadline))


def quiesce(ctx: Ctx) -> Outcome:
    return succeeded(ctx, advance(ctx.record, "quiescing"))


def save_work(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    view = ctx.observe.worktree(t)
    if not view.present:
        return reject(ctx, "worktree-missing")
    if view.content != r.candidate:
        return reject(ctx, "candidate-mismatch")
    # guards: candidate-built-on-attempt-base
    if r.base != t.base_hint:
        return reject(ctx, "base-mismatch")
    version = t.version + 1
    # guards: worksave-exact
    new = advance(t, "work-saved", saved_work=view.content, candidate=r.candidate, base=t.base_hint,
                  version=version,
                  receipts=t.with_receipts(work_save=Binding(t.fence, r.candidate, t.base_hint)))
    pin = Effect("save-work", (f"worksave/{ctx.task}/f{t.fence}-v{version}", view.content,
                               t.worktree_id))
    return succeeded(ctx, new, effects=[pin])


def _candidate_failure(ctx: Ctx) -> str | None:
    return None if ctx.record.candidate == ctx.request.candidate else "candidate-mismatch"


def seal_candidate(ctx: Ctx) -> Outcome:
    t = ctx.record
    code = _candidate_failure(ctx)
    if code:
        return reject(ctx, code)
    held = _protected_change(ctx)
    # guards: protected-path-holds
    if held is not None:
        path, pattern = held
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return succeeded(ctx, leave_main_line(t, "needs-repair", "protected-path"),
                         facts=[("protected-path", {"path": shown, "pattern": pattern})])
    return succeeded(ctx, advance(t, "candidate-sealed", receipts=t.with_receipts(candidate=t.binding)))


def _protected_change(ctx: Ctx) -> tuple[str, str] | None:
    """The first path the candidate changes against its base that the graph's policy
    protects (the real diff, ``git diff --no-renames --name-only -z base candidate``)."""
    patterns = ctx.protected_paths()
    if not patterns:
        return None
    t = ctx.record
    return protected_change(patterns, ctx.observe.changed_paths(t.base, t.candidate))


def validate(ctx: Ctx) -> Outcome:
    t, verdict = ctx.record, ctx.request.verdict
    code = _candidate_failure(ctx) or (None if verdict in ("pass", "fail") else "illegal-phase-edge")
    if code:
        return reject(ctx, code)
    if verdict == "pass":
        return succeeded(ctx, advance(t, "validated", receipts=t.with_receipts(validation=t.binding)))
    return succeeded(ctx, leave_main_line(t, "needs-repair", "validation-failed"))


def request_review(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not ctx.policy.review_required:
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, advance(t, "awaiting-acceptance", deadline=ctx.request.deadline or t.deadline))


def accept(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    required = ctx.policy.review_required
    from_awaiting = t.phase == "awaiting-acceptance"
    # a review verdict is the evaluator's; the not-required policy receipt is the daemon's
    if r.actor != ("daemon" if r.verdict == "not-required" else "evaluator"):
        return reject(ctx, "not-authorized")
    if r.verdict == "fail":
        code = _candidate_failure(ctx) or (None if from_awaiting else "illegal-phase-edge")
        if code:
            return reject(ctx, code)
        return succeeded(ctx, leave_main_line(t, "needs-repair", "review-failed"))
    code = _candidate_failure(ctx)
    if code is None and r.verdict is None:
        code = "illegal-phase-edge"
    if code is None and required and not from_awaiting:
        code = "review-required"
    if code is None and not required and from_awaiting:
        code = "illegal-phase-edge"
    if code is None and required and r.verdict != "pass":
        code = "review-required"
    if code:
        return reject(ctx, code)
    return succeeded(ctx, advance(t, "accepted", deadline=r.deadline or t.deadline,
                             receipts=t.with_receipts(review=t.binding)))


def record_disposition(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    if r.disposition not in ("land", "deliver", "report"):
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, advance(t, "disposition-recorded", disposition=r.disposition, finish_lease=True,
                             deadline=r.deadline or t.deadline,
                             receipts=t.with_receipts(disposition=t.binding)))


def prepare_effect(ctx: Ctx) -> Outcome:
    """Write-ahead intent: the effect's identity, candidate and base are durable first."""
    t = ctx.record
    # guards: reopen-fences-dependents
    if not ctx.deps_done() or ctx.deps_reopened():
        return reject(ctx, "dependency-reopened")
    new = advance(t, "effect-prepared")
    intent = {"id": effect_name(ctx.task, new), "fence": t.fence, "version": t.version,
              "disposition": t.disposition, "candidate": t.candidate, "base": t.base}
    return succeeded(ctx, new, facts=[("effect-prepared", intent)])


def commit_effect(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    land = t.disposition == "land"
    if t.candidate != r.candidate or r.base != t.base:
        return reject(ctx, "candidate-mismatch")
    # guards: promotion-needs-review-of-exact-candidate
    if t.receipt("review") != t.binding:
        return reject(ctx, "review-required")
    happened = ctx.observe.effect_happened(t)
    # guards: cas-base-exact
    if not (happened or not land or ctx.observe.target() == t.base):
        return reject(ctx, "cas-moved")
    effect = effect_name(ctx.task, t)
    effects: list[Effect] = []
    # guards: promotion-at-most-once
    if not happened:
        effects.append(Effect("land", (effect, t.candidate, t.base)) if land
                       else Effect("output", (effect, t.candidate, t.disposition)))
    new = advance(t, "effect-committed", effect_done=True,
                  receipts=t.with_receipts(effect=t.binding))
    facts = [("effect-committed", {"id": effect, "re-observed": happened})]
    return succeeded(ctx, new, facts=facts, effects=effects)


def target_moved(observe: Observe, t: TaskRecord) -> bool:
    """A land's target moved before the CAS (and the effect did not happen after all)."""
    return (t.phase == "effect-prepared" and t.disposition == "land"
            and not observe.effect_happened(t) and observe.target() != t.base)


def mark_repair(ctx: Ctx) -> Outcome:
    t = ctx.record
    if t.exit != "none" or not target_moved(ctx.observe, t):
        return reject(ctx, "illegal-phase-edge")
    # guards: moved-target-needs-repair
    new = leave_main_line(t, "needs-repair", "target-moved", finish_lease=False)
    return succeeded(ctx, new, facts=[("effect-void", {"id": effect_name(ctx.task, t)})])


def prepare_cleanup(ctx: Ctx) -> Outcome:
    """Plan removal of exactly this attempt's worktree, recording the bytes it holds."""
    t = ctx.record
    view = ctx.observe.worktree(t)
    plan = {"worktree": t.worktree_id, "content": view.content if view.present else None}
    return succeeded(ctx, advance(t, "cleanup-prepared"), facts=[("cleanup-planned", plan)])


def commit_cleanup(ctx: Ctx) -> Outcome:
    t = ctx.record
    view = ctx.observe.worktree(t)
    # guards: retained-work-never-erased
    if view.present and (view.content != t.saved_work or ctx.observe.uncaptured(t)):
        return reject(ctx, "worktree-unsaved")
    new = advance(t, "cleanup-committed", worktree_lease=False,
                  receipts=t.with_receipts(cleanup=t.binding))
    facts = [("worktree-removed", {"worktree": t.worktree_id,
                                   "content": view.content if view.present else None,
                                   "re-observed": not view.present})]
    effects = [Effect("remove-worktree", (t.worktree_id,))] if view.present else []
    return succeeded(ctx, new, facts=facts, effects=effects)


def save_graph(ctx: Ctx) -> Outcome:
    t = ctx.record
    b = t.binding
    # guards: done-iff-graphsave
    if any(t.receipt(k) != b for k in SAVE_GRAPH_NEEDS):
        return reject(ctx, "evidence-missing")
    new = release_owner(advance(t, "graph-saved", attempt_state="succeeded",
                                receipts=t.with_receipts(graph_save=b)))
    return succeeded(ctx, new)


def revise(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    # guards: no-phase-skip
    if t.exit != "needs-repair":
        return reject(ctx, "illegal-phase-edge")
    view = ctx.observe.worktree(t)
    if not view.present:
        return reject(ctx, "worktree-missing")
    if view.content != r.candidate:
        return reject(ctx, "candidate-mismatch")
    target = ctx.observe.target()
    # guards: candidate-built-on-attempt-base
    if r.base != target:
        return reject(ctx, "base-mismatch")
    kept = t.saved_work is not None
    version = t.version + 1
    new = replace(
        t, phase="work-saved", exit="none", reason="none", revision=t.revision + 1,
        retained=t.saved_work if kept else t.retained,
        retained_base=t.base if kept else t.retained_base,
        saved_work=view.content, candidate=r.candidate, base=target, base_hint=target,
        version=version,
        receipts=NO_RECEIPTS[:0] + (Binding(t.fence, r.candidate, target),) + NO_RECEIPTS[1:],
    )
    pin = Effect("save-work", (f"worksave/{ctx.task}/f{t.fence}-v{version}", view.content,
                               t.worktree_id))
    return succeeded(ctx, new, effects=[pin])


def block_upgrade(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not (t.phase not in ("absent", "graph-saved") and t.exit == "none"):
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, leave_main_line(t, "upgrade-blocked", "version-skew"))
