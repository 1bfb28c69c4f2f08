"""The kernel's vocabulary: one name per concept, used unchanged by the model,
the implementation's API, trace files, hypothesis rules and the documents.

Every enum is an ``IntEnum`` so that the same rule code runs on concrete values
and on z3 integer terms; ``label`` is the kebab-case name used on the wire.
"""
from __future__ import annotations

from enum import IntEnum

#: Each labelled enum's members by label, made at its first ``parse``.
_BY_LABEL: dict[type, dict[str, "Labelled"]] = {}


class Labelled(IntEnum):
    """An IntEnum whose wire name is the kebab-case form of its member name."""

    @property
    def label(self) -> str:
        return self._name_.lower().replace("_", "-")

    @classmethod
    def parse(cls, text: str):
        """The member whose label is ``text``; ValueError names the allowed labels."""
        table = _BY_LABEL.get(cls) or _BY_LABEL.setdefault(cls, {m.label: m for m in cls})
        if isinstance(text, str) and text in table:
            return table[text]
        allowed = ", ".join(m.label for m in cls)
        raise ValueError(f"unknown {cls.__name__} {text!r} (expected one of: {allowed})")

    @classmethod
    def labels(cls) -> list[str]:
        return [m.label for m in cls]


class Actor(Labelled):
    """Who sends a request. Authority is a static table (`AUTHORITY`)."""

    WORKER = 1
    WRAPPER = 2
    BROKER = 3
    PROCESS_OBSERVER = 4
    WORKTREE_OBSERVER = 5
    DAEMON = 6
    VALIDATOR = 7
    EVALUATOR = 8
    PROMOTER = 9
    CLEANUP = 10
    OPERATOR = 11
    LEGACY_IMPORT = 12
    READER = 13


#: The model's intruder: a principal that knows every public fact (K, keys, names, sessions),
#: may send any request and holds the roles of the attempt's own process (worker, wrapper,
#: broker: ``TOKEN_BEARERS``), as any worker on the host does, but no attempt's token (BRIEF §8).
INTRUDER = "intruder"


class Kind(Labelled):
    """Every request kind the kernel accepts."""

    # admission and attempts
    ASSIGN = 1
    DISPATCH = 2
    RETRY = 3
    RESUME = 4
    # evidence
    HEARTBEAT = 10
    HEARTBEAT_TIMEOUT = 11
    OBSERVE_EOF = 12
    PROBE_OWNER = 13
    COMPACTION = 14
    ACK_CONTINUATION = 15
    PROVIDER_FAILURE = 16
    MESSAGE = 17
    OWNERSHIP_CONTENTION = 18
    LOG = 19
    # terminal reports and convergence
    FAIL = 20
    DECLARE_LOST = 21
    # the SaveTransaction, one kind per edge
    SUBMIT = 30
    QUIESCE = 31
    SAVE_WORK = 32
    SEAL_CANDIDATE = 33
    VALIDATE = 34
    REQUEST_REVIEW = 35
    ACCEPT = 36
    RECORD_DISPOSITION = 37
    PREPARE_EFFECT = 38
    COMMIT_EFFECT = 39
    PREPARE_CLEANUP = 40
    COMMIT_CLEANUP = 41
    SAVE_GRAPH = 42
    MARK_REPAIR = 43
    REVISE = 44
    BLOCK_UPGRADE = 45
    # operator and migration
    RESET = 50
    ABANDON = 51
    RECONCILE = 52
    RECONSTRUCT = 53
    LEGACY_DONE = 54
    # archiving a Done task
    CONFIRM_ARCHIVE = 55
    ARCHIVE = 56
    # external waits: a task parked until the matching evidence arrives
    PARK = 57
    DELIVER = 58
    EXPIRE_WAIT = 59
    # reopening a Done task into a new generation
    REOPEN = 60
    # the operator pauses a task's admission, and resumes it (from a not-before time)
    PAUSE = 61
    UNPAUSE = 62
    # the review valve: the source worker's immutable completion manifest, its two reviews
    # (FLIP and evaluation), its publication under the task's contract and its completion
    SUBMIT_MANIFEST = 63
    RECORD_FLIP = 64
    RECORD_EVAL = 65
    PUBLISH = 66
    COMPLETE = 67
    FAIL_REVIEW = 68
    RETRY_REVIEW = 69
    # the owner's completion receipted on its own, before the transaction opens (WG's runtime
    # reducer: a worker's finish receipted, the transaction opened by a later submit)
    RECEIPT_COMPLETION = 70
    # a provider route's breaker: the daemon's health probe of the task's route, its effect
    # acknowledged (succeeded: the breaker closes; failed: it is armed again)
    PROBE_ROUTE = 80
    # the daemon's archive backlog: a Done task proposed for archiving, by its result's digest
    PROPOSE_ARCHIVE = 76
    # the attempt's chat: one creation request under its attempt-opening key, then reconciled
    REQUEST_CHAT = 77
    RECONCILE_CHAT = 78


