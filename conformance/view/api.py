"""The page's JSON API, as plain functions of a ``Session`` (no HTTP here).

``GET /api/session`` the path (one row per step), ``GET /api/state?k=K`` the
state after ``K`` steps (per-task rows with the changed ones marked, the
invariants that hold and break, the task graph), ``GET /api/enabled?k=K`` the
steps the enumeration offers there with their decisions, ``POST /api/extend``
``{"at": K, "step": WIRE}``, ``GET /api/export`` the path as ``wgk-trace/1``,
``POST /api/ask`` ``{"reach"|"invariant": TEXT, "depth": N}`` a shortest trace
from z3, ``POST /api/semantics`` ``{"mutant": NAME|null}``.
"""
from __future__ import annotations

from typing import Any, Callable

from wgk.model.invariants import REGISTRY

from wgk.conformance.traces.format import canonical
from wgk.conformance.view.diff import ORDER, flatten, task_rows
from wgk.conformance.view.session import Entry, Session, SessionError, describe


class ApiError(ValueError):
    """A request the API refuses (HTTP 400), one line."""


def _always() -> list[str]:
    return [p.id for p in REGISTRY.values() if p.kind == "always"]


def session_json(session: Session, impl: list[dict | None] | None = None) -> dict:
    rows = []
    for n, e in enumerate(session.entries):
        row = {"index": n, "label": session.label_of(e), "env": e.decision is None,
               "actor": e.wire["request"].get("actor") if "request" in e.wire else "environment",
               "decision": describe(e.decision), "breaks": session.broken(n + 1)}
        if impl is not None:
            row["impl"] = describe(impl[n]) if n < len(impl) else "-"
        rows.append(row)
    from wgk.conformance.z3.mutants import MUTANTS
    return {"id": session.id, "title": session.title, "description": session.description,
            "source": session.source, "semantics": session.mutant or "model",
            "mutants": list(MUTANTS), "instance": describe_instance(session),
            "tasks": list(session.state(0).graph.tasks), "steps": rows,
            "first_break": session.first_break(), "system": "both" if impl is not None else "model",
            "invariants": [p.id for p in REGISTRY.values()]}


def describe_instance(session: Session) -> dict:
    inst = session.inst
    return {**inst.describe(), "versions": inst.versions}


def state_json(session: Session, k: int) -> dict:
    obs = session.observed(k)
    before = session.observed(k - 1) if k else None
    tasks = []
    for name, t in obs["tasks"].items():
        rows = task_rows(before["tasks"][name] if before else None, t)
        tasks.append({"name": name, "rows": [{"key": key, **row} for key, row in rows.items()]})
    broken = session.broken(k)
    g = session.state(k).graph
    graph = [{"name": name, "deps": [g.tasks[d] for d in g.deps[i]],
              "status": obs["tasks"][name]["status"], "phase": obs["tasks"][name]["phase"],
              "exit": obs["tasks"][name]["exit"],
              "attempt-state": obs["tasks"][name]["attempt-state"],
              "way": _way(obs["tasks"][name]["plan"])} for i, name in enumerate(g.tasks)]
    step = None
    if k:
        e = session.entries[k - 1]
        step = {"index": k - 1, "label": session.label_of(e), "decision": describe(e.decision),
                "wire": e.wire}
    changed_globals = {key: {"value": obs[key], "before": before[key]} if before and
                       before[key] != obs[key] else {"value": obs[key]} for key in ("target", "now")}
    return {"k": k, "last": len(session.entries), "step": step, "sections": list(ORDER),
            "tasks": tasks, "globals": changed_globals, "journal": len(obs["journal"]),
            "invariants": {"broken": [{"id": i, "doc": REGISTRY[i].doc, "scope": REGISTRY[i].scope}
                                      for i in broken],
                           "holds": [i for i in _always() if i not in broken]},
            "graph": graph}


def _way(plan: dict | None) -> str:
    if not plan:
        return "finished"
    flat = flatten(plan)
    way, action = flat.get("way", "?"), flat.get("action", "")
    reason = flat.get("reason")
    return f"{way}: {action}" + (f" ({reason})" if reason and reason != action else "")


def enabled_json(session: Session, k: int) -> dict:
    out = []
    before = session.observed(k)
    for n, (step, e) in enumerate(session.enabled(k)):
        out.append(_choice(session, n, e, before))
    return {"k": k, "steps": out}


def _choice(session: Session, n: int, e: Entry, before: dict) -> dict:
    from wgk.model.invariants import violations
    from wgk.model.observe import observe
    after = observe(e.state, session.names)
    changed = sum(1 for name, t in after["tasks"].items()
                  for row in task_rows(before["tasks"][name], t).values()
                  if "before" in row and row["section"] != "plan")
    changed += sum(1 for key in ("target", "now") if before[key] != after[key])
    state = violations(e.state)
    breaks = state + [i for i in e.step_broken if i not in state]
    return {"n": n, "label": session.label_of(e), "env": e.decision is None,
            "decision": describe(e.decision), "changes": changed, "breaks": breaks,
            "wire": e.wire}


def export_json(session: Session) -> dict:
    return canonical(session.export().to_json())


def _int(query: dict, name: str) -> int:
    try:
        return int(query[name])
    except (KeyError, TypeError, ValueError):
        raise ApiError(f"{name}: expected an integer") from None


class Api:
    """Holds the current session; ``handle`` answers one request with (status, JSON)."""

    def __init__(self, session: Session, *, system: str = "model",
                 ask: Callable[[Session, dict], Session] | None = None):
        self.session = session
        self.system = system
        self.ask_fn = ask
        self._impl: tuple[str, list] | None = None

    def impl_decisions(self) -> list[dict | None] | None:
        if self.system != "both":
            return None
        from wgk.conformance.view.impl import impl_decisions
        key = repr([e.wire for e in self.session.entries])
        if self._impl is None or self._impl[0] != key:
            self._impl = (key, impl_decisions(self.session))
        return self._impl[1]

    def handle(self, method: str, route: str, query: dict, body: Any) -> tuple[int, Any]:
        try:
            return 200, self._route(method, route, query, body)
        except (ApiError, SessionError) as e:
            return 400, {"error": str(e)}

    def _route(self, method: str, route: str, query: dict, body: Any) -> Any:
        s = self.session
        if (method, route) == ("GET", "/api/session"):
            return session_json(s, self.impl_decisions())
        if (method, route) == ("GET", "/api/state"):
            return state_json(s, _int(query, "k"))
        if (method, route) == ("GET", "/api/enabled"):
            return enabled_json(s, _int(query, "k"))
        if (method, route) == ("GET", "/api/export"):
            return export_json(s)
        if method == "POST" and not isinstance(body, dict):
            raise ApiError("the body must be a JSON object")
        if (method, route) == ("POST", "/api/extend"):
            s.extend(_int(body, "at"), body.get("step"))
            return session_json(s, self.impl_decisions())
        if (method, route) == ("POST", "/api/semantics"):
            mutant = body.get("mutant") or None
            self.session = s.with_semantics(None if mutant == "model" else mutant)
            return session_json(self.session, self.impl_decisions())
        if (method, route) == ("POST", "/api/ask"):
            if self.ask_fn is None:
                raise ApiError("asking z3 is not available here")
            found = self.ask_fn(s, body)
            self.session = found
            return session_json(found, self.impl_decisions())
        raise ApiError(f"no such endpoint: {method} {route}")
