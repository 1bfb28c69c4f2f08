"""What one decision is made of: its context, its observations, its outcome and effects.

A rule reads a ``Ctx`` (the task's policy and record, the request, lazy
``Observe``-ations of the environment) and returns an ``Outcome``: the
decision, the new record, the facts to record beside it and the external
``Effect``s to perform before the transaction commits (``succeeded`` builds
one, ``reject`` refuses). The updates several rules share live here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from ..world.env import WorktreeView
from ..storage.records import NO_RECEIPTS, TaskPolicy, TaskRecord, evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY, REJECTED

# --- what a decision produces ------------------------------------------------------


@dataclass(frozen=True)
class Effect:
    """An external effect to perform before the request's transaction commits."""

    name: str                      # create-worktree | pin | land | output | remove-worktree | adopt
    args: tuple = ()


@dataclass
class Outcome:
    decision: str
    code: str | None
    record: TaskRecord
    facts: list[tuple[str, dict]] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)

    @property
    def changes_state(self) -> bool:
        return self.decision in (APPLIED, EVIDENCE_ONLY)


# --- observing the environment ---------------------------------------------------------


class Observe:
    """Lazy, per-request observations of the environment (each read at most once)."""

    def __init__(self, env, task: str, effect_intent: Callable[[str], Any] | None = None):
        self._env = env
        self._task = task
        self._intent = effect_intent or (lambda effect: None)
        self._cache: dict[Any, Any] = {}
        self.log: dict[str, Any] = {}

    @property
    def task(self) -> str:
        return self._task

    def _once(self, key, thunk):
        if key not in self._cache:
            self._cache[key] = thunk()
        return self._cache[key]

    def target(self) -> str | None:
        value = self._once("target", self._env.repository.target)
        self.log["target"] = value
        return value

    def now(self) -> int:
        value = self._once("now", self._env.clock.now)
        self.log["now"] = value
        return value

    def birth_of(self, pid: int) -> int | None:
        value = self._once(("pid", pid), lambda: self._env.processes.birth_of(pid) if pid else None)
        self.log["birth"] = value
        return value

    def owner_alive(self, t: TaskRecord) -> bool:
        """Pid and birth time both match a process in the table."""
        # guards: liveness-needs-exact-birth
        return t.owner_birth != 0 and self.birth_of(t.owner_pid) == t.owner_birth

    def worktree(self, t: TaskRecord) -> WorktreeView:
        if t.worktree_id is None:
            return WorktreeView(False, None)
        view = self._once(("wt", t.worktree_id),
                          lambda: self._env.repository.observe_worktree(t.worktree_id))
        self.log["worktree"] = {"present": view.present, "content": view.content}
        return view

    def uncaptured(self, t: TaskRecord) -> list[str]:
        """What removing the worktree would lose that no ref keeps (ignored files no WorkSave
        captured, a worktree inside it); [] when nothing."""
        if t.worktree_id is None:
            return []
        value = self._once(("uncaptured", t.worktree_id),
                           lambda: self._env.repository.uncaptured(t.worktree_id))
        if value:
            self.log["uncaptured"] = value[:3]
        return value

    def built_on(self, t: TaskRecord, candidate: str | None, base: str | None) -> bool:
        """Whether the candidate (in the attempt's worktree) descends from the base."""
        if candidate is None or base is None or t.worktree_id is None:
            return False
        value = self._once(("built-on", candidate, base),
                           lambda: self._env.repository.built_on(t.worktree_id, candidate, base))
        self.log["built-on"] = value
        return value

    def changed_paths(self, base: str | None, candidate: str | None) -> list[str]:
        """The paths the candidate changes against its base (the real diff)."""
        if base is None or candidate is None or base == candidate:
            return []
        value = self._once(("diff", base, candidate),
                           lambda: self._env.repository.changed_paths(base, candidate))
        self.log["changed-paths"] = len(value)
        return value

    def effect_happened(self, t: TaskRecord) -> bool:
        """This transaction's effect is recorded, or re-observed after a crash."""
        if t.effect_done:
            return True
        effect = effect_name(self._task, t)
        if self._once(("intent", effect), lambda: self._intent(effect)) is None:
            return False
        value = self._once(("effect", effect),
                           lambda: self._env.repository.effect_observed(effect))
        self.log["effect-observed"] = value
        return value


def effect_name(task: str, t: TaskRecord) -> str:
    return f"{task}/{t.effect_id}"


# --- the context of one decision ---------------------------------------------------------


@dataclass
class Ctx:
    graph_id: str
    policy: TaskPolicy
    record: TaskRecord
    request: Any
    deps_done: Callable[[], bool]
    seen: Callable[[str, str], bool]
    observe: Observe
    #: the graph policy's protected path patterns (``protect``)
    protected_paths: Callable[[], tuple] = lambda: ()
    #: a dependency opened a generation after the current attempt opened (``reopen``)
    deps_reopened: Callable[[], bool] = lambda: False
    #: some dependent's effect is prepared, committed or Done (``reopen``)
    dependents_committed: Callable[[], bool] = lambda: False

    @property
    def task(self) -> str:
        return self.policy.name


