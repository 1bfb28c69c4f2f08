"""The SaveTransaction as the writes of one row, written from the contract.

docs/vocabulary.md fixes the SaveTransaction ("Phases, exits, statuses" and "The
transaction's steps"): a running attempt's transaction row moves along the main line one
legal edge at a time, each step binding at most one receipt to the attempt's (fence,
candidate, base), or leaves the main line for a side exit. Here that contract is in the
shape of the store: ``STEPS`` holds one row per transaction kind (the phase it writes, the
receipt it binds, the conditions of the write in the contract's order, each with the code
that refuses it, the side exit it may take instead, and the other columns it writes);
``write`` is the one function that makes any step, once its conditions hold (``RULES``:
the first condition that does not hold names the rejection and nothing is written). The
conditions every step shares (a running attempt, the CAS on phase and revision, the edge)
are checked before, by ``rules.transaction_failure``; the write itself is conditional on
the record it was decided on (``tables.STAMP``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .decision import (
    Condition, Ctx, Effect, Observe, Outcome, RELEASED_OWNER, Rule, effect_name, succeeded,
)
from ..contract.protect import protected_change
from ..storage.records import NO_RECEIPTS, RECEIPT_INDEX, Binding, TaskRecord, evolve as replace
from ..contract.vocabulary import SAVE_GRAPH_NEEDS


class SideExit(NamedTuple):
    """The row leaves the main line: its exit and reason, and what is recorded beside."""

    exit: str
    reason: str
    facts: tuple = ()
    columns: tuple = ()            # (column, value) pairs written with it


def _never(ctx: Ctx) -> SideExit | None:
    return None


def _nothing(ctx: Ctx) -> dict[str, Any]:
    return {}


def _no_notes(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    return [], []


@dataclass(frozen=True)
class Step:
    to: str | None                                   # the phase written (None: a side exit only)
    receipt: str | None = None                       # bound to the new (fence, candidate, base)
    when: tuple[Condition, ...] = ()                 # in the contract's order
    exit: Callable[[Ctx], SideExit | None] = _never  # taken instead of the edge
    sets: Callable[[Ctx], dict[str, Any]] = _nothing    # the other columns the step writes
    notes: Callable[[Ctx, TaskRecord], tuple[list, list]] = _no_notes   # (facts, effects)


def write(ctx: Ctx) -> Outcome:
    """The write of the step ``ctx.request.kind`` names (its conditions hold: ``rules``)."""
    return written(ctx)[0]


def written(ctx: Ctx) -> tuple[Outcome, dict[str, Any]]:
    """``write``'s outcome and the columns the step writes (each change name with the value
    written, the phase and revision included), from which its changes are the columns whose
    value differs from the record's (``changes``) with no comparison of whole records."""
    step, t = STEPS[ctx.request.kind], ctx.record
    side = step.exit(ctx)
    if side is not None:
        columns = {"exit": side.exit, "reason": side.reason, "revision": t.revision + 1,
                   **dict(side.columns)}
        return succeeded(ctx, replace(t, **columns), facts=side.facts), columns
    columns = {"phase": step.to, "revision": t.revision + 1, **step.sets(ctx)}
    if step.receipt is not None:    # bound to the (fence, candidate, base) the written row holds
        receipts = list(columns.get("receipts", t.receipts))
        get = columns.get
        receipts[RECEIPT_INDEX[step.receipt]] = Binding(
            get("fence", t.fence), get("candidate", t.candidate), get("base", t.base))
        columns["receipts"] = tuple(receipts)
    new = replace(t, **columns)
    facts, effects = step.notes(ctx, new)
    return succeeded(ctx, new, facts=facts, effects=effects), columns


def changes(t: TaskRecord, columns: dict[str, Any]) -> dict[str, Any]:
    """The columns of ``columns`` (a step's, ``written``) whose value differs from record
    ``t``'s: what ``records.changed`` gives for the record they make, a column written with
    the value it held left out as it does."""
    return {name: value for name, value in columns.items() if getattr(t, name) != value}


# --- the conditions, by the contract's phrases ---------------------------------------------