class DecisionKind(Labelled):
    """Exactly one of these is the answer to every request."""

    APPLIED = 1
    EVIDENCE_ONLY = 2
    DUPLICATE = 3
    REJECTED = 4


class Code(Labelled):
    """Why a request was rejected (``NONE`` for every other decision)."""

    NONE = 0
    STALE_CAPABILITY = 1
    IDEMPOTENCY_CONFLICT = 2
    ILLEGAL_PHASE_EDGE = 3
    CAS_MOVED = 4
    CANDIDATE_MISMATCH = 5
    NOT_AUTHORIZED = 6
    TERMINAL_ALREADY = 7
    UNKNOWN_ATTEMPT = 8
    DEPENDENCY_NOT_DONE = 9
    UNKNOWN_TASK = 10
    ASSIGNMENT_REQUIRED = 11
    OWNER_NOT_PROVEN_DEAD = 12
    CONTINUATION_UNPROVEN = 13
    REVIEW_REQUIRED = 14
    WORKTREE_MISSING = 15      # no worktree to capture (save-work, revise)
    EFFECT_NOT_OBSERVED = 16
    HELD = 17
    EVIDENCE_MISSING = 18
    NOTHING_RETAINED = 19
    UNKNOWN_OCCURRENCE = 20
    ATTEMPT_LIVE = 21
    NOT_AUTHENTICATED = 22
    ROLE_NOT_HELD = 23
    BASE_MISMATCH = 24
    BAD_NAME = 25
    WORKTREE_UNSAVED = 26      # the worktree holds bytes nothing saved (commit-cleanup)
    TOKEN_MISMATCH = 27        # the attempt's capability token was not presented
    ARCHIVE_UNCONFIRMED = 28   # no confirmation receipt names the digest an archive names
    RETRY_BUDGET_SPENT = 29    # the task's automatic retries after failures are used up
    REPAIR_REQUIRED = 30       # a semantic failure waits for a repair, never an automatic retry
    WAITING = 31               # the task waits on an external event: only its evidence releases it
    NOT_WAITING = 32           # nothing waits on this task (expire-wait)
    WAIT_NOT_DUE = 35          # the wait has no deadline, or it has not passed (expire-wait)
    DEPENDENCY_REOPENED = 33   # a dependency was reopened: no effect on its old generation
    PAUSED = 36                # the operator paused the task: nothing opens an attempt on it
    NOT_DUE = 37               # the task's not-before time has not come: nothing opens an attempt
    MANIFEST_INVALID = 38      # a completion manifest with a zero id, digest or requirement, an
                               # unresolvable output, a protected path or no contract
    MANIFEST_MISMATCH = 39     # no manifest, or another manifest or requirements than the current one
    REVIEW_NOT_PASSED = 40     # FLIP (and evaluation) have not passed the exact current manifest
    MAIN_MOVED = 41            # a Land manifest's integrated main is not the main observed
    PUBLICATION_UNVERIFIED = 42  # the publication failed, or its outputs do not match or resolve
    ROUTE_UNAVAILABLE = 60     # the task's provider route's breaker is open: no attempt opens on it
    ROUTE_AVAILABLE = 61       # probe-route: the task's route's breaker is not open
    PROBE_NOT_DUE = 62         # probe-route: the breaker's next probe time has not come
    CHAT_REQUESTED = 56        # a chat creation request was made under this attempt's key already
    CHAT_UNREQUESTED = 57      # no chat creation request was made under this attempt's key


