"""Kernel state as frozen dataclasses.

``Graph`` is the static part (tasks, dependency edges, policy); ``State`` is
everything a request can change, plus the environment the kernel observes
(process table, worktree bytes, the target ref, the clock). Environment fields
are marked ``env`` in their comments: the kernel reads them, only environment
steps (and the effects the kernel itself performs) change them.

Content ids (worktree bytes, candidates, bases, target commits), pids, birth
times and sessions are small ints; ``0`` means "none". Traces name them with
strings and intern the names (``wgk.model.names``).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, Iterable, Mapping

import networkx as nx

from .logic import all_of, not_
from .protected import NOTHING_PROTECTED
from .vocab import (
    DEFAULT_RETRY_BUDGET, INTRUDER, TOKEN_BEARERS, AttemptState, Contract, Failure, ReviewPhase,
    ReviewVerdict, Disposition, Exit, OwnerSeen, Phase, Reason, Receipt,
)


class GraphError(ValueError):
    """A task graph that cannot be built (unknown dependency, cycle, duplicate)."""


@dataclass(frozen=True, eq=False)
class Graph:
    """The static task graph: names, dependency edges and per-task policy."""

    graph_id: str
    tasks: tuple[str, ...]
    deps: tuple[tuple[int, ...], ...]
    review_required: tuple[bool, ...]
    requires_assignment: tuple[bool, ...]
    index: Mapping[str, int] = field(repr=False)
    #: per task, the automatic retries after failed or lost attempts in one generation
    retry_budget: tuple = ()
    #: principal -> the roles it holds; ``closed``: every request must name a principal.
    principals: Mapping[str, frozenset] = field(default_factory=lambda: {INTRUDER: TOKEN_BEARERS})
    closed: bool = False
    #: which content ids touch a protected control-plane path (``wgk.model.protected``),
    #: and the policy's patterns they were matched against (a trace's ``protected-paths``)
    protected: Any = NOTHING_PROTECTED
    protected_paths: tuple[str, ...] = ()

    @staticmethod
    def build(
        tasks: Iterable[str],
        deps: Mapping[str, Iterable[str]] | None = None,
        *,
        graph_id: str = "graph",
        review_required: Iterable[str] = (),
        requires_assignment: Iterable[str] = (),
        principals: Mapping[str, Iterable[Any]] | None = None,
        retry_budget: Mapping[str, int] | None = None,
        protected: Any = NOTHING_PROTECTED,
        protected_paths: Iterable[str] = (),
    ) -> "Graph":
        names = tuple(tasks)
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise GraphError(f"duplicate task names: {', '.join(dup)}")
        index = {n: i for i, n in enumerate(names)}
        deps = deps or {}
        g = nx.DiGraph()
        g.add_nodes_from(names)
        for task, ds in deps.items():
            if task not in index:
                raise GraphError(f"dependencies given for unknown task {task!r}")
            for d in ds:
                if d not in index:
                    raise GraphError(f"task {task!r} depends on unknown task {d!r}")
                g.add_edge(d, task)
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = [u for u, _ in cycle] + [cycle[0][0]]
            raise GraphError("dependency cycle: " + " -> ".join(path))
        review = set(review_required)
        assign = set(requires_assignment)
        for label, chosen in (("review_required", review), ("requires_assignment", assign)):
            unknown = sorted(chosen - set(names))
            if unknown:
                raise GraphError(f"{label} names unknown tasks: {', '.join(unknown)}")
        return Graph(
            graph_id=graph_id,
            tasks=names,
            deps=tuple(tuple(sorted(index[d] for d in deps.get(n, ()))) for n in names),
            review_required=tuple(n in review for n in names),
            requires_assignment=tuple(n in assign for n in names),
            retry_budget=tuple((retry_budget or {}).get(n, DEFAULT_RETRY_BUDGET) for n in names),
            index=index,
            principals=({INTRUDER: TOKEN_BEARERS} if principals is None
                        else {p: frozenset(roles) for p, roles in principals.items()}),
            closed=principals is not None,
            protected=protected,
            protected_paths=tuple(protected_paths),
        )

    def digraph(self) -> nx.DiGraph:
        """Dependency edges as a networkx DiGraph (edge dependency -> dependent)."""
        g = nx.DiGraph()
        g.add_nodes_from(self.tasks)
        for i, ds in enumerate(self.deps):
            for d in ds:
                g.add_edge(self.tasks[d], self.tasks[i])
        return g

    def dependents(self, i: int) -> tuple[int, ...]:
        return tuple(j for j, ds in enumerate(self.deps) if i in ds)


@dataclass(frozen=True, slots=True)
class Binding:
    """What a receipt is bound to: the attempt (by fence), candidate and base."""

    fence: Any = 0
    candidate: Any = 0
    base: Any = 0

    def __eq__(self, other: object) -> Any:
        """Field by field; a solver term when a field is one (a tuple compare would not be)."""
        if not isinstance(other, Binding):
            return NotImplemented
        return all_of(self.fence == other.fence, self.candidate == other.candidate,
                      self.base == other.base)

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not_(eq)


NO_RECEIPT = Binding()
NO_RECEIPTS = tuple(NO_RECEIPT for _ in Receipt)


class Evidence(frozenset):
    """A task's recorded evidence: ``(kind, id)`` pairs, deduplicated by id."""

    def has(self, item) -> Any:
        return item in self

    def add(self, item) -> "Evidence":
        return self if item in self else Evidence(self | {item})

    def count(self, pred) -> Any:
        return sum(1 for item in self if pred(item))