def worktree_leased_and_present(ctx: Ctx) -> bool:
    t = ctx.record
    return t.worktree_lease and ctx.observe.worktree(t).present


def worktree_present(ctx: Ctx) -> bool:
    return ctx.observe.worktree(ctx.record).present


def worktree_holds_the_candidate(ctx: Ctx) -> bool:
    return ctx.observe.worktree(ctx.record).content == ctx.request.candidate


def built_on_the_attempts_base(ctx: Ctx) -> bool:
    # guards: candidate-built-on-attempt-base
    return ctx.request.base == ctx.record.base_hint


def names_the_candidate(ctx: Ctx) -> bool:
    return ctx.request.candidate == ctx.record.candidate


def names_the_candidate_and_base(ctx: Ctx) -> bool:
    return names_the_candidate(ctx) and ctx.request.base == ctx.record.base


def a_verdict_of_pass_or_fail(ctx: Ctx) -> bool:
    return ctx.request.verdict in ("pass", "fail")


def review_required_by_policy(ctx: Ctx) -> bool:
    return ctx.policy.review_required


def the_actor_speaks_for_the_verdict(ctx: Ctx) -> bool:
    """Only an evaluator records a review verdict, only the daemon the review-not-required receipt."""
    r = ctx.request
    return r.actor == ("daemon" if r.verdict == "not-required" else "evaluator")


def a_verdict(ctx: Ctx) -> bool:
    return ctx.request.verdict is not None


def _awaiting(ctx: Ctx) -> bool:
    return ctx.record.phase == "awaiting-acceptance"


def a_failing_review_was_awaited(ctx: Ctx) -> bool:
    return ctx.request.verdict != "fail" or _awaiting(ctx)


def a_required_review_was_awaited(ctx: Ctx) -> bool:
    return ctx.request.verdict == "fail" or not ctx.policy.review_required or _awaiting(ctx)


def no_review_awaited_unless_required(ctx: Ctx) -> bool:
    return ctx.request.verdict == "fail" or ctx.policy.review_required or not _awaiting(ctx)


def a_required_review_passed(ctx: Ctx) -> bool:
    r = ctx.request
    return r.verdict == "fail" or not ctx.policy.review_required or r.verdict == "pass"


def a_disposition(ctx: Ctx) -> bool:
    return ctx.request.disposition in ("land", "deliver", "report")


def dependencies_done_on_the_attempts_generation(ctx: Ctx) -> bool:
    # guards: reopen-fences-dependents
    return ctx.deps_done() and not ctx.deps_reopened()


def review_of_the_exact_candidate(ctx: Ctx) -> bool:
    t = ctx.record
    # guards: promotion-needs-review-of-exact-candidate
    return t.receipt("review") == t.binding


def target_at_the_base_or_effect_done(ctx: Ctx) -> bool:
    t, o = ctx.record, ctx.observe
    # guards: cas-base-exact
    return o.effect_happened(t) or t.disposition != "land" or o.target() == t.base


def worktree_holds_only_saved_bytes(ctx: Ctx) -> bool:
    t = ctx.record
    view = ctx.observe.worktree(t)
    # guards: retained-work-never-erased
    return not view.present or (view.content == t.saved_work and not ctx.observe.uncaptured(t))


def every_receipt_bound_to_the_attempt(ctx: Ctx) -> bool:
    t = ctx.record
    # guards: done-iff-graphsave
    return all(t.receipt(k) == t.binding for k in SAVE_GRAPH_NEEDS)


def target_moved_before_the_land(ctx: Ctx) -> bool:
    """A land's target moved before the CAS (and the effect did not happen after all)."""
    t, o = ctx.record, ctx.observe
    return (t.exit == "none" and t.phase == "effect-prepared" and t.disposition == "land"
            and not o.effect_happened(t) and o.target() != t.base)


def needs_repair(ctx: Ctx) -> bool:
    # guards: no-phase-skip
    return ctx.record.exit == "needs-repair"


def built_on_the_target(ctx: Ctx) -> bool:
    # guards: candidate-built-on-attempt-base
    return ctx.request.base == ctx.observe.target()


