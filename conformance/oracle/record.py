"""Record a run of the implementation as a ``wgk-trace/1`` trace.

The implementation's ledger holds every event in order: the graph, seeded
attempts, and each request with its decision and what the kernel observed of
the world while deciding it (the target, the owner's birth time, the
worktree's bytes, the clock). The recorder replays those events into the model
and, before each request, adds the environment steps that make the model's
world agree with what the kernel observed: an ``edit`` when the worktree holds
other bytes, ``owner-dies`` / ``pid-reuse`` when the owner's pid has no process
or another one, ``move-target`` when the target moved by someone else's hand,
``tick`` when the clock advanced. Every step keeps the decision the
implementation gave as its expectation, and the final statuses are the
implementation's. Replaying the trace through the model then tells whether
the model agrees with what really happened.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from wgk.model.vocab import AttemptState

from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.traces.format import Trace


class RecordError(ValueError):
    """A database that cannot be recorded (not a kernel database, unreadable)."""


@dataclass
class _Event:
    seq: int
    event: str
    key: str | None
    body: dict


def _events(path: str) -> list[_Event]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT seq, event, key, body FROM ledger ORDER BY seq").fetchall()
        statuses = dict(conn.execute(
            "SELECT tasks.name, task_view.status FROM task_view JOIN tasks ON tasks.id = task_view.task"))
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'principals'").fetchone()
        principals = conn.execute("SELECT name, roles FROM principals ORDER BY name").fetchall() \
            if has else []
        conn.close()
    except sqlite3.Error as e:
        raise RecordError(f"{path}: not a readable kernel database ({e})") from None
    out = []
    for seq, event, key, body in rows:
        try:
            out.append(_Event(seq, event, key, json.loads(body)))
        except (TypeError, json.JSONDecodeError):
            raise RecordError(f"{path}: ledger event {seq} is not JSON") from None
    _events.statuses = statuses          # the implementation's final statuses
    _events.principals = [{"name": n, "roles": sorted(r for r in roles.split(",") if r)}
                          for n, roles in principals]
    return out


def _graph(events: list[_Event]) -> dict:
    graph: dict[str, Any] = {"id": "g", "target": None, "tasks": []}
    by_name: dict[str, dict] = {}
    for e in events:
        if e.event == "graph-created":
            graph["id"] = e.body["graph"]
        elif e.event == "task-added":
            t = {"name": e.body["task"], "deps": list(e.body.get("deps", [])),
                 "review-required": bool(e.body.get("review-required")),
                 "requires-assignment": bool(e.body.get("requires-assignment"))}
            by_name[t["name"]] = t
            graph["tasks"].append(t)
        elif e.event == "dependency-added":
            by_name[e.body["task"]]["deps"].append(e.body["dep"])
    for e in events:                      # the target before anything moved it
        observed = e.body.get("observed") or {}
        if "target" in observed:
            graph["target"] = observed["target"]
            break
        if any(f[0] == "effect-committed" for f in e.body.get("facts", [])):
            break
    graph["target"] = graph["target"] or "main-0"
    return graph


def _seed(body: dict) -> dict:
    ch = body.get("changes", {})
    worktree = next((f[1] for f in body.get("facts", []) if f[0] == "worktree-added"), {})
    owner = {"pid": ch.get("owner_pid", 0), "birth": ch.get("owner_birth", 0),
             "session": ch.get("session"), "wrapper-epoch": ch.get("wrapper_epoch", 1),
             "child-epoch": ch.get("child_epoch", 1)}
    attempt: dict[str, Any] = {"generation": ch.get("generation", 0), "attempt": ch.get("attempt", 1),
                               "fence": ch.get("fence", 1), "lease-epoch": ch.get("lease_epoch", 1),
                               "state": ch.get("attempt_state", "running"), "owner": owner}
    if worktree.get("content") or ch.get("origin"):
        attempt["worktree"] = worktree.get("content") or ch.get("origin")
    if ch.get("origin"):
        attempt["origin"] = ch["origin"]
    if ch.get("token_hash"):
        attempt["token"] = token_name(ch["token_hash"])
    return {"attempt": attempt}


def _sender(key: str, principals: set[str]) -> dict:
    """The key as its sender sent it, and the sender (``principal/key`` in a closed kernel)."""
    name, sep, rest = key.partition("/")
    if sep and name in principals:
        return {"key": rest, "principal": name}
    return {"key": key}


def token_name(digest: str) -> str:
    """The symbolic name a recorded token gets: the kernel holds only its sha256, so an
    opener's ``mint`` and the ``token-hash`` of each request presenting it name the same."""
    return f"tok-{digest[:16]}"