@dataclass(frozen=True, slots=True)
class TaskState:
    """One task: its generation, current attempt, owner, leases, SaveTransaction."""

    # generation and the current attempt's capability tuple K
    generation: Any = 0
    attempt: Any = 0
    fence: Any = 0
    lease_epoch: Any = 0
    attempt_state: Any = AttemptState.NONE
    token: Any = 0                 # the current attempt's capability token (0: none minted)
    # exact owner identity, and what the kernel has proven about it
    owner_pid: Any = 0
    owner_birth: Any = 0
    session: Any = 0
    wrapper_epoch: Any = 0
    child_epoch: Any = 0
    owner_seen: Any = OwnerSeen.UNVERIFIED
    proc_birth: Any = 0            # env: birth time of the process now at owner_pid
    # leases held by the current attempt
    worktree_lease: Any = False
    session_lease: Any = False
    finish_lease: Any = False
    # the attempt's worktree and saved work
    worktree: Any = 0              # env: content id of the worktree bytes
    worktree_present: Any = False  # env: the worktree exists on disk
    origin: Any = 0                # content the worktree started from (clean)
    built_on: Any = 0              # the target commit the attempt's work descends from (its base)
    worktree_base: Any = 0         # env: the commit the worktree's bytes are built on (a rebase moves it)
    saved_work: Any = 0            # content captured by this attempt's WorkSave
    retained: Any = 0              # work retained from a closed attempt
    retained_base: Any = 0         # the target commit the retained work descends from
    imported: Any = 0              # retained work this attempt imported
    # the SaveTransaction of the current attempt
    phase: Any = Phase.ABSENT
    exit: Any = Exit.NONE
    reason: Any = Reason.NONE
    revision: Any = 0
    candidate: Any = 0
    base: Any = 0
    version: Any = 0
    disposition: Any = Disposition.NONE
    receipts: tuple = NO_RECEIPTS
    deadline: Any = 0
    promotions: Any = 0            # env: external effects performed for this task
    effect_done: Any = False       # env: this transaction's effect has happened
    # the owner's completion receipt recorded before its transaction opened: the content id of
    # the exact worktree bytes it receipted (0: none); kept for the attempt, the transaction a
    # later submit opens saves exactly these bytes
    completion_receipt: Any = 0
    # recorded evidence and the counters derived from it
    evidence: Any = Evidence()
    compactions: Any = 0
    continuations: Any = 0
    acks: Any = 0
    provider_failures: Any = 0
    logs: Any = 0
    messages: Any = 0              # inert messages held for a running attempt
    # failures and the automatic retries they used (this generation)
    failure: Any = Failure.NONE    # why the last attempt failed, as its report said
    retries: Any = 0               # dispatches after a failed or lost attempt
    # admission, migration and operator facts
    assigned: Any = False
    legacy_done: Any = False
    reconstructed: Any = False
    abandoned: Any = False
    # archiving a Done task: the digest (its result's content id) the operator confirmed,
    # and the digest archived (0: none)
    archive_confirmed: Any = 0
    archived: Any = 0
    # the daemon's archive backlog: the digest it proposed for archiving (0: none); no archive
    # is planned on that word alone, only after the operator's confirmation of the same digest
    archive_proposed: Any = 0
    # the attempt's chat: the attempt-opening key (the attempt's fence) the daemon's creation
    # request was made under (0: none), how many were made under that key, and the key whose
    # request was reconciled (the chat it created looked up and recorded; 0: none)
    chat_request: Any = 0
    chat_requests: Any = 0
    chat_reconciled: Any = 0
    # an external wait: the correlation id the parked task waits for (0: none), its deadline
    # (0: none), and whether a wait ran out (a named hold until the operator acts)
    waiting_on: Any = 0
    wait_deadline: Any = 0
    wait_expired: Any = False
    # the operator's pause (no attempt opens while it holds) and the time before which no
    # attempt opens (0: none)
    paused: Any = False
    not_before: Any = 0
    # the provider route the task's attempts run on (an interned provider/model/endpoint-digest
    # name, 0: none known), and its breaker: open (unavailable) after a provider failure on it,
    # until a probe due at ``probe_at`` is acknowledged succeeded
    route: Any = 0
    route_unavailable: Any = False
    probe_at: Any = 0
    # a reset's intent, persisted while the old attempt's exact owner is not yet proven exited:
    # no generation opens over it (WG's reopen order: intent, proven exit, release, one generation)
    reopening: Any = False
    # the sum of the dependencies' generations when the current attempt opened: a reopen of a
    # dependency since then raises the sum, so the attempt's effect is refused
    deps_generation: Any = 0
    # the review valve, facts of the source task: the current completion manifest (its id,
    # requirements, contract, output and validation digests, and the main a Land manifest
    # integrated), FLIP's and the evaluator's receipts on it (verdict, manifest,
    # requirements), its publication (the manifest and output published, how many times),
    # and the failure code a failed valve reports
    manifest: Any = 0
    manifest_requirements: Any = 0
    contract: Any = Contract.NONE
    manifest_output: Any = 0
    manifest_validation: Any = 0
    manifest_main: Any = 0
    review_phase: Any = ReviewPhase.WORKING
    flip: Any = ReviewVerdict.ABSENT
    flip_manifest: Any = 0
    flip_requirements: Any = 0
    evaluation: Any = ReviewVerdict.ABSENT
    evaluation_manifest: Any = 0
    evaluation_requirements: Any = 0
    publication: Any = 0
    publication_output: Any = 0
    publications: Any = 0
    review_failure: Any = 0

    def receipt(self, kind: Receipt) -> Binding:
        return self.receipts[kind]

    def with_receipt(self, kind: Receipt, binding: Binding) -> tuple:
        rs = list(self.receipts)
        rs[kind] = binding
        return tuple(rs)


