"""The wire vocabulary of docs/vocabulary.md, as the implementation speaks it.

Every label is the kebab-case string used on the wire; the implementation
stores and compares the labels themselves. Authority, capability and
transaction kinds, and the legal SaveTransaction edges, are static tables.
"""
from __future__ import annotations

# --- actors and kinds -----------------------------------------------------------

ACTORS = (
    "worker", "wrapper", "broker", "process-observer", "worktree-observer", "daemon",
    "validator", "evaluator", "promoter", "cleanup", "operator", "legacy-import", "reader",
)

KINDS = (
    "assign", "dispatch", "retry", "resume",
    "heartbeat", "heartbeat-timeout", "observe-eof", "probe-owner", "compaction",
    "ack-continuation", "provider-failure", "message", "ownership-contention", "log",
    "fail", "declare-lost",
    "submit", "quiesce", "save-work", "seal-candidate", "validate", "request-review", "accept",
    "record-disposition", "prepare-effect", "commit-effect", "prepare-cleanup", "commit-cleanup",
    "save-graph", "mark-repair", "revise", "block-upgrade",
    "reset", "abandon", "reconcile", "reconstruct", "legacy-done",
    "confirm-archive", "archive",
    "park", "deliver", "expire-wait",
    "reopen",
    "pause", "unpause",
    "submit-manifest", "record-flip", "record-eval", "publish", "complete", "fail-review",
    "retry-review",
    "receipt-completion",
    "probe-route",
    "propose-archive", "request-chat", "reconcile-chat",
)

_ANY = frozenset(ACTORS)
_DRIVERS = frozenset({"wrapper", "daemon"})

#: kind -> the actors allowed to send it.
AUTHORITY: dict[str, frozenset[str]] = {
    "assign": frozenset({"daemon"}),
    "dispatch": frozenset({"daemon"}),
    "retry": frozenset({"operator"}),
    "resume": frozenset({"wrapper", "daemon"}),
    "heartbeat": frozenset({"worker", "wrapper"}),
    "heartbeat-timeout": frozenset({"daemon", "process-observer"}),
    "observe-eof": frozenset({"wrapper", "process-observer"}),
    "probe-owner": frozenset({"process-observer", "daemon"}),
    "compaction": frozenset({"wrapper"}),
    "ack-continuation": frozenset({"wrapper"}),
    "provider-failure": frozenset({"wrapper", "daemon"}),
    "message": _ANY,
    "ownership-contention": _ANY,
    "log": frozenset({"worker", "wrapper"}),
    "fail": frozenset({"worker", "wrapper"}),
    "declare-lost": frozenset({"daemon"}),
    "submit": frozenset({"worker", "wrapper", "broker"}),
    "quiesce": _DRIVERS,
    "save-work": _DRIVERS,
    "seal-candidate": frozenset({"daemon"}),
    "validate": frozenset({"validator"}),
    "request-review": frozenset({"daemon"}),
    "accept": frozenset({"evaluator", "daemon"}),
    "record-disposition": frozenset({"worker", "wrapper", "broker", "daemon"}),
    "prepare-effect": frozenset({"promoter", "daemon"}),
    "commit-effect": frozenset({"promoter", "daemon"}),
    "prepare-cleanup": frozenset({"cleanup", "daemon"}),
    "commit-cleanup": frozenset({"cleanup", "daemon"}),
    "save-graph": frozenset({"daemon"}),
    "mark-repair": frozenset({"daemon"}),
    "revise": frozenset({"worker", "operator"}),
    "block-upgrade": frozenset({"daemon"}),
    "reset": frozenset({"operator"}),
    "abandon": frozenset({"operator"}),
    "reconcile": frozenset({"operator"}),
    "reconstruct": frozenset({"operator"}),
    "legacy-done": frozenset({"legacy-import"}),
    "confirm-archive": frozenset({"operator"}),
    "archive": frozenset({"daemon", "cleanup"}),
    "park": frozenset({"worker", "wrapper"}),
    "deliver": frozenset({"operator", "daemon"}),
    "expire-wait": frozenset({"daemon"}),
    "reopen": frozenset({"operator"}),
    "pause": frozenset({"operator"}),
    "unpause": frozenset({"operator"}),
    "submit-manifest": frozenset({"worker", "wrapper"}),
    "record-flip": frozenset({"validator"}),
    "record-eval": frozenset({"evaluator"}),
    "publish": frozenset({"promoter", "daemon"}),
    "complete": frozenset({"worker", "wrapper"}),
    "fail-review": frozenset({"worker", "wrapper"}),
    "retry-review": frozenset({"operator"}),
    "receipt-completion": frozenset({"worker", "wrapper"}),
    "probe-route": frozenset({"daemon"}),
    "propose-archive": frozenset({"daemon", "cleanup"}),
    "request-chat": frozenset({"daemon"}),
    "reconcile-chat": frozenset({"daemon"}),
}