def symbolic_tokens(request: dict) -> dict:
    """A recorded request's tokens by their symbolic names (``token_name``)."""
    out = dict(request)
    if isinstance(out.get("mint"), str):
        out["mint"] = token_name(out["mint"])
    if isinstance(out.get("token-hash"), str):
        out["token"] = token_name(out.pop("token-hash"))
    return out


def _environment(model: ModelSystem, task: str, observed: dict) -> list[dict]:
    """The environment steps that make the model's world match what was observed."""
    out: list[dict] = []
    s = model.state
    names = model.names
    if "now" in observed and observed["now"] > s.now:
        out.append({"env": "tick", "amount": observed["now"] - s.now})
    if "target" in observed and observed["target"] is not None and \
            names.cname(s.target) != observed["target"]:
        out.append({"env": "move-target", "content": observed["target"]})
    if task in s.graph.index:
        # the owner wrote its bytes before it died: edits first, then the death
        t = s.task(task)
        running = t.attempt_state == AttemptState.RUNNING
        wt = observed.get("worktree")
        if running and wt and wt.get("present") and wt.get("content") is not None and \
                names.cname(t.worktree) != wt["content"]:
            out.append({"env": "edit", "task": task, "content": wt["content"]})
        if running and "birth" in observed:
            birth = observed["birth"] or 0
            if birth != t.proc_birth:
                if t.proc_birth != 0 and t.proc_birth == t.owner_birth:
                    out.append({"env": "owner-dies", "task": task})
                if birth != 0:
                    out.append({"env": "pid-reuse", "task": task, "birth": birth})
    return out


def _rebased(request: dict, observed: dict, steps: list[dict]) -> list[dict]:
    """A revise the kernel saw built on the target it names: the bytes it names were written
    after their owner rebased its work onto that target (the edit says ``onto``)."""
    if request.get("kind") == "revise" and observed.get("built-on") and \
            request.get("base") is not None and request.get("base") == observed.get("target"):
        for env in steps:
            if env["env"] == "edit" and env["task"] == request.get("task"):
                env["onto"] = request["base"]
    return steps


def _replayed(trace: Trace) -> ModelSystem:
    """The model after every step of ``trace`` so far."""
    model = ModelSystem(trace)
    for step in trace.steps:
        try:
            model.apply(step)
        except StepError:
            pass
    return model


def record_trace(path: str, *, id: str | None = None, title: str | None = None) -> Trace:
    """The run in the kernel database at ``path`` as a trace (expectations from the run)."""
    events = _events(path)
    statuses = _events.statuses
    if not any(e.event == "graph-created" for e in events):
        raise RecordError(f"{path}: the ledger holds no graph")
    graph = _graph(events)
    declared = _events.principals
    if declared:                 # a closed kernel: its principals, keys in their namespaces
        graph["principals"] = declared
    initial = {e.body["task"]: _seed(e.body) for e in events if e.event == "seed"}
    trace = Trace(id=id or "recorded-run", title=title or f"Recorded run of {path}",
                  source={"kind": "recorded-run", "provenance": f"wgk record --db {path}"},
                  description="Requests and decisions as the implementation recorded them; "
                              "environment steps inferred from what it observed.",
                  graph=graph, initial=initial)
    model = ModelSystem(trace)
    deaths: dict[str, int] = {}               # task -> index of its inferred owner-dies step
    for e in events:
        if e.event != "request":
            continue
        request = symbolic_tokens(e.body["request"])
        if e.key is not None:
            request.update(_sender(e.key, {p["name"] for p in declared}))
        observed = e.body.get("observed") or {}
        for env in _rebased(request, observed,
                            _environment(model, request.get("task", ""), observed)):
            try:
                model.apply(env)
            except StepError:
                if env["env"] == "edit" and env["task"] in deaths:
                    # bytes first seen after the owner's death were written while it lived
                    trace.steps.insert(deaths[env["task"]], env)
                    deaths[env["task"]] += 1
                    model = _replayed(trace)
                continue
            if env["env"] == "owner-dies":
                deaths[env["task"]] = len(trace.steps)
            trace.steps.append(env)
        trace.steps.append({"request": request, "expect": e.body["response"]})
        try:
            model.apply({"request": request})
        except StepError:
            pass
    trace.expect = {"tasks": {name: {"status": st} for name, st in sorted(statuses.items())}}
    return trace