class AttemptState(Labelled):
    """The current attempt of a task. Everything but NONE and RUNNING is terminal."""

    NONE = 0
    RUNNING = 1
    SUCCEEDED = 2
    FAILED = 3
    LOST = 4
    ABANDONED = 5
    SUPERSEDED = 6
    PARKED = 7                 # closed on an external wait; a dispatch follows its evidence


TERMINAL_ATTEMPT = (
    AttemptState.SUCCEEDED,
    AttemptState.FAILED,
    AttemptState.LOST,
    AttemptState.ABANDONED,
    AttemptState.SUPERSEDED,
    AttemptState.PARKED,
)


class OwnerSeen(Labelled):
    """What the kernel has proven about the exact owner (pid + birth time)."""

    UNVERIFIED = 0
    LIVE = 1
    SUSPECT = 2
    DEAD = 3


class Phase(Labelled):
    """SaveTransaction main-line phases, in order; no row is skipped."""

    ABSENT = 0
    PREPARED = 1
    QUIESCING = 2
    WORK_SAVED = 3
    CANDIDATE_SEALED = 4
    VALIDATED = 5
    AWAITING_ACCEPTANCE = 6
    ACCEPTED = 7
    DISPOSITION_RECORDED = 8
    EFFECT_PREPARED = 9
    EFFECT_COMMITTED = 10
    CLEANUP_PREPARED = 11
    CLEANUP_COMMITTED = 12
    GRAPH_SAVED = 13


class Exit(Labelled):
    """SaveTransaction side exits. ``NONE`` while the main line is followed."""

    NONE = 0
    NEEDS_REPAIR = 1
    ABORTED_PRESERVED = 2
    UPGRADE_BLOCKED = 3
    NEEDS_RECONCILIATION = 4


class Failure(Labelled):
    """Why an attempt failed, as its report says (``fail``): what may follow it."""

    NONE = 0                   # unclassified (or lost): an automatic retry, within the budget
    NOTHING_SAVED = 1          # orphaned before anything was saved: an automatic retry
    ZERO_PROGRESS = 2          # the attempt made no progress: an automatic retry
    PROVIDER = 3               # the provider failed: an automatic retry imports what was kept
    SEMANTIC = 4               # the work itself was rejected: a repair, never an automatic retry


#: Automatic retries (dispatches after a failed or lost attempt) a task gets per generation
#: unless its policy says otherwise.
DEFAULT_RETRY_BUDGET = 2


class Disposition(Labelled):
    """What the task-owned result does: land on the target, deliver or report."""

    NONE = 0
    LAND = 1
    DELIVER = 2
    REPORT = 3


class Contract(Labelled):
    """What a task's completion manifest publishes: a commit on main, a report, an exploration."""

    NONE = 0
    LAND = 1
    REPORT = 2
    EXPLORE = 3


class ReviewVerdict(Labelled):
    """A reviewer's (FLIP's or the evaluator's) verdict on one exact manifest."""

    ABSENT = 0
    PASS = 1
    REJECT = 2
    UNAVAILABLE = 3            # the reviewer could not run: not a rejection of the work
    INCOMPLETE_EVIDENCE = 4


class ReviewPhase(Labelled):
    """Where a task's review valve stands (its source worker keeps the task throughout)."""

    WORKING = 0
    REVIEW_BLOCKED = 1         # a reviewer rejected the manifest: the same worker repairs it
    REVIEW_UNAVAILABLE = 2     # a reviewer could not run: the review is asked again
    ACCEPTED = 3               # both reviews passed the exact manifest
    PUBLISHED = 4              # the reviewed outputs are published under the contract
    DONE = 5                   # terminal: every later event is inert
    FAILED = 6


class Verdict(Labelled):
    """A validator's or evaluator's verdict on one exact candidate."""

    PASS = 1
    FAIL = 2
    NOT_REQUIRED = 3


class Reason(Labelled):
    """Why a transaction left the main line, or why a task is held."""

    NONE = 0
    VALIDATION_FAILED = 1
    REVIEW_FAILED = 2
    TARGET_MOVED = 3
    LEGACY_UNPROVEN = 4
    VERSION_SKEW = 5
    OPERATOR_ABORT = 6
    PROTECTED_PATH = 7         # the candidate touches a protected control-plane path


