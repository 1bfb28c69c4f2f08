"""A bounded instance of the model: a chain of tasks, bounds on attempts per generation,
generations and candidate versions, and which groups of requests are enabled
(``GROUP_KINDS``, the one definition of the request groups). Explored, simulated and
model-checked from its initial state, or the domain of an inductive proof
(``Instance.proof``). What its actors send is ``wgk.model.actions``. Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

from .protected import Protected
from .state import Graph, State, initial_state
from .vocab import Kind as K

INITIAL_TARGET = 1
#: The content id a bounded instance marks as touching a protected path (``Protected``):
#: the symbolic checks may write it in an edit; the explorer writes it with ``protected``.
PROTECTED_CONTENT = 7

#: The request kinds of each group (the environment steps are the group "env").
GROUP_KINDS: dict[str, tuple[K, ...]] = {
    "core": (K.DISPATCH, K.FAIL, K.RESUME, K.PROBE_OWNER, K.DECLARE_LOST, K.SUBMIT, K.QUIESCE,
             K.SAVE_WORK, K.SEAL_CANDIDATE, K.VALIDATE, K.REQUEST_REVIEW, K.ACCEPT,
             K.RECORD_DISPOSITION, K.PREPARE_EFFECT, K.COMMIT_EFFECT, K.MARK_REPAIR,
             K.PREPARE_CLEANUP, K.COMMIT_CLEANUP, K.SAVE_GRAPH, K.REVISE),
    "evidence": (K.HEARTBEAT, K.HEARTBEAT_TIMEOUT, K.OBSERVE_EOF, K.COMPACTION,
                 K.ACK_CONTINUATION, K.PROVIDER_FAILURE, K.MESSAGE, K.OWNERSHIP_CONTENTION, K.LOG),
    "review": (),
    "operator": (K.RETRY, K.RESET, K.ABANDON, K.RECONCILE, K.BLOCK_UPGRADE),
    "legacy": (K.ASSIGN, K.LEGACY_DONE, K.RECONCILE, K.RECONSTRUCT),
    "archive": (K.CONFIRM_ARCHIVE, K.ARCHIVE),
    # the daemon's archive backlog: a proposal the planner holds for the operator's confirmation
    "backlog": (K.PROPOSE_ARCHIVE,),
    # the running attempt's chat: one creation request under its opening key, reconciled
    "chat": (K.REQUEST_CHAT, K.RECONCILE_CHAT),
    "waits": (K.PARK, K.DELIVER, K.EXPIRE_WAIT),
    # the clock runs toward a proven-dead owner's deadline (its continuation's window)
    "clock": (),
    "reopen": (K.REOPEN,),
    # the operator's pause and a not-before time (the clock runs toward it)
    "pause": (K.PAUSE, K.UNPAUSE),
    # a provider route's breaker: a provider failure on the route opens it, the daemon's probe
    # (once due: the clock runs toward it) closes it or arms it again
    "routes": (K.PROVIDER_FAILURE, K.PROBE_ROUTE),
    # the review valve: the source worker's manifest, FLIP, the evaluation, the publication
    "valve": (K.SUBMIT_MANIFEST, K.RECORD_FLIP, K.RECORD_EVAL, K.PUBLISH, K.COMPLETE,
              K.FAIL_REVIEW, K.RETRY_REVIEW),
    # the owner's completion receipted before its transaction opens (WG's runtime reducer)
    "receipt": (K.RECEIPT_COMPLETION,),
    # the intruder sends the other groups' kinds under its own principal, posing as any role
    # (``intruder_requests``; the bounded model checker adds one template per kind and task)
    "intruder": (),
}
GROUPS = tuple(GROUP_KINDS) + ("env",)

#: Kinds of a group that the concrete enumeration does not send: their rules only
#: record evidence or count (the bounded model checker covers them symbolically;
#: sending them concretely would grow the explored space without new behaviour).
SYMBOLIC_ONLY: frozenset[K] = frozenset({K.HEARTBEAT, K.OBSERVE_EOF, K.PROVIDER_FAILURE,
                                         K.OWNERSHIP_CONTENTION, K.LOG})
#: Kinds of ``SYMBOLIC_ONLY`` that a group sends concretely all the same: a provider failure
#: on a route opens the route's breaker (more than evidence).
CONCRETE_IN: dict[str, frozenset[K]] = {"routes": frozenset({K.PROVIDER_FAILURE})}


#: The idempotency keys of an instance whose requests carry keys (``--keys``): the
#: symbolic checks draw each request's key from this many journal keys.
KEYS = 2


@dataclass(frozen=True)
class Instance:
    """A bounded instance of the model: explored, simulated, model-checked, or the domain
    of an inductive proof (``Instance.proof``; a proof reads only ``tasks``,
    ``evidence_ids`` and ``keys``, and covers every request kind)."""

    tasks: int = 2
    attempts: int = 1          # attempts per generation
    generations: int = 1       # generations per task (1 = no reset)
    groups: tuple[str, ...] = ("core", "env", "intruder")
    keys: int = 0              # idempotency keys: 0 none; n > 0 every request carries one,
                               # drawn from n journal keys in the symbolic checks (the
                               # explorer keys each request by its label)
    review: bool = False       # tasks require a FLIP review
    versions: int = 1          # candidate versions per attempt (1 = no revise)
    rejections: bool = False   # also send edges whose source phase does not match
    protected: bool = False    # the explorer also writes the protected content in an edit

    detours: int = 1           # side-exit round trips per transaction (upgrade block)
    every_kind: bool = False   # also send the kinds SYMBOLIC_ONLY leaves to the symbolic
                               # checks (generated request sequences send every kind)
    evidence_ids: int | None = None   # evidence ids per kind in the symbolic checks
                                      # (None: 2 with the group "evidence", else 1)

    @classmethod
    def proof(cls, tasks: int = 3, evidence_ids: int = 2, keys: int = 1) -> Instance:
        """The domain of an inductive proof: every request kind on ``tasks`` tasks,
        ``evidence_ids`` evidence ids per kind and ``keys`` journal keys."""
        return cls(tasks=tasks, groups=GROUPS, keys=keys, evidence_ids=evidence_ids)

    def task_names(self) -> tuple[str, ...]:
        return tuple(f"t{n + 1}" for n in range(self.tasks))

    def ids(self) -> tuple[str, ...]:
        """The evidence ids of the symbolic checks."""
        n = self.evidence_ids
        if n is None:
            n = 2 if "evidence" in self.groups else 1
        return tuple(f"e{k + 1}" for k in range(n))

    def key_names(self) -> tuple[str, ...]:
        """The journal keys of the symbolic checks."""
        return tuple(f"k{n + 1}" for n in range(self.keys))

    def bounds_json(self) -> dict:
        """The bounded domains of a proof, as JSON."""
        return {"tasks": self.tasks, "evidence_ids": len(self.ids()), "keys": self.keys}

    def within(self, s: State) -> bool:
        """State constraint (as TLC's CONSTRAINT): states beyond it are not expanded."""
        return all(self.task_within(t) for t in s.tasks)

    def task_within(self, t) -> bool:
        """Along the main line a transaction's revision equals its phase index; each
        side-exit round trip adds two, each revision of the candidate at most 12."""
        slack = 2 * self.detours + 12 * (self.versions - 1)
        return t.version <= self.versions and t.revision <= t.phase + slack

    def graph(self) -> Graph:
        names = list(self.task_names())
        deps = {names[n]: [names[n - 1]] for n in range(1, self.tasks)}
        return Graph.build(names, deps, graph_id="g",
                           review_required=names if self.review else (),
                           requires_assignment=names[:1] if "legacy" in self.groups else (),
                           protected=Protected(frozenset({PROTECTED_CONTENT})))

    def initial(self) -> State:
        return initial_state(self.graph(), target=INITIAL_TARGET)

    def describe(self) -> dict:
        return {"tasks": self.tasks, "attempts": self.attempts, "generations": self.generations,
                "groups": list(self.groups), "keys": self.keys, "review": self.review}


def instance_kinds(inst: Instance) -> list[K]:
    """The request kinds of the instance's groups that its bounds and policy leave possible."""
    kinds: list[K] = []
    for g in inst.groups:
        for k in GROUP_KINDS.get(g, ()):
            if k not in kinds:
                kinds.append(k)
    if not inst.review and K.REQUEST_REVIEW in kinds:
        kinds.remove(K.REQUEST_REVIEW)
    if inst.versions < 2 and K.REVISE in kinds:
        kinds.remove(K.REVISE)
    if inst.generations < 2 and K.RESET in kinds:
        kinds.remove(K.RESET)
    return kinds