#: Kinds that step the SaveTransaction; the request names the phase and revision it expects.
TRANSACTION_KINDS = frozenset({
    "submit", "quiesce", "save-work", "seal-candidate", "validate", "request-review", "accept",
    "record-disposition", "prepare-effect", "commit-effect", "prepare-cleanup", "commit-cleanup",
    "save-graph", "mark-repair", "revise", "block-upgrade",
})

#: Kinds refused unless they name K, the current attempt's capability tuple, exactly.
NEEDS_CAPABILITY = TRANSACTION_KINDS | frozenset({
    "resume", "heartbeat", "heartbeat-timeout", "observe-eof", "probe-owner", "compaction",
    "ack-continuation", "provider-failure", "log", "fail", "declare-lost", "park",
    "submit-manifest", "complete", "fail-review", "receipt-completion",
    "request-chat", "reconcile-chat",
})

#: Kinds about an external wait; their ``correlation`` field (a name) must be present.
WAIT_NAMING_KINDS = frozenset({"park", "deliver"})

# --- decisions and codes --------------------------------------------------------

APPLIED, EVIDENCE_ONLY, DUPLICATE, REJECTED = "applied", "evidence-only", "duplicate", "rejected"

CODES = (
    "stale-capability", "idempotency-conflict", "illegal-phase-edge", "cas-moved",
    "candidate-mismatch", "not-authorized", "terminal-already", "unknown-attempt",
    "dependency-not-done", "unknown-task", "assignment-required", "owner-not-proven-dead",
    "continuation-unproven", "review-required", "worktree-missing", "effect-not-observed",
    "held", "evidence-missing", "nothing-retained", "unknown-occurrence", "attempt-live",
    "not-authenticated", "role-not-held",
    "base-mismatch", "bad-name", "worktree-unsaved", "token-mismatch", "archive-unconfirmed",
    "retry-budget-spent", "repair-required", "waiting", "not-waiting", "wait-not-due",
    "dependency-reopened", "paused", "not-due",
    "manifest-invalid", "manifest-mismatch", "review-not-passed", "main-moved",
    "publication-unverified", "route-unavailable", "route-available", "probe-not-due",
    "chat-requested", "chat-unrequested",
)

#: Why an attempt failed (``fail``): unclassified, nothing saved, zero progress and provider
#: failures are retried automatically within the task's retry budget; a semantic failure (the
#: work itself was rejected) holds the task until the operator retries it.
FAILURES = ("none", "nothing-saved", "zero-progress", "provider", "semantic")
#: Automatic retries after failed or lost attempts, per task and generation, by default.
DEFAULT_RETRY_BUDGET = 2

#: Senders acting as the attempt's process: with K they also send its capability token (the
#: database keeps only its hash), and ``resume`` needs the token in every case. Service roles prove themselves by their credential.
TOKEN_BEARERS = frozenset({"worker", "wrapper", "broker"})
#: Kinds that start an attempt or continue one; ``mint`` is the sha256 of the token the new
#: process will send (the secret stays with whoever opened it).
MINTING_KINDS = frozenset({"dispatch", "retry", "resume"})

# --- attempts, owners, transaction --------------------------------------------------

NONE = "none"
RUNNING = "running"
ATTEMPT_STATES = ("none", "running", "succeeded", "failed", "lost", "abandoned", "superseded",
                  "parked")
OWNER_SEEN = ("unverified", "live", "suspect", "dead")

PHASES = (
    "absent", "prepared", "quiescing", "work-saved", "candidate-sealed", "validated",
    "awaiting-acceptance", "accepted", "disposition-recorded", "effect-prepared",
    "effect-committed", "cleanup-prepared", "cleanup-committed", "graph-saved",
)
EXITS = ("none", "needs-repair", "aborted-preserved", "upgrade-blocked", "needs-reconciliation")
REASONS = ("none", "validation-failed", "review-failed", "target-moved", "legacy-unproven",
           "version-skew", "operator-abort", "protected-path")
