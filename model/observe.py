"""The observable projection of a model state, in the wire shape of
``docs/vocabulary.md``: what lockstep compares with the implementation.

``Names`` interns the strings traces use for content ids and sessions into the
small ints the model computes with (0 is "none"), and maps them back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .projections import plan, recovery_rank, status
from .predicates import graph_saved
from .state import State, TaskState
from .vocab import (
    AttemptState, Disposition, DecisionKind, Code, Exit, Failure, OwnerSeen, Phase, Reason, Receipt,
    ReviewPhase, ReviewVerdict, Status,
)


@dataclass
class Names:
    """Two-way interning of content ids, sessions, capability tokens and external waits'
    correlation ids between trace strings and model ints."""

    content: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    correlations: dict[str, int] = field(default_factory=dict)
    routes: dict[str, int] = field(default_factory=dict)

    def cid(self, name: str | None) -> int:
        return _intern(self.content, name)

    def sid(self, name: str | int | None) -> int:
        return _intern(self.sessions, None if name is None else str(name))

    def tid(self, name: str | None) -> int:
        """A capability token's int (traces name tokens symbolically; 0: none presented)."""
        return _intern(self.tokens, name)

    def corr(self, name: str | None) -> int:
        """An external wait's correlation id's int (0: none)."""
        return _intern(self.correlations, name)

    def corrname(self, n: int) -> str | None:
        return _name(self.correlations, n, "w")

    def rid(self, name: str | None) -> int:
        """A provider route's int (its provider/model/endpoint-digest name; 0: none)."""
        return _intern(self.routes, name)

    def rname(self, n: int) -> str | None:
        return _name(self.routes, n, "r")

    def cname(self, n: int) -> str | None:
        return _name(self.content, n, "#")

    def sname(self, n: int) -> str | None:
        return _name(self.sessions, n, "#")

    def tname(self, n: int) -> str | None:
        return _name(self.tokens, n, "t")


def _intern(table: dict[str, int], name: str | None) -> int:
    """The int a name stands for (the next free one the first time; 0 for none)."""
    if name is None or name == "":
        return 0
    if name not in table:
        table[name] = len(table) + 1
    return table[name]


def _name(table: dict[str, int], n: int, prefix: str) -> str | None:
    """The name an int stands for (``prefix`` + the int for one never named; None for 0)."""
    if n == 0:
        return None
    for k, v in table.items():
        if v == n:
            return k
    return f"{prefix}{n}"


def _owner(t: TaskState, names: Names) -> dict | None:
    if t.attempt_state != AttemptState.RUNNING:
        return None
    return {"pid": t.owner_pid, "birth": t.owner_birth, "session": names.sname(t.session),
            "wrapper-epoch": t.wrapper_epoch, "child-epoch": t.child_epoch}


#: The archive's receipts, projected as evidence of the task (kind, digest).
ARCHIVE_RECEIPTS = ("confirm-archive", "archive", "propose-archive")
#: The current attempt's chat, projected as evidence of the task (kind, its opening key).
CHAT_RECEIPTS = ("request-chat", "reconcile-chat")


def archive_evidence(t, names: Names) -> list[list]:
    """The archive's receipts as the evidence they are recorded as: the confirmation, the
    archive and the backlog's proposal, each by the digest it names; and the current
    attempt's chat creation request and its reconciliation, by the attempt's opening key
    (its fence)."""
    chat = [[kind, str(t.fence)] for kind, v in zip(CHAT_RECEIPTS, (t.chat_request, t.chat_reconciled))
            if v != 0 and v == t.fence]
    return chat + [[kind, names.cname(v)] for kind, v in zip(
        ARCHIVE_RECEIPTS, (t.archive_confirmed, t.archived, t.archive_proposed)) if v != 0]


def observe_review(t: TaskState, names: Names) -> dict[str, Any]:
    """The review valve of a task: its phase, manifest, verdicts and publication."""
    return {"phase": ReviewPhase(t.review_phase).label, "manifest": names.cname(t.manifest),
            "flip": ReviewVerdict(t.flip).label, "evaluation": ReviewVerdict(t.evaluation).label,
            "publication": names.cname(t.publication), "publications": t.publications,
            "failure": Failure(t.review_failure).label}


def observe_task(s: State, i: int, names: Names) -> dict[str, Any]:
    t = s.tasks[i]
    p = plan(s, i)
    c = names.cname
    return {
        "status": Status(status(t)).label,
        "dependency-satisfied": bool(graph_saved(t)),
        "plan": p.to_json() if p is not None else None,
        "generation": t.generation, "attempt": t.attempt, "fence": t.fence,
        "lease-epoch": t.lease_epoch,
        "attempt-state": AttemptState(t.attempt_state).label,
        "owner-seen": OwnerSeen(t.owner_seen).label,
        "owner": _owner(t, names),
        "leases": {"worktree": bool(t.worktree_lease), "session": bool(t.session_lease),
                   "finish": bool(t.finish_lease)},
        "phase": Phase(t.phase).label, "exit": Exit(t.exit).label, "reason": Reason(t.reason).label,
        "revision": t.revision,
        "candidate": c(t.candidate), "base": c(t.base), "version": t.version,
        "disposition": Disposition(t.disposition).label,
        "receipts": {Receipt(k).label: {"fence": b.fence, "candidate": c(b.candidate), "base": c(b.base)}
                     for k, b in enumerate(t.receipts) if b.fence != 0},
        "worktree": {"present": bool(t.worktree_present), "content": c(t.worktree),
                     "origin": c(t.origin)},
        "saved-work": c(t.saved_work), "retained": c(t.retained), "imported": c(t.imported),
        "completion-receipt": c(t.completion_receipt),
        "promotions": t.promotions, "effect-done": bool(t.effect_done), "deadline": t.deadline,
        "recovery-rank": recovery_rank(t),
        "counters": {"compactions": t.compactions, "continuations": t.continuations,
                     "acks": t.acks, "provider-failures": t.provider_failures,
                     "messages": t.messages, "logs": t.logs},
        "evidence": sorted([list(e) for e in t.evidence] + archive_evidence(t, names)),
        "failure": Failure(t.failure).label, "retries": t.retries,
        "waiting-on": names.corrname(t.waiting_on), "wait-deadline": t.wait_deadline,
        "wait-expired": bool(t.wait_expired),
        "paused": bool(t.paused), "not-before": t.not_before,
        "route": names.rname(t.route),
        "route-breaker": "unavailable" if t.route_unavailable else "available",
        "route-probe-at": t.probe_at,
        "reopening": bool(t.reopening),
        "review": observe_review(t, names),
        "assigned": bool(t.assigned), "legacy-done": bool(t.legacy_done),
        "reconstructed": bool(t.reconstructed), "abandoned": bool(t.abandoned),
    }


def observe(s: State, names: Names) -> dict[str, Any]:
    """The whole observable projection."""
    journal = {}
    for key, e in s.journal:
        d = {"decision": DecisionKind(e.kind).label}
        if e.code != Code.NONE:
            d["code"] = Code(e.code).label
        journal[key] = d
    return {
        "target": names.cname(s.target),
        "now": s.now,
        "tasks": {name: observe_task(s, i, names) for i, name in enumerate(s.graph.tasks)},
        "journal": journal,
    }