class Receipt(Labelled):
    """Receipts a GraphSave needs; each is bound to (fence, candidate, base)."""

    WORK_SAVE = 0
    CANDIDATE = 1
    VALIDATION = 2
    REVIEW = 3
    DISPOSITION = 4
    EFFECT = 5
    CLEANUP = 6
    GRAPH_SAVE = 7


class Status(Labelled):
    """Task status: a projection of evidence, never written directly."""

    OPEN = 0
    IN_PROGRESS = 1
    COMPLETING = 2
    NEEDS_REPAIR = 3
    NEEDS_RECONCILIATION = 4
    UPGRADE_BLOCKED = 5
    ABORTED_PRESERVED = 6
    ABANDONED = 7
    DONE = 8


class Way(Labelled):
    """The planner's one way forward for an unfinished task."""

    NONE = 0
    RUNNABLE = 1
    LIVE_OWNER = 2
    WAIT = 3
    SCHEDULED = 4
    HOLD = 5


class Action(Labelled):
    """What a runnable or scheduled way forward does (a request kind, mostly)."""

    NONE = 0
    DISPATCH = 1
    PROBE_OWNER = 2
    DECLARE_LOST = 3
    DRIVE_TRANSACTION = 4
    MARK_REPAIR = 5
    AWAIT_DEPENDENCIES = 6
    AWAIT_REVIEW = 7
    AWAIT_VALIDATION = 8
    AWAIT_OPERATOR = 9
    ASSIGN = 10
    AWAIT_EXTERNAL = 11
    EXPIRE_WAIT = 12
    RESUME = 13
    AWAIT_NOT_BEFORE = 14
    AWAIT_HANDOFF = 15
    PROBE_ROUTE = 20
    AWAIT_ROUTE_PROBE = 21
    AWAIT_ARCHIVE_CONFIRMATION = 26
    ARCHIVE = 27
    RECONCILE_CHAT = 28
    REQUEST_CHAT = 29


# --- authority ---------------------------------------------------------------

A = Actor
K = Kind
_ANY = frozenset(Actor)
_TX_DRIVERS = frozenset({A.WRAPPER, A.DAEMON})

