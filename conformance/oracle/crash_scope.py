"""What a crash cut compares: everything ("thorough") or what the cut step can touch
("scoped": its task, its dependents, the target and its own journal entry in its
sender's namespace), so a scoped cut's cost does not grow with the history."""
from __future__ import annotations

from dataclasses import dataclass

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.traces.format import Trace


#: What is compared after a cut: "thorough" (the whole projection, the whole ledger,
#: a rebuild and an audit) or "scoped" (what the step can touch: its task, its
#: dependents, the target and its own journal entry, and the ledger since the
#: snapshot), whose cost does not grow with the history.
CHECKS = ("thorough", "scoped")


@dataclass(frozen=True)
class _Scope:
    tasks: tuple[str, ...] | None      # None: every task
    keys: tuple[str, ...] | None       # None: the whole journal

    def of_model(self, p: dict) -> dict:
        if self.tasks is None:
            return p
        return {"target": p["target"], "now": p["now"],
                "tasks": {t: p["tasks"][t] for t in self.tasks},
                "journal": {k: p["journal"][k] for k in self.keys if k in p["journal"]}}

    def of_impl(self, impl: ImplSystem) -> dict:
        if self.tasks is None:
            return impl.project()
        out = impl.kernel.project(tasks=False, journal_keys=list(self.keys))
        out["tasks"] = impl.kernel.project_tasks(list(self.tasks))
        return out


def _scope(trace: Trace, step: dict, checks: str) -> _Scope:
    if checks == "thorough":
        return _Scope(None, None)
    task = step["request"].get("task")
    names = [t["name"] for t in trace.graph["tasks"]]
    dependents = tuple(t["name"] for t in trace.graph["tasks"] if task in t.get("deps", ()))
    key, who = step["request"].get("key"), step["request"].get("principal")
    journal_key = key if who is None else f"{who}/{key}"    # keys live in their sender's namespace
    return _Scope(((task,) if task in names else ()) + dependents, (journal_key,))


__all__ = ["CHECKS", "_Scope", "_scope"]
