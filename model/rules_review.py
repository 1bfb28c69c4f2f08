"""The rules of the review valve: no task is Done before FLIP and the evaluation both passed
the exact immutable manifest its source worker submitted, and its outputs were published
under the task's contract.

The valve's facts are the source task's own (``TaskState.manifest`` … ``review_failure``):
its reviews are recorded on it, so every rule reads only ``self``. The source worker (its
attempt's K and token) submits the manifest, completes and reports a failure; the validator
records FLIP, the evaluator the evaluation, the promoter the publication; the operator asks a
blocked, unavailable or failed valve to work again. No rule of the valve opens, closes or
replaces an attempt, and none moves the target. Once the valve is Done every request of it is
inert (evidence-only, nothing changes). Each rule is declared with ``@rule``.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, ite, not_, one_of
from .ruleset import guarded, rule
from .state import TaskState, replace_task as replace
from .vocab import Code, Contract, DecisionKind as D, Kind as K, ReviewPhase as RP, ReviewVerdict as RV

#: The manifest's fields on the task.
MANIFEST = frozenset({"manifest", "manifest_requirements", "contract", "manifest_output",
                      "manifest_validation", "manifest_main"})
#: The two review receipts.
REVIEWS = frozenset({"flip", "flip_manifest", "flip_requirements", "evaluation",
                     "evaluation_manifest", "evaluation_requirements"})
#: The publication.
PUBLICATION = frozenset({"publication", "publication_output", "publications"})
#: Every fact of the valve.
VALVE = MANIFEST | REVIEWS | PUBLICATION | {"review_phase", "review_failure"}

CONTRACTS = (Contract.LAND, Contract.REPORT, Contract.EXPLORE)
VERDICTS = (RV.PASS, RV.REJECT, RV.UNAVAILABLE, RV.INCOMPLETE_EVIDENCE)

_NO_REVIEWS = dict(flip=RV.ABSENT, flip_manifest=0, flip_requirements=0, evaluation=RV.ABSENT,
                   evaluation_manifest=0, evaluation_requirements=0)
_NO_PUBLICATION = dict(publication=0, publication_output=0, publications=0)


def valve_done(t: TaskState) -> Any:
    return t.review_phase == RP.DONE


def flip_passed(t: TaskState) -> Any:
    """FLIP's receipt passes the task's current manifest exactly."""
    return all_of(t.flip == RV.PASS, t.flip_manifest == t.manifest,
                  t.flip_requirements == t.manifest_requirements, t.manifest != 0)


def evaluation_passed(t: TaskState) -> Any:
    """The evaluation's receipt passes the task's current manifest exactly."""
    return all_of(t.evaluation == RV.PASS, t.evaluation_manifest == t.manifest,
                  t.evaluation_requirements == t.manifest_requirements, t.manifest != 0)


def published_exactly(t: TaskState) -> Any:
    """The publication names the current manifest and its output digest, once."""
    return all_of(t.publication == t.manifest, t.publication_output == t.manifest_output,
                  t.publications == 1, t.manifest != 0)


def names_manifest(t: TaskState, r) -> Any:
    """The request names the task's current manifest (and its requirements)."""
    return all_of(t.manifest != 0, t.manifest == r.candidate,
                  t.manifest_requirements == r.requirements)


def review_phase_of(verdict: Any) -> Any:
    """Where a non-passing verdict leaves the valve: a rejection or incomplete evidence blocks
    it, an unavailable reviewer leaves it unavailable (never blocked, never failed)."""
    return ite(one_of(verdict, (RV.REJECT, RV.INCOMPLETE_EVIDENCE)), RP.REVIEW_BLOCKED,
               ite(verdict == RV.UNAVAILABLE, RP.REVIEW_UNAVAILABLE, RP.WORKING))


def _valve(s, i, t, checks: list, new: TaskState, noop: Any = False):
    """A valve rule: once Done, every request is inert (evidence-only, nothing changes);
    ``noop`` names another case that changes nothing."""
    done = valve_done(t)
    inert = any_of(done, noop)
    return guarded([(any_of(done, c), code) for c, code in checks],
                   lambda: s.put(i, replace(ite(inert, t, new))),
                   kind=ite(inert, D.EVIDENCE_ONLY, D.APPLIED))


@rule(K.SUBMIT_MANIFEST, touches=VALVE, reads={"self"})
def submit_manifest(s, i, t, r):
    """The source worker submits its completion manifest: a valid new one replaces the old,
    and discards both reviews and any publication (the same manifest again changes nothing)."""
    valid = all_of(r.resolvable != 0, r.protected_free != 0, r.candidate != 0,
                   r.requirements != 0, r.output != 0, r.validation != 0,
                   one_of(r.contract, CONTRACTS))
    same = all_of(t.manifest == r.candidate, t.manifest_requirements == r.requirements,
                  t.contract == r.contract, t.manifest_output == r.output,
                  t.manifest_validation == r.validation, t.manifest_main == r.base)
    new = replace(t, manifest=r.candidate, manifest_requirements=r.requirements,
                  contract=r.contract, manifest_output=r.output,
                  manifest_validation=r.validation, manifest_main=r.base,
                  review_phase=RP.WORKING, review_failure=0, **_NO_REVIEWS, **_NO_PUBLICATION)
    return _valve(s, i, t, [(valid, Code.MANIFEST_INVALID)], new, noop=same)