TASK_FIELDS: tuple[str, ...] = tuple(TaskState.__dataclass_fields__)
_TASK_INIT = TaskState.__init__


def replace_task(t: TaskState, **changes: Any) -> TaskState:
    """``dataclasses.replace`` for TaskState without the per-call field introspection."""
    new = object.__new__(TaskState)
    setter = object.__setattr__
    for name in TASK_FIELDS:
        setter(new, name, changes[name] if name in changes else getattr(t, name))
    return new
GLOBAL_FIELDS: tuple[str, ...] = ("target", "now")


@dataclass(frozen=True, slots=True)
class Entry:
    """A journal entry: the request digest and the stored original response."""

    digest: Any
    kind: Any
    code: Any


_first = itemgetter(0)


class Journal(tuple):
    """Idempotency journal: sorted ``(key, Entry)`` pairs (immutable, hashable)."""

    def lookup(self, key, digest) -> tuple[Any, Any, Any, Any]:
        """(used, same bytes, stored decision kind, stored code) for ``key``."""
        for k, e in self:
            if k == key:
                return True, e.digest == digest, e.kind, e.code
        return False, False, 0, 0

    def put(self, key, digest, kind, code) -> "Journal":
        """The journal with ``key``'s entry set (the pairs stay sorted by key)."""
        i = bisect_left(self, key, key=_first)
        same = i < len(self) and self[i][0] == key
        return Journal(self[:i] + ((key, Entry(digest, kind, code)),) + self[i + same:])

    def entries(self) -> dict:
        return dict(self)


@dataclass(frozen=True, slots=True)
class State:
    """The whole kernel state of one graph, plus the environment it observes."""

    graph: Graph = field(compare=False, repr=False)
    tasks: tuple[TaskState, ...]
    target: Any = 0                # env: commit the target ref points at
    now: Any = 0                   # logical clock
    journal: Any = Journal()
    #: principals whose credential was revoked: answered as an unknown one (not-authenticated)
    revoked: frozenset = frozenset()

    def task(self, name: str) -> TaskState:
        return self.tasks[self.graph.index[name]]

    def put(self, i: int, t: TaskState) -> "State":
        ts = list(self.tasks)
        ts[i] = t
        return replace(self, tasks=tuple(ts))

    def put_target(self, target) -> "State":
        return replace(self, target=target)


def initial_state(graph: Graph, *, target: int = 1, now: int = 0,
                  tasks: Mapping[str, TaskState] | None = None) -> State:
    """All tasks open (or as given), no evidence, empty journal."""
    given = tasks or {}
    unknown = sorted(set(given) - set(graph.tasks))
    if unknown:
        raise GraphError(f"initial state names unknown tasks: {', '.join(unknown)}")
    return State(
        graph=graph,
        tasks=tuple(given.get(n, TaskState()) for n in graph.tasks),
        target=target,
        now=now,
    )
