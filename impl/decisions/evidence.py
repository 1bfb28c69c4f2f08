"""Evidence: the rows a report records and what it may change, written from the contract.

A report records one evidence row of its task, keyed by its kind and the request's
evidence id (a repeated id is the same row: ``INSERT OR IGNORE``). Evidence never
terminalizes an attempt: at most it changes what the kernel knows of the owner (a
suspicion, a probe's verdict). A report is *applied* when it changes what the kernel
knows (a first occurrence that is counted, a proven death), else it is *evidence only*.
``REPORTS`` is the contract's table (docs/vocabulary.md, "Kinds" and "Conditions, kind by
kind") in that shape: per kind, when it is applied, what it writes of the owner, and
whether its row is held for the running attempt; ``report`` is the one write.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .decision import Condition as C, Ctx, Outcome, Rule, evidence_fact, succeeded, suspect
from ..storage.records import evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY
from .routes import outage


def _never(ctx: Ctx) -> bool:
    return False


def _nothing(ctx: Ctx) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Report:
    applied: Callable[[Ctx], bool] = _never            # else evidence only
    owner: Callable[[Ctx], dict[str, Any]] = _nothing  # the owner columns it writes
    held: Callable[[Ctx], bool] = _never               # its row is counted for the attempt
    earns: str | None = None                           # a further row it records when applied
    writes: Callable[[Ctx], dict[str, Any]] = _nothing  # other task columns it writes


def report(ctx: Ctx) -> Outcome:
    """Record the report's row (and the row it earns), write what it knows of the owner."""
    spec, r = REPORTS[ctx.request.kind], ctx.request
    applied = spec.applied(ctx)
    facts = [evidence_fact(r.kind, r.evidence, counted=spec.held(ctx))]
    if spec.earns is not None and applied and ctx.record.running and not ctx.record.reserved:
        facts.append(evidence_fact(spec.earns, r.evidence))
    owner = {**spec.owner(ctx), **spec.writes(ctx)}
    new = replace(ctx.record, **owner) if owner else ctx.record
    return succeeded(ctx, new, kind=APPLIED if applied else EVIDENCE_ONLY, facts=facts)


# --- when a report is applied, and what it knows of the owner ------------------------------


def first_of_its_id(ctx: Ctx) -> bool:
    """No row of this kind has this evidence id yet: a new occurrence, counted once."""
    return not ctx.seen(ctx.request.kind, ctx.request.evidence)


def first_compaction_occurrence(ctx: Ctx) -> bool:
    # guards: compaction-occurrences-counted-once
    return first_of_its_id(ctx)


def a_continuation_earned(ctx: Ctx) -> bool:
    """The occurrence acknowledged earned a continuation (a compaction recorded it)."""
    # guards: compaction-occurrences-counted-once
    return ctx.seen("continuation", ctx.request.evidence)


def _suspicion(ctx: Ctx) -> dict[str, Any]:
    """A running owner becomes suspect (a proven death stays proven)."""
    t = ctx.record
    # guards: evidence-cannot-terminalize-live-owner
    return {"owner_seen": suspect(t)} if t.running else {}


def _proves_death(ctx: Ctx) -> bool:
    t = ctx.record
    alive = ctx.observe.owner_alive(t)           # read (and logged) whatever the attempt
    return t.running and not alive and t.owner_seen != "dead"


def _probed(ctx: Ctx) -> dict[str, Any]:
    """The exact owner (pid and birth time) alive, or proven dead; a death is dated."""
    t = ctx.record
    if not t.running:
        return {}
    alive = ctx.observe.owner_alive(t)
    # guards: liveness-needs-exact-birth, evidence-cannot-terminalize-live-owner
    seen = {"owner_seen": "live" if alive else "dead"}
    if not alive and t.owner_seen != "dead":
        seen["deadline"] = ctx.observe.now() + 1
    return seen


def _held_message(ctx: Ctx) -> bool:
    """A message is held for a running attempt, once per message id."""
    return ctx.record.running and first_of_its_id(ctx)


REPORTS: dict[str, Report] = {
    "heartbeat": Report(),
    "heartbeat-timeout": Report(owner=_suspicion),
    "observe-eof": Report(owner=_suspicion),
    "probe-owner": Report(applied=_proves_death, owner=_probed),
    "compaction": Report(applied=first_compaction_occurrence, earns="continuation"),
    "ack-continuation": Report(applied=first_of_its_id),
    "provider-failure": Report(applied=first_of_its_id, writes=outage),
    "message": Report(held=_held_message),
    "ownership-contention": Report(),
}

#: The kinds of report as rules: only an acknowledgement has a condition.
RULES: dict[str, Rule] = {
    kind: Rule((C(a_continuation_earned, "unknown-occurrence"),) if kind == "ack-continuation"
               else (), report)
    for kind in REPORTS
}