def the_candidate_descends_from_the_base(ctx: Ctx) -> bool:
    r = ctx.request
    return ctx.observe.built_on(ctx.record, r.candidate, r.base)


def in_flight(ctx: Ctx) -> bool:
    t = ctx.record
    return t.phase not in ("absent", "graph-saved") and t.exit == "none"


# --- side exits -----------------------------------------------------------------------------


def _protected_path(ctx: Ctx) -> SideExit | None:
    """The first path the candidate changes against its base that the graph's policy
    protects (the real diff, ``git diff --no-renames --name-only -z base candidate``)."""
    patterns = ctx.protected_paths()
    if not patterns:
        return None
    t = ctx.record
    held = protected_change(patterns, ctx.observe.changed_paths(t.base, t.candidate))
    # guards: protected-path-holds
    if held is not None:
        path, pattern = held
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return SideExit("needs-repair", "protected-path",
                        (("protected-path", {"path": shown, "pattern": pattern}),))
    return None


def _failed(reason: str) -> Callable[[Ctx], SideExit | None]:
    def verdict(ctx: Ctx) -> SideExit | None:
        return SideExit("needs-repair", reason) if ctx.request.verdict == "fail" else None
    return verdict


def _target_moved(ctx: Ctx) -> SideExit:
    # guards: moved-target-needs-repair
    return SideExit("needs-repair", "target-moved",
                    (("effect-void", {"id": effect_name(ctx.task, ctx.record)}),),
                    (("finish_lease", False),))


def _version_skew(ctx: Ctx) -> SideExit:
    return SideExit("upgrade-blocked", "version-skew")


# --- the other columns a step writes, and what it records beside ---------------------------


def _deadline(ctx: Ctx) -> dict[str, Any]:
    return {"deadline": ctx.request.deadline or ctx.record.deadline}


def _saved_work(ctx: Ctx) -> dict[str, Any]:
    t, view = ctx.record, ctx.observe.worktree(ctx.record)
    # guards: worksave-exact
    return {"saved_work": view.content, "candidate": ctx.request.candidate, "base": t.base_hint,
            "version": t.version + 1}


def _revised(ctx: Ctx) -> dict[str, Any]:
    """After a repair: the earlier saved work is retained, every receipt goes."""
    t, target = ctx.record, ctx.observe.target()
    kept = t.saved_work is not None
    return {"exit": "none", "reason": "none",
            "retained": t.saved_work if kept else t.retained,
            "retained_base": t.base if kept else t.retained_base,
            "saved_work": ctx.observe.worktree(t).content, "candidate": ctx.request.candidate,
            "base": target, "base_hint": target, "version": t.version + 1,
            "receipts": NO_RECEIPTS}


def _succeeded(ctx: Ctx) -> dict[str, Any]:
    """The GraphSave: the attempt succeeded and its owner is released."""
    return {"attempt_state": "succeeded", **RELEASED_OWNER}


