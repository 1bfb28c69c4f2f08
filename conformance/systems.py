"""Systems under comparison, behind one interface.

A system is started on a graph (the ``graph`` and ``initial`` sections of a
trace), then receives wire requests (answering wire decisions) and environment
steps, projects its observable state, and can crash and recover. The model,
the implementation and an external implementation over JSON lines all present
this interface, so replay, generated runs and crash cuts share one code path.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from wgk.model.env import EnvKind, apply_env, EnvError
from wgk.model.kernel import Rules, decide
from wgk.model.observe import Names, observe
from wgk.model.rules import RULES
from wgk.model.state import Graph, GraphError, State, TaskState, initial_state
from wgk.model.vocab import AttemptState

from .wire import WireError, env_from_wire, request_from_wire


class System(Protocol):
    name: str

    def apply(self, request: dict) -> dict: ...
    def env(self, step: dict) -> None: ...
    def project(self) -> dict: ...
    def crash(self) -> None: ...
    def close(self) -> None: ...


class StepError(ValueError):
    """A step a system cannot take (an impossible environment step, bad input)."""


def graph_from_spec(spec: dict) -> Graph:
    tasks = spec.get("tasks", [])
    try:
        return Graph.build(
            [t["name"] for t in tasks],
            {t["name"]: t.get("deps", []) for t in tasks},
            graph_id=spec.get("id", "g"),
            review_required=[t["name"] for t in tasks if t.get("review-required")],
            requires_assignment=[t["name"] for t in tasks if t.get("requires-assignment")],
        )
    except GraphError as e:
        raise StepError(f"/graph: {e}") from None


def seed_task(t: TaskState, seed: dict, names: Names, target: int) -> TaskState:
    """Apply a trace's ``initial`` facts for one task (a running attempt, legacy facts)."""
    changes: dict[str, Any] = {}
    a = seed.get("attempt")
    if a is not None:
        owner = a.get("owner", {})
        wt = names.cid(a["worktree"]) if a.get("worktree") else target
        birth = owner.get("birth", 0)
        changes.update(
            generation=a.get("generation", 0), attempt=a.get("attempt", 1),
            fence=a.get("fence", 1), lease_epoch=a.get("lease-epoch", 1),
            attempt_state=AttemptState.RUNNING,
            owner_pid=owner.get("pid", 0), owner_birth=birth,
            session=names.sid(owner.get("session")),
            wrapper_epoch=owner.get("wrapper-epoch", 1), child_epoch=owner.get("child-epoch", 1),
            proc_birth=birth if a.get("alive", True) else 0,
            worktree_lease=True, session_lease=True, worktree=wt, worktree_present=True,
            origin=names.cid(a["origin"]) if a.get("origin") else target,
        )
    for key, field in (("assigned", "assigned"), ("legacy-done", "legacy_done")):
        if key in seed:
            changes[field] = bool(seed[key])
    return replace(t, **changes) if changes else t


class ModelSystem:
    """The executable model as a system: the specification side of lockstep."""

    name = "model"

    def __init__(self, graph: dict, initial: dict | None = None, rules: Rules = RULES):
        self.names = Names()
        self.graph = graph_from_spec(graph)
        target = self.names.cid(graph.get("target", "main-0"))
        s = initial_state(self.graph, target=target)
        for name, seed in (initial or {}).items():
            if name not in self.graph.index:
                raise StepError(f"/initial/{name}: unknown task")
            i = self.graph.index[name]
            s = s.put(i, seed_task(s.tasks[i], seed, self.names, target))
        self.state: State = s
        self.rules = rules
        self.last = None

    def apply(self, request: dict) -> dict:
        try:
            r = request_from_wire(request, self.names)
        except WireError as e:
            raise StepError(str(e)) from None
        before = self.state
        d, self.state = decide(before, r, self.rules)
        self.last = (before, r, d, self.state)
        return d.to_json()

    def env(self, step: dict) -> None:
        try:
            e = env_from_wire(step, self.names)
            self.state = apply_env(self.state, e)
        except (WireError, EnvError) as err:
            raise StepError(str(err)) from None
        self.last = None

    def project(self) -> dict:
        return observe(self.state, self.names)

    def crash(self) -> None:
        """Every model field is durable: a crash loses nothing."""

    def snapshot(self) -> Any:
        return (self.state, dict(self.names.content), dict(self.names.sessions))

    def restore(self, snap: Any) -> None:
        self.state, content, sessions = snap
        self.names.content, self.names.sessions = dict(content), dict(sessions)

    def close(self) -> None:
        pass