@rule(K.RECORD_FLIP, touches=REVIEWS | PUBLICATION | {"review_phase"}, reads={"self"})
def record_flip(s, i, t, r):
    """FLIP's verdict on the exact current manifest: it replaces the old FLIP receipt and
    discards the evaluation and any publication."""
    new = replace(t, review_phase=review_phase_of(r.review), **_NO_REVIEWS, **_NO_PUBLICATION)
    new = replace(new, flip=r.review, flip_manifest=r.candidate,
                  flip_requirements=r.requirements)
    return _valve(s, i, t, [(names_manifest(t, r), Code.MANIFEST_MISMATCH),
                            (one_of(r.review, VERDICTS), Code.EVIDENCE_MISSING)], new)


@rule(K.RECORD_EVAL, touches=REVIEWS | PUBLICATION | {"review_phase"}, reads={"self"})
def record_eval(s, i, t, r):
    """The evaluator's verdict on the exact current manifest, after FLIP passed it: a pass
    accepts the manifest; it discards any publication."""
    phase = ite(r.review == RV.PASS, RP.ACCEPTED, review_phase_of(r.review))
    new = replace(t, review_phase=phase, evaluation=r.review, evaluation_manifest=r.candidate,
                  evaluation_requirements=r.requirements, **_NO_PUBLICATION)
    return _valve(s, i, t, [(names_manifest(t, r), Code.MANIFEST_MISMATCH),
                            (flip_passed(t), Code.REVIEW_NOT_PASSED),
                            (one_of(r.review, VERDICTS), Code.EVIDENCE_MISSING)], new)


def target_matches(t: TaskState, observed: Any) -> Any:
    """A Land manifest publishes only onto the main it integrated; a Report or an Explore
    manifest never reads git main."""
    return any_of(t.contract != Contract.LAND, observed == t.manifest_main)


@rule(K.PUBLISH, touches=PUBLICATION | {"review_phase"}, reads={"self"})
def publish(s, i, t, r):
    """The promoter's verified publication of the accepted manifest (the main it observed is
    the request's base): a Land manifest onto the main it integrated, once."""
    new = replace(t, review_phase=RP.PUBLISHED, publication=t.manifest,
                  publication_output=t.manifest_output, publications=1)
    return _valve(s, i, t, [
        (all_of(t.manifest != 0, t.manifest == r.candidate), Code.MANIFEST_MISMATCH),
        (t.review_phase == RP.ACCEPTED, Code.ILLEGAL_PHASE_EDGE),
        (all_of(flip_passed(t), evaluation_passed(t)), Code.REVIEW_NOT_PASSED),
        (target_matches(t, r.base), Code.MAIN_MOVED),
        (all_of(r.succeeded != 0, r.outputs_match != 0), Code.PUBLICATION_UNVERIFIED),
    ], new)


@rule(K.COMPLETE, touches={"review_phase", "review_failure"}, reads={"self"})
def complete(s, i, t, r):
    """The source worker completes the published manifest whose outputs still resolve: the
    valve is Done, and from then on inert."""
    new = replace(t, review_phase=RP.DONE, review_failure=0)
    return _valve(s, i, t, [
        (all_of(t.manifest != 0, t.manifest == r.candidate), Code.MANIFEST_MISMATCH),
        (t.review_phase == RP.PUBLISHED, Code.ILLEGAL_PHASE_EDGE),
        (all_of(flip_passed(t), evaluation_passed(t)), Code.REVIEW_NOT_PASSED),
        (all_of(published_exactly(t), r.resolvable != 0), Code.PUBLICATION_UNVERIFIED),
    ], new)


@rule(K.FAIL_REVIEW, touches={"review_phase", "review_failure"}, reads={"self"})
def fail_review(s, i, t, r):
    """The source worker reports its valve failed (with its code); after publication a
    failure is a diagnostic only and changes nothing."""
    new = replace(t, review_phase=RP.FAILED, review_failure=r.failure)
    return _valve(s, i, t, [], new, noop=t.review_phase == RP.PUBLISHED)


@rule(K.RETRY_REVIEW, touches=REVIEWS | PUBLICATION | {"review_phase", "review_failure"},
      reads={"self"})
def retry_review(s, i, t, r):
    """The operator sends a blocked, unavailable or failed valve back to the same source
    worker: both reviews are asked again (no new worker, no new attempt)."""
    new = replace(t, review_phase=RP.WORKING, review_failure=0, **_NO_REVIEWS,
                  **_NO_PUBLICATION)
    return _valve(s, i, t, [(one_of(t.review_phase, (RP.FAILED, RP.REVIEW_BLOCKED,
                                                      RP.REVIEW_UNAVAILABLE)),
                             Code.ILLEGAL_PHASE_EDGE)], new)