AUTHORITY: dict[Kind, frozenset[Actor]] = {
    K.ASSIGN: frozenset({A.DAEMON}),
    K.DISPATCH: frozenset({A.DAEMON}),
    K.RETRY: frozenset({A.OPERATOR}),
    K.RESUME: frozenset({A.WRAPPER, A.DAEMON}),
    K.HEARTBEAT: frozenset({A.WORKER, A.WRAPPER}),
    K.HEARTBEAT_TIMEOUT: frozenset({A.DAEMON, A.PROCESS_OBSERVER}),
    K.OBSERVE_EOF: frozenset({A.WRAPPER, A.PROCESS_OBSERVER}),
    K.PROBE_OWNER: frozenset({A.PROCESS_OBSERVER, A.DAEMON}),
    K.COMPACTION: frozenset({A.WRAPPER}),
    K.ACK_CONTINUATION: frozenset({A.WRAPPER}),
    K.PROVIDER_FAILURE: frozenset({A.WRAPPER, A.DAEMON}),
    K.MESSAGE: _ANY,
    K.OWNERSHIP_CONTENTION: _ANY,
    K.LOG: frozenset({A.WORKER, A.WRAPPER}),
    K.FAIL: frozenset({A.WORKER, A.WRAPPER}),
    K.DECLARE_LOST: frozenset({A.DAEMON}),
    K.SUBMIT: frozenset({A.WORKER, A.WRAPPER, A.BROKER}),
    K.QUIESCE: _TX_DRIVERS,
    K.SAVE_WORK: _TX_DRIVERS,
    K.SEAL_CANDIDATE: frozenset({A.DAEMON}),
    K.VALIDATE: frozenset({A.VALIDATOR}),
    K.REQUEST_REVIEW: frozenset({A.DAEMON}),
    K.ACCEPT: frozenset({A.EVALUATOR, A.DAEMON}),
    K.RECORD_DISPOSITION: frozenset({A.WORKER, A.WRAPPER, A.BROKER, A.DAEMON}),
    K.PREPARE_EFFECT: frozenset({A.PROMOTER, A.DAEMON}),
    K.COMMIT_EFFECT: frozenset({A.PROMOTER, A.DAEMON}),
    K.PREPARE_CLEANUP: frozenset({A.CLEANUP, A.DAEMON}),
    K.COMMIT_CLEANUP: frozenset({A.CLEANUP, A.DAEMON}),
    K.SAVE_GRAPH: frozenset({A.DAEMON}),
    K.MARK_REPAIR: frozenset({A.DAEMON}),
    K.REVISE: frozenset({A.WORKER, A.OPERATOR}),
    K.BLOCK_UPGRADE: frozenset({A.DAEMON}),
    K.RESET: frozenset({A.OPERATOR}),
    K.ABANDON: frozenset({A.OPERATOR}),
    K.RECONCILE: frozenset({A.OPERATOR}),
    K.RECONSTRUCT: frozenset({A.OPERATOR}),
    K.LEGACY_DONE: frozenset({A.LEGACY_IMPORT}),
    K.CONFIRM_ARCHIVE: frozenset({A.OPERATOR}),
    K.ARCHIVE: frozenset({A.DAEMON, A.CLEANUP}),
    K.PARK: frozenset({A.WORKER, A.WRAPPER}),
    K.DELIVER: frozenset({A.OPERATOR, A.DAEMON}),
    K.EXPIRE_WAIT: frozenset({A.DAEMON}),
    K.REOPEN: frozenset({A.OPERATOR}),
    K.PAUSE: frozenset({A.OPERATOR}),
    K.UNPAUSE: frozenset({A.OPERATOR}),
    K.SUBMIT_MANIFEST: frozenset({A.WORKER, A.WRAPPER}),
    K.RECORD_FLIP: frozenset({A.VALIDATOR}),
    K.RECORD_EVAL: frozenset({A.EVALUATOR}),
    K.PUBLISH: frozenset({A.PROMOTER, A.DAEMON}),
    K.COMPLETE: frozenset({A.WORKER, A.WRAPPER}),
    K.FAIL_REVIEW: frozenset({A.WORKER, A.WRAPPER}),
    K.RETRY_REVIEW: frozenset({A.OPERATOR}),
    K.RECEIPT_COMPLETION: frozenset({A.WORKER, A.WRAPPER}),
    K.PROBE_ROUTE: frozenset({A.DAEMON}),
    K.PROPOSE_ARCHIVE: frozenset({A.DAEMON, A.CLEANUP}),
    K.REQUEST_CHAT: frozenset({A.DAEMON}),
    K.RECONCILE_CHAT: frozenset({A.DAEMON}),
}

#: Kinds whose request must carry the exact capability tuple K of the current attempt.
NEEDS_CAPABILITY: frozenset[Kind] = frozenset({
    K.RESUME, K.HEARTBEAT, K.HEARTBEAT_TIMEOUT, K.OBSERVE_EOF, K.PROBE_OWNER, K.COMPACTION,
    K.ACK_CONTINUATION, K.PROVIDER_FAILURE, K.LOG, K.FAIL, K.DECLARE_LOST,
    K.SUBMIT, K.QUIESCE, K.SAVE_WORK, K.SEAL_CANDIDATE, K.VALIDATE,
    K.REQUEST_REVIEW, K.ACCEPT, K.RECORD_DISPOSITION, K.PREPARE_EFFECT,
    K.COMMIT_EFFECT, K.PREPARE_CLEANUP, K.COMMIT_CLEANUP, K.SAVE_GRAPH,
    K.MARK_REPAIR, K.REVISE, K.BLOCK_UPGRADE, K.PARK,
    K.SUBMIT_MANIFEST, K.COMPLETE, K.FAIL_REVIEW, K.RECEIPT_COMPLETION,
    K.REQUEST_CHAT, K.RECONCILE_CHAT,
})

#: The review valve's kinds: each changes only the source task's review facts (never its
#: attempt, owner or the target).
REVIEW_KINDS: frozenset[Kind] = frozenset({
    K.SUBMIT_MANIFEST, K.RECORD_FLIP, K.RECORD_EVAL, K.PUBLISH, K.COMPLETE, K.FAIL_REVIEW,
    K.RETRY_REVIEW,
})