def _pinned(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    pin = Effect("save-work", (f"worksave/{ctx.task}/f{new.fence}-v{new.version}",
                               new.saved_work, new.worktree_id))
    return [], [pin]


def _disposition(ctx: Ctx) -> dict[str, Any]:
    return {"disposition": ctx.request.disposition, "finish_lease": True, **_deadline(ctx)}


def _intent(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    """Write-ahead intent: the effect's identity, candidate and base are durable first."""
    intent = {"id": effect_name(ctx.task, new), "fence": new.fence, "version": new.version,
              "disposition": new.disposition, "candidate": new.candidate, "base": new.base}
    return [("effect-prepared", intent)], []


def _published(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    """Publish once: an effect already observed is recorded, never made again."""
    t = ctx.record
    happened = ctx.observe.effect_happened(t)
    effect = effect_name(ctx.task, t)
    effects: list[Effect] = []
    # guards: promotion-at-most-once
    if not happened:
        effects.append(Effect("land", (effect, t.candidate, t.base)) if t.disposition == "land"
                       else Effect("output", (effect, t.candidate, t.disposition)))
    return [("effect-committed", {"id": effect, "re-observed": happened})], effects


def _cleanup_plan(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    """Plan removal of exactly this attempt's worktree, recording the bytes it holds."""
    view = ctx.observe.worktree(new)
    return [("cleanup-planned", {"worktree": new.worktree_id,
                                 "content": view.content if view.present else None})], []


def _removed(ctx: Ctx, new: TaskRecord) -> tuple[list, list]:
    view = ctx.observe.worktree(ctx.record)
    fact = ("worktree-removed", {"worktree": new.worktree_id,
                                 "content": view.content if view.present else None,
                                 "re-observed": not view.present})
    return [fact], [Effect("remove-worktree", (new.worktree_id,))] if view.present else []


# --- the steps --------------------------------------------------------------------------------

C = Condition
STEPS: dict[str, Step] = {
    "submit": Step("prepared", when=(C(worktree_leased_and_present, "stale-capability"),),
                   sets=_deadline),
    "quiesce": Step("quiescing"),
    "save-work": Step("work-saved", "work-save", when=(
        C(worktree_present, "worktree-missing"),
        C(worktree_holds_the_candidate, "candidate-mismatch"),
        C(built_on_the_attempts_base, "base-mismatch"),
    ), sets=_saved_work, notes=_pinned),
    "seal-candidate": Step("candidate-sealed", "candidate",
                           when=(C(names_the_candidate, "candidate-mismatch"),),
                           exit=_protected_path),
    "validate": Step("validated", "validation", when=(
        C(names_the_candidate, "candidate-mismatch"),
        C(a_verdict_of_pass_or_fail, "illegal-phase-edge"),
    ), exit=_failed("validation-failed")),
    "request-review": Step("awaiting-acceptance",
                           when=(C(review_required_by_policy, "illegal-phase-edge"),),
                           sets=_deadline),
    "accept": Step("accepted", "review", when=(
        C(the_actor_speaks_for_the_verdict, "not-authorized"),
        C(names_the_candidate, "candidate-mismatch"),
        C(a_verdict, "illegal-phase-edge"),
        C(a_failing_review_was_awaited, "illegal-phase-edge"),
        C(a_required_review_was_awaited, "review-required"),
        C(no_review_awaited_unless_required, "illegal-phase-edge"),
        C(a_required_review_passed, "review-required"),
    ), exit=_failed("review-failed"), sets=_deadline),
    "record-disposition": Step("disposition-recorded", "disposition",
                               when=(C(a_disposition, "illegal-phase-edge"),), sets=_disposition),
    "prepare-effect": Step("effect-prepared", when=(
        C(dependencies_done_on_the_attempts_generation, "dependency-reopened"),
    ), notes=_intent),
    "commit-effect": Step("effect-committed", "effect", when=(
        C(names_the_candidate_and_base, "candidate-mismatch"),
        C(review_of_the_exact_candidate, "review-required"),
        C(target_at_the_base_or_effect_done, "cas-moved"),
    ), sets=lambda ctx: {"effect_done": True}, notes=_published),
    "prepare-cleanup": Step("cleanup-prepared", notes=_cleanup_plan),
    "commit-cleanup": Step("cleanup-committed", "cleanup",
                           when=(C(worktree_holds_only_saved_bytes, "worktree-unsaved"),),
                           sets=lambda ctx: {"worktree_lease": False}, notes=_removed),
    "save-graph": Step("graph-saved", "graph-save",
                       when=(C(every_receipt_bound_to_the_attempt, "evidence-missing"),),
                       sets=_succeeded),
    "mark-repair": Step(None, when=(C(target_moved_before_the_land, "illegal-phase-edge"),),
                        exit=_target_moved),
    "revise": Step("work-saved", "work-save", when=(
        C(needs_repair, "illegal-phase-edge"),
        C(worktree_present, "worktree-missing"),
        C(worktree_holds_the_candidate, "candidate-mismatch"),
        C(built_on_the_target, "base-mismatch"),
        C(the_candidate_descends_from_the_base, "base-mismatch"),
    ), sets=_revised, notes=_pinned),
    "block-upgrade": Step(None, when=(C(in_flight, "illegal-phase-edge"),), exit=_version_skew),
}

#: The transaction's kinds as rules: the step's conditions, then its write.
RULES: dict[str, Rule] = {kind: Rule(step.when, write) for kind, step in STEPS.items()}


def _any_request(r: Any) -> bool:
    return True


#: Steps the store decides by their write (``tables.STEP_CONDITIONS`` carries the conditions
#: of theirs that read stored rows), each with the conditions that read the request alone:
#: a request they admit has its row moved, or refused, by the statement; one they refuse
#: takes the guard list, which names the first condition that fails in the contract's order.
#: The steps of ``OBSERVING_STEPS`` observe the environment before their write and the
#: statement compares what was seen; the effects and facts of a step are made and recorded
#: once its row moved (a land whose compare-and-swap fails moves it back: ``cas-moved``). A
#: seal is written so only while the graph protects no path (its side exit reads the diff).
WRITTEN_STEPS: dict[str, Callable[[Any], bool]] = {
    "submit": _any_request,
    "save-work": _any_request,
    "quiesce": _any_request,
    "seal-candidate": _any_request,
    "validate": lambda r: r.verdict == "pass",
    "request-review": _any_request,
    "accept": lambda r: (r.actor, r.verdict) in (("evaluator", "pass"), ("daemon", "not-required")),
    "record-disposition": lambda r: r.disposition in ("land", "deliver", "report"),
    "prepare-effect": _any_request,
    "commit-effect": _any_request,
    "prepare-cleanup": _any_request,
    "commit-cleanup": _any_request,
    "save-graph": _any_request,
}


class Looking(NamedTuple):
    """What a written step observes before its write: ``at`` the part of the record the
    observation is of (observed again when the stored record's differs), ``seen`` the values
    its statement compares, observed as its conditions observe them (the same order, the
    same reads)."""

    at: Callable[[TaskRecord], Any]
    seen: Callable[[Observe, TaskRecord], tuple]


def _the_worktree(t: TaskRecord) -> Any:
    return t.worktree_id


def worktree_seen(observe: Observe, t: TaskRecord) -> tuple:
    """The worktree observed present (its id; None when absent) and the content in it."""
    view = observe.worktree(t)
    return (t.worktree_id if view.present else None, view.content)


def _the_effect(t: TaskRecord) -> Any:
    return (t.effect_id, t.effect_done, t.disposition, t.base)


def effect_seen(observe: Observe, t: TaskRecord) -> tuple:
    """The target observed (None where the condition does not look), whether the effect was
    observed made (1: its intent recorded and found in the repository), and its name."""
    happened = observe.effect_happened(t)
    target = observe.target() if not happened and t.disposition == "land" else None
    return (target, int(happened and not t.effect_done), effect_name(observe.task, t))


def cleanup_seen(observe: Observe, t: TaskRecord) -> tuple:
    """The worktree looked at, observed present (1 or 0), the content in it, and whether
    something in it no ref keeps (1 or 0; looked for whenever it is present)."""
    view = observe.worktree(t)
    unkept = view.present and bool(observe.uncaptured(t))
    return (t.worktree_id, int(view.present), view.content, int(unkept))


#: The written steps whose statement compares what was observed of the environment before the
#: write: a submit and a WorkSave the attempt's worktree (present, and the content it holds),
#: a commit-effect the target and whether its effect was made, a commit-cleanup whether the
#: worktree holds only saved bytes.
OBSERVING_STEPS: dict[str, Looking] = {
    "submit": Looking(_the_worktree, worktree_seen),
    "save-work": Looking(_the_worktree, worktree_seen),
    "commit-effect": Looking(_the_effect, effect_seen),
    "commit-cleanup": Looking(_the_worktree, cleanup_seen),
}
#: Written steps whose statement reads the dependencies' rows: sent ahead of the request
#: (``Kernel._write_ahead``) only with those rows' locks before it.
LOCKS_DEPENDENCIES = frozenset({"prepare-effect"})
#: Written steps never sent ahead: what a commit-effect observes reads the effect's intent
#: from the database.
NOT_AHEAD = frozenset({"commit-effect"})
