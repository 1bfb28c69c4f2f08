"""Steps a well-behaved client sends to bring a task into a given situation, for the families
whose fixtures describe a situation (a daemon observation, a reducer input) rather than the
requests that led to it: each helper appends the requests and environment steps, and keeps
the K, phase and revision the client knows from the responses it was given."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wgk.conformance.traces.wg.common import task_spec

OWNER_PID = 4001
FINISH = (("submit", "worker", "absent", {}),
          ("quiesce", "wrapper", "prepared", {}),
          ("save-work", "wrapper", "quiescing", {"candidate": None, "base": None}),
          ("seal-candidate", "daemon", "work-saved", {"candidate": None}),
          ("validate", "validator", "candidate-sealed", {"candidate": None, "verdict": "pass"}),
          ("accept", "daemon", "validated", {"candidate": None, "verdict": "not-required"}),
          ("record-disposition", "wrapper", "accepted", {"disposition": "land"}),
          ("prepare-effect", "promoter", "disposition-recorded", {}),
          ("commit-effect", "promoter", "effect-prepared", {"candidate": None, "base": None}),
          ("prepare-cleanup", "cleanup", "effect-committed", {}),
          ("commit-cleanup", "cleanup", "cleanup-prepared", {}),
          ("save-graph", "daemon", "cleanup-committed", {}))
PHASE_AFTER_STEP = {"submit": "prepared", "quiesce": "quiescing", "save-work": "work-saved",
                    "seal-candidate": "candidate-sealed", "validate": "validated", "accept": "accepted",
                    "record-disposition": "disposition-recorded", "prepare-effect": "effect-prepared",
                    "commit-effect": "effect-committed", "prepare-cleanup": "cleanup-prepared",
                    "commit-cleanup": "cleanup-committed", "save-graph": "graph-saved"}


@dataclass
class Attempt:
    attempt: int = 0
    phase: str = "absent"
    revision: int = 0
    candidate: str | None = None


@dataclass
class Scenario:
    """The graph and the steps of one translated case."""

    graph_id: str
    origin: dict
    key_prefix: str
    target: str = "main-0"
    tasks: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    protected_paths: list[str] = field(default_factory=list)
    attempts: dict[str, Attempt] = field(default_factory=dict)
    n: int = 0

    def task(self, name: str, deps: tuple[str, ...] = (), retry_budget: int | None = None) -> str:
        spec = task_spec(name)
        spec["deps"] = list(deps)
        if retry_budget is not None:
            spec["retry-budget"] = retry_budget
        self.tasks.append(spec)
        self.attempts[name] = Attempt()
        return name

    def graph(self) -> dict:
        g: dict[str, Any] = {"id": self.graph_id, "target": self.target, "tasks": self.tasks}
        if self.protected_paths:
            g["protected-paths"] = list(self.protected_paths)
        return g

    def key(self, kind: str, task: str) -> str:
        self.n += 1
        return f"{self.key_prefix}:{self.n}/{kind}:{task}"

    def cap(self, task: str) -> dict:
        a = self.attempts[task].attempt
        return {"graph": self.graph_id, "task": task, "generation": 0, "attempt": a, "fence": a,
                "lease-epoch": a}

    def emit(self, step: dict, note: str | None = None) -> dict:
        step["from"] = dict(self.origin)
        if note:
            step["note"] = note
        self.steps.append(step)
        return step

    def env(self, kind: str, note: str | None = None, **fields: Any) -> dict:
        return self.emit({"env": kind, **{k.replace("_", "-"): v for k, v in fields.items()}}, note)

    def request(self, kind: str, actor: str, task: str, expect: str = "applied", note: str | None = None,
                cap: bool = True, **params: Any) -> dict:
        r: dict[str, Any] = {"kind": kind, "actor": actor, "task": task, "key": self.key(kind, task)}
        if cap:
            r["cap"] = self.cap(task)
        for k, v in params.items():
            if v is not None:
                r[k.replace("_", "-")] = v
        return self.emit({"request": r, "expect": {"decision": expect}}, note)

    def dispatch(self, task: str, session: str | None = None) -> dict:
        a = self.attempts[task]
        a.attempt += 1
        a.phase, a.revision, a.candidate = "absent", 0, None
        pid = OWNER_PID + 100 * len(self.attempts) + a.attempt
        owner = {"pid": pid, "birth": 900 + pid % 1000, "session": session or f"{task}-s{a.attempt}",
                 "wrapper-epoch": 1, "child-epoch": 1}
        r: dict[str, Any] = {"kind": "dispatch", "actor": "daemon", "task": task,
                             "key": self.key("dispatch", task), "expected-attempt": a.attempt - 1,
                             "owner": owner}
        return self.emit({"request": r, "expect": {"decision": "applied"}})

    def finish_until(self, task: str, last: str, content: str, paths: list[str] | None = None,
                     expect_last: str = "applied") -> None:
        """Edit the worktree to ``content`` and drive the transaction's edges up to ``last``."""
        a = self.attempts[task]
        self.env("edit", task=task, content=content, **({"paths": paths} if paths else {}))
        for kind, actor, phase, params in FINISH:
            values = {k: (v if v is not None else (content if k == "candidate" else self.target))
                      for k, v in params.items()}
            expect = expect_last if kind == last else "applied"
            self.request(kind, actor, task, expect, expected_phase=phase, expected_revision=a.revision,
                         **values)
            if expect == "applied":
                a.phase, a.revision = PHASE_AFTER_STEP[kind], a.revision + 1
            if kind == last:
                return
        raise ValueError(f"no finish step {last!r}")
