"""The review valve: the writes of the source worker's completion manifest, its two reviews,
its publication and its completion (docs/vocabulary.md, "The review valve").

The valve's facts are columns of the source task. The source worker (its attempt's K and
token, checked before any rule) submits the manifest, completes it and reports a failure; the
validator records FLIP's verdict, the evaluator the evaluation's, the promoter the verified
publication; the operator returns a valve that is blocked, failed or without a reviewer to
the worker. These writes leave alone the attempt, the owner, the worktree and the target
ref. A Done valve answers each of its requests evidence-only and writes nothing: each
condition holds for a Done valve, and each write keeps the record. Each kind is a ``Rule``: the conditions of its write in the
contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .decision import Condition as C, Ctx, Outcome, Rule, succeeded
from ..storage.records import VALVE_COLUMNS, TaskRecord, changed, evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY

_NO_REVIEWS = dict(flip="absent", flip_manifest=None, flip_requirements=None,
                   evaluation="absent", evaluation_manifest=None, evaluation_requirements=None)
_NO_PUBLICATION = dict(publication=None, publication_output=None, publications=0)
_BLOCKING = ("reject", "incomplete-evidence")


def _done(t: TaskRecord) -> bool:
    # guards: review-terminal-success-inert
    return t.review_phase == "done"


def _passed(t: TaskRecord, verdict: str, manifest: str | None, requirements: str | None) -> bool:
    return (verdict == "pass" and t.manifest is not None and manifest == t.manifest
            and requirements == t.manifest_requirements)


def _flip_passed(t: TaskRecord) -> bool:
    return _passed(t, t.flip, t.flip_manifest, t.flip_requirements)


def _evaluation_passed(t: TaskRecord) -> bool:
    return _passed(t, t.evaluation, t.evaluation_manifest, t.evaluation_requirements)


def _after_verdict(verdict: str) -> str:
    """A rejection or incomplete evidence blocks the valve; an unavailable reviewer leaves it
    unavailable, never blocked or failed."""
    # guards: review-unavailable-is-not-rejection
    if verdict in _BLOCKING:
        return "review-blocked"
    return "review-unavailable" if verdict == "unavailable" else "working"


def _write(ctx: Ctx, new: TaskRecord, same: bool = False) -> Outcome:
    t = ctx.record
    if _done(t) or same:
        return succeeded(ctx, t, kind=EVIDENCE_ONLY)
    # only the valve's own columns are written: never the attempt, its owner, its leases,
    # its transaction or the target's receipts
    # guards: review-no-event-replaces-source
    kept = {k: v for k, v in changed(t, new).items() if k in VALVE_COLUMNS}
    return succeeded(ctx, replace(t, **kept), kind=APPLIED)


# --- conditions ----------------------------------------------------------------------------

def the_manifest_is_valid(ctx: Ctx) -> bool:
    r = ctx.request
    return _done(ctx.record) or (
        r.resolvable and r.protected_free and r.contract is not None
        and None not in (r.candidate, r.requirements, r.output, r.validation))


def the_current_manifest_is_named(ctx: Ctx) -> bool:
    t, r = ctx.record, ctx.request
    return _done(t) or (t.manifest is not None and r.candidate == t.manifest
                        and r.requirements == t.manifest_requirements)


def the_current_manifest_is_published(ctx: Ctx) -> bool:
    t, r = ctx.record, ctx.request
    return _done(t) or (t.manifest is not None and r.candidate == t.manifest)


def a_verdict_is_given(ctx: Ctx) -> bool:
    return _done(ctx.record) or ctx.request.review is not None


def flip_passed(ctx: Ctx) -> bool:
    return _done(ctx.record) or _flip_passed(ctx.record)


def both_reviews_passed(ctx: Ctx) -> bool:
    t = ctx.record
    return _done(t) or (_flip_passed(t) and _evaluation_passed(t))


def accepted(ctx: Ctx) -> bool:
    # the evaluation's pass of the exact current manifest (after FLIP's) is what accepts it
    # guards: review-nonpassing-eval-cannot-publish, review-publication-bound-to-exact-reviews
    return _done(ctx.record) or ctx.record.review_phase == "accepted"


def the_integrated_main_is_observed(ctx: Ctx) -> bool:
    """A Land manifest lands only on the main it integrated; Report and Explore read no main."""
    t = ctx.record
    # guards: review-explore-publishes-without-git
    if t.contract != "land":
        return True
    # guards: review-stale-main-cannot-land
    return _done(t) or ctx.request.base == t.manifest_main


def the_publication_is_verified(ctx: Ctx) -> bool:
    r = ctx.request
    return _done(ctx.record) or (r.succeeded and r.outputs_match)


def published(ctx: Ctx) -> bool:
    # guards: review-done-is-exact-universal-review
    return _done(ctx.record) or ctx.record.review_phase == "published"


def the_publication_still_resolves(ctx: Ctx) -> bool:
    t, r = ctx.record, ctx.request
    return _done(t) or (t.publication == t.manifest and t.publication_output == t.manifest_output
                        and t.publications == 1 and r.resolvable)


def blocked_unavailable_or_failed(ctx: Ctx) -> bool:
    return _done(ctx.record) or ctx.record.review_phase in (
        "review-blocked", "review-unavailable", "failed")


# --- writes --------------------------------------------------------------------------------

def _manifest_submitted(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    fields = dict(manifest=r.candidate, manifest_requirements=r.requirements, contract=r.contract,
                  manifest_output=r.output, manifest_validation=r.validation,
                  manifest_main=r.base)
    same = all(getattr(t, k) == v for k, v in fields.items())
    # guards: review-changed-manifest-invalidates
    return _write(ctx, replace(t, review_phase="working", review_failure="none", **fields,
                               **_NO_REVIEWS, **_NO_PUBLICATION), same)


def _flip_recorded(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    return _write(ctx, replace(t, review_phase=_after_verdict(r.review), **{
        **_NO_REVIEWS, **_NO_PUBLICATION, "flip": r.review, "flip_manifest": r.candidate,
        "flip_requirements": r.requirements}))


def _evaluation_recorded(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    phase = "accepted" if r.review == "pass" else _after_verdict(r.review)
    return _write(ctx, replace(t, review_phase=phase, evaluation=r.review,
                               evaluation_manifest=r.candidate,
                               evaluation_requirements=r.requirements, **_NO_PUBLICATION))


def _manifest_published(ctx: Ctx) -> Outcome:
    t = ctx.record
    # guards: review-publication-at-most-once
    return _write(ctx, replace(t, review_phase="published", publication=t.manifest,
                               publication_output=t.manifest_output, publications=1))


def _valve_completed(ctx: Ctx) -> Outcome:
    return _write(ctx, replace(ctx.record, review_phase="done", review_failure="none"))


def _valve_failed(ctx: Ctx) -> Outcome:
    t = ctx.record
    return _write(ctx, replace(t, review_phase="failed", review_failure=ctx.request.failure),
                  same=t.review_phase == "published")


def _valve_retried(ctx: Ctx) -> Outcome:
    return _write(ctx, replace(ctx.record, review_phase="working", review_failure="none",
                               **_NO_REVIEWS, **_NO_PUBLICATION))


RULES: dict[str, Rule] = {
    "submit-manifest": Rule((C(the_manifest_is_valid, "manifest-invalid"),), _manifest_submitted),
    "record-flip": Rule((C(the_current_manifest_is_named, "manifest-mismatch"),
                         C(a_verdict_is_given, "evidence-missing")), _flip_recorded),
    "record-eval": Rule((C(the_current_manifest_is_named, "manifest-mismatch"),
                         C(flip_passed, "review-not-passed"),
                         C(a_verdict_is_given, "evidence-missing")), _evaluation_recorded),
    "publish": Rule((C(the_current_manifest_is_published, "manifest-mismatch"),
                     C(accepted, "illegal-phase-edge"),
                     C(both_reviews_passed, "review-not-passed"),
                     C(the_integrated_main_is_observed, "main-moved"),
                     C(the_publication_is_verified, "publication-unverified")), _manifest_published),
    "complete": Rule((C(the_current_manifest_is_published, "manifest-mismatch"),
                      C(published, "illegal-phase-edge"),
                      C(both_reviews_passed, "review-not-passed"),
                      C(the_publication_still_resolves, "publication-unverified")), _valve_completed),
    "fail-review": Rule((), _valve_failed),
    "retry-review": Rule((C(blocked_unavailable_or_failed, "illegal-phase-edge"),), _valve_retried),
}