DISPOSITIONS = ("none", "land", "deliver", "report")
VERDICTS = ("pass", "fail", "not-required")

# --- the review valve ----------------------------------------------------------------

#: What a completion manifest publishes ("none": no manifest yet).
CONTRACTS = ("none", "land", "report", "explore")
#: A reviewer's (FLIP's, the evaluator's) verdict on one exact manifest ("absent": none yet).
REVIEW_VERDICTS = ("absent", "pass", "reject", "unavailable", "incomplete-evidence")
#: Where a task's review valve stands.
REVIEW_PHASES = ("working", "review-blocked", "review-unavailable", "accepted", "published",
                 "done", "failed")

#: Receipts, in GraphSave order; each is bound to (fence, candidate, base).
RECEIPTS = ("work-save", "candidate", "validation", "review", "disposition", "effect",
            "cleanup", "graph-save")

STATUSES = ("open", "in-progress", "completing", "needs-repair", "needs-reconciliation",
            "upgrade-blocked", "aborted-preserved", "abandoned", "done")

#: The legal main-line edges: kind -> (from phases, to phase).
EDGES: dict[str, tuple[frozenset[str], str]] = {
    "submit": (frozenset({"absent"}), "prepared"),
    "quiesce": (frozenset({"prepared"}), "quiescing"),
    "save-work": (frozenset({"quiescing"}), "work-saved"),
    "seal-candidate": (frozenset({"work-saved"}), "candidate-sealed"),
    "validate": (frozenset({"candidate-sealed"}), "validated"),
    "request-review": (frozenset({"validated"}), "awaiting-acceptance"),
    "accept": (frozenset({"validated", "awaiting-acceptance"}), "accepted"),
    "record-disposition": (frozenset({"accepted"}), "disposition-recorded"),
    "prepare-effect": (frozenset({"disposition-recorded"}), "effect-prepared"),
    "commit-effect": (frozenset({"effect-prepared"}), "effect-committed"),
    "prepare-cleanup": (frozenset({"effect-committed"}), "cleanup-prepared"),
    "commit-cleanup": (frozenset({"cleanup-prepared"}), "cleanup-committed"),
    "save-graph": (frozenset({"cleanup-committed"}), "graph-saved"),
}

#: Phases holding the terminal reservation before any external effect.
PRE_EFFECT_PHASES = frozenset({
    "prepared", "quiescing", "work-saved", "candidate-sealed", "validated",
    "awaiting-acceptance", "accepted", "disposition-recorded",
})

#: Phases after the external effect was prepared (re-observe, never redo).
EFFECT_PHASES = frozenset({"effect-prepared", "effect-committed", "cleanup-prepared",
                           "cleanup-committed"})

#: Phases at or past a prepared effect, Done included; a dependent in one of them (or with its
#: effect already done) refuses a reopen of what it depends on.
COMMITTED_PHASES = EFFECT_PHASES | frozenset({"graph-saved"})

#: Receipts a GraphSave needs (everything but itself).
SAVE_GRAPH_NEEDS = RECEIPTS[:-1]

# --- planner ----------------------------------------------------------------------

WAYS = ("runnable", "live-owner", "wait", "scheduled", "hold")
ACTIONS = ("dispatch", "probe-owner", "declare-lost", "drive-transaction", "mark-repair",
           "await-dependencies", "await-review", "await-validation", "await-operator", "assign",
           "await-external", "expire-wait", "resume", "await-not-before",
           "await-handoff", "probe-route", "await-route-probe",
           "await-archive-confirmation", "archive", "reconcile-chat", "request-chat")

#: Evidence kinds as recorded per task (deduplicated by (kind, id)): the kind of the request
#: that reported it, and ``continuation`` (earned by a compaction).
EVIDENCE_LABELS = ("heartbeat", "heartbeat-timeout", "observe-eof", "probe-owner", "compaction",
                   "continuation", "ack-continuation", "provider-failure", "message",
                   "ownership-contention", "fail", "legacy-done", "confirm-archive", "archive",
                   "deliver", "propose-archive", "request-chat", "reconcile-chat")

#: Evidence kinds recorded under another name before schema version 4: the ledger keeps
#: them as written (its hash chain), and they are read as the request kind's name.
FORMER_EVIDENCE_LABELS = {"eof": "observe-eof", "probe": "probe-owner",
                          "ack": "ack-continuation", "contention": "ownership-contention",
                          "terminal-report": "fail"}