#: The actors that speak for an attempt's own process: a request of theirs naming K must also
#: present the attempt's capability token (secret, minted when the attempt or its continuation
#: opens, handed only to that process). Service roles prove themselves by their credential.
TOKEN_BEARERS: frozenset[Actor] = frozenset({A.WORKER, A.WRAPPER, A.BROKER})

#: Kinds that open an attempt or a continuation: each mints the token it will be driven with.
MINTING_KINDS: frozenset[Kind] = frozenset({K.DISPATCH, K.RETRY, K.RESUME})

#: Kinds that name the event of an external wait (a correlation id on the wire, required).
WAIT_NAMING_KINDS: frozenset[Kind] = frozenset({K.PARK, K.DELIVER})

#: Kinds that move the SaveTransaction; each carries expected phase + revision (CAS).
TRANSACTION_KINDS: frozenset[Kind] = frozenset({
    K.SUBMIT, K.QUIESCE, K.SAVE_WORK, K.SEAL_CANDIDATE, K.VALIDATE,
    K.REQUEST_REVIEW, K.ACCEPT, K.RECORD_DISPOSITION, K.PREPARE_EFFECT,
    K.COMMIT_EFFECT, K.PREPARE_CLEANUP, K.COMMIT_CLEANUP, K.SAVE_GRAPH,
    K.MARK_REPAIR, K.REVISE, K.BLOCK_UPGRADE,
})

#: Evidence kinds: recorded by their own evidence id, never terminal on their own.
EVIDENCE_KINDS: frozenset[Kind] = frozenset({
    K.HEARTBEAT, K.HEARTBEAT_TIMEOUT, K.OBSERVE_EOF, K.PROBE_OWNER, K.COMPACTION,
    K.PROVIDER_FAILURE, K.MESSAGE, K.OWNERSHIP_CONTENTION,
})

#: The legal main-line edges of the SaveTransaction: kind -> (from phases, to phase).
EDGES: dict[Kind, tuple[tuple[Phase, ...], Phase]] = {
    K.SUBMIT: ((Phase.ABSENT,), Phase.PREPARED),
    K.QUIESCE: ((Phase.PREPARED,), Phase.QUIESCING),
    K.SAVE_WORK: ((Phase.QUIESCING,), Phase.WORK_SAVED),
    K.SEAL_CANDIDATE: ((Phase.WORK_SAVED,), Phase.CANDIDATE_SEALED),
    K.VALIDATE: ((Phase.CANDIDATE_SEALED,), Phase.VALIDATED),
    K.REQUEST_REVIEW: ((Phase.VALIDATED,), Phase.AWAITING_ACCEPTANCE),
    K.ACCEPT: ((Phase.VALIDATED, Phase.AWAITING_ACCEPTANCE), Phase.ACCEPTED),
    K.RECORD_DISPOSITION: ((Phase.ACCEPTED,), Phase.DISPOSITION_RECORDED),
    K.PREPARE_EFFECT: ((Phase.DISPOSITION_RECORDED,), Phase.EFFECT_PREPARED),
    K.COMMIT_EFFECT: ((Phase.EFFECT_PREPARED,), Phase.EFFECT_COMMITTED),
    K.PREPARE_CLEANUP: ((Phase.EFFECT_COMMITTED,), Phase.CLEANUP_PREPARED),
    K.COMMIT_CLEANUP: ((Phase.CLEANUP_PREPARED,), Phase.CLEANUP_COMMITTED),
    K.SAVE_GRAPH: ((Phase.CLEANUP_COMMITTED,), Phase.GRAPH_SAVED),
}

#: Phases in which a transaction holds the attempt's terminal reservation and
#: may still be abandoned with its work preserved (before any external effect).
PRE_EFFECT_PHASES: tuple[Phase, ...] = (
    Phase.PREPARED, Phase.QUIESCING, Phase.WORK_SAVED, Phase.CANDIDATE_SEALED,
    Phase.VALIDATED, Phase.AWAITING_ACCEPTANCE, Phase.ACCEPTED,
    Phase.DISPOSITION_RECORDED,
)
