"""Graph edits checked before they become ledger events: new tasks, new edges, cycles."""
from __future__ import annotations

import sqlite3
from typing import Iterable

from ..contract import names
from ..contract.errors import GraphError
from ..storage.records import TaskPolicy
from ..contract.vocabulary import DISPOSITIONS


def task_added_events(known: dict[str, int], specs: list[TaskPolicy]) -> list[dict]:
    """The ``task-added`` bodies of new tasks, refused (``GraphError``) when a name is outside
    the grammar (``names``) or taken, a disposition unknown, a dependency unknown or the new
    edges close a cycle."""
    new = {}
    for s in specs:
        # guards: retained-work-never-erased
        bad = names.describe("task", s.name)
        if bad is not None:
            raise GraphError(bad)
        if s.name in known or s.name in new:
            raise GraphError(f"task {s.name!r} already exists")
        if s.disposition not in DISPOSITIONS[1:]:
            raise GraphError(f"task {s.name!r}: unknown disposition {s.disposition!r}")
        if type(s.retry_budget) is not int or not 0 <= s.retry_budget <= 1000:
            raise GraphError(f"task {s.name!r}: a retry budget is a whole number from 0 to "
                             f"1000, got {s.retry_budget!r}")
        new[s.name] = s
    for s in specs:
        for d in s.deps:
            bad = names.describe("dependency", d)
            if bad is not None:
                raise GraphError(f"task {s.name!r}: {bad}")
            if d not in known and d not in new:
                raise GraphError(f"task {s.name!r} depends on unknown task {d!r}")
    cycle = find_cycle({s.name: s.deps for s in specs}, set(new))
    if cycle:
        raise GraphError("dependency cycle: " + " -> ".join(cycle))
    return [{"task": s.name, "deps": sorted(set(s.deps)), "review-required": s.review_required,
             "requires-assignment": s.requires_assignment, "disposition": s.disposition,
             "retry-budget": s.retry_budget}
            for s in specs]


def dependency_path(conn: sqlite3.Connection, ids: dict[str, int], start: str,
                    goal: str) -> list[str] | None:
    """A path of dependents from ``start`` to ``goal`` (None when unreachable)."""
    seen = {start}
    stack = [(start, [start])]
    while stack:
        node, path = stack.pop()
        if node == goal:
            return path
        for (nxt,) in conn.execute(
                "SELECT t.name FROM edges e JOIN tasks t ON t.id = e.task "
                "WHERE e.dep = ?", (ids[node],)):
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def find_cycle(deps: dict[str, Iterable[str]], among: set[str]) -> list[str] | None:
    """A dependency cycle among ``among`` as a path ``a -> b -> ... -> a`` (dependency first)."""
    dependents: dict[str, list[str]] = {n: [] for n in among}
    for task, ds in deps.items():
        for d in ds:
            if d in among:
                dependents[d].append(task)
    state: dict[str, int] = {}
    for root in sorted(among):
        if root in state:
            continue
        stack = [(root, iter(sorted(dependents[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(dependents[child]))))
    return None