class Condition(NamedTuple):
    """A condition of a kind's write, named by the contract's phrase, and the code that
    refuses the request when it does not hold (docs/vocabulary.md, "Conditions, kind by
    kind" and "The transaction's steps")."""

    holds: Callable[[Ctx], bool]
    code: str

    @property
    def name(self) -> str:
        return self.holds.__name__.replace("_", "-")


class Rule(NamedTuple):
    """A kind's decision: the conditions of its write in the contract's order, then the
    write (``then`` is called only when every condition holds)."""

    when: tuple[Condition, ...]
    then: Callable[[Ctx], Outcome]


def reject(ctx: Ctx, code: str) -> Outcome:
    return Outcome(REJECTED, code, ctx.record)


def succeeded(ctx: Ctx, record: TaskRecord, *, kind: str = APPLIED, facts=(), effects=()) -> Outcome:
    return Outcome(kind, None, record, list(facts), list(effects))


def evidence_fact(kind: str, ident: str, counted: bool = False) -> tuple[str, dict]:
    return ("evidence", {"kind": kind, "id": ident, "counted": counted})


# --- shared updates -------------------------------------------------------------------


def leave_main_line(t: TaskRecord, exit_: str, reason: str, **changes: Any) -> TaskRecord:
    return replace(t, exit=exit_, reason=reason, revision=t.revision + 1, **changes)


#: The columns of an attempt that is over: leases released, the owner no longer tracked.
RELEASED_OWNER: dict[str, Any] = {
    "worktree_lease": False, "session_lease": False, "finish_lease": False, "deadline": 0,
    "owner_pid": 0, "owner_birth": 0, "session": None, "wrapper_epoch": 0, "child_epoch": 0,
    "owner_seen": "unverified",
}


def release_owner(t: TaskRecord, **changes: Any) -> TaskRecord:
    """The attempt is over: leases released, the owner no longer tracked."""
    return replace(t, **RELEASED_OWNER, **changes)


def retain_work(ctx: Ctx, t: TaskRecord, effects: list[Effect]) -> tuple[str | None, str | None]:
    """(retained, its base) when an attempt closes: a dirty worktree, else the saved work.

    Dirty bytes are pinned under an immutable ref so that they are never erased."""
    view = ctx.observe.worktree(t)
    # guards: retained-work-never-erased
    if view.present and view.content != t.origin:
        effects.append(Effect("pin", (f"retained/{ctx.task}/f{t.fence}", view.content)))
        return view.content, t.base_hint
    if t.saved_work is not None:
        return t.saved_work, t.base
    return t.retained, t.retained_base


def close_attempt(ctx: Ctx, t: TaskRecord, outcome: str, effects: list[Effect]) -> TaskRecord:
    retained, retained_base = retain_work(ctx, t, effects)
    return release_owner(t, attempt_state=outcome, retained=retained, retained_base=retained_base)


def open_attempt(ctx: Ctx, t: TaskRecord, effects: list[Effect]) -> TaskRecord:
    """Open the next attempt: attempt and fence counters move on, a new worktree, no transaction."""
    r = ctx.request
    target = ctx.observe.target()
    start = r.imports if r.imports else target
    base_hint = (t.retained_base or target) if r.imports else target
    # guards: first-terminal-wins, terminal-never-resurrects
    fence = t.fence + 1
    wt = f"{ctx.task}/f{fence}"
    o = r.owner
    effects.append(Effect("create-worktree", (wt, start, base_hint)))
    effects.append(Effect("adopt", (o.pid, o.birth)))
    # guards: receipts-fenced, retry-is-not-continuation-without-proof
    return replace(
        t, attempt=t.attempt + 1, fence=fence, lease_epoch=t.lease_epoch + 1,
        attempt_state="running", token_hash=r.mint, failure="none",
        owner_pid=o.pid, owner_birth=o.birth, session=o.session,
        wrapper_epoch=1, child_epoch=1, owner_seen="unverified",   # only resume raises epochs
        worktree_lease=True, session_lease=True, finish_lease=False,
        worktree_id=wt, origin=start, base_hint=base_hint, saved_work=None, imported=r.imports,
        phase="absent", exit="none", reason="none", revision=0, candidate=None, base=None,
        version=0, disposition="none", receipts=NO_RECEIPTS, deadline=0, effect_done=False,
        completion_receipt=None,
    )


def suspect(t: TaskRecord) -> str:
    """A report can only make the owner suspect (a death stays a death); it proves nothing."""
    return "dead" if t.owner_seen == "dead" else "suspect"
