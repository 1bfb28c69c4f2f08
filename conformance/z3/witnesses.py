"""Shortest witnesses of the ``sometimes`` properties, each searched by bounded model
checking on a small instance of its own, and their JSON reports (``wgk prove`` and the gate).
"""
from __future__ import annotations

from typing import Callable

from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY, Property

from wgk.conformance.z3.bmc import CheckResult, check, check_many, invariant_goal
from wgk.conformance.z3.transition import MODEL, Semantics


_OPS = ("core", "operator")
_RUN = Instance(tasks=1, attempts=2, groups=("core", "env"))
#: A proven legacy Done reopened under a dependent (two generations of the dependency).
_REOPEN = Instance(tasks=2, generations=2, groups=("core", "legacy", "reopen"))
#: Where each ``sometimes`` property is looked for: a small instance whose request groups
#: make it reachable, and a depth that leaves room above its shortest witness. Properties
#: sharing an instance share one unrolling.
WITNESSES: dict[str, tuple[Instance, int]] = {
    "done-reached": (_RUN, 13),
    "dependent-done-reached": (Instance(tasks=2, groups=("core", "legacy")), 6),
    "needs-repair-reached": (_RUN, 8),
    "target-moved-reached": (_RUN, 12),
    "protected-path-held": (_RUN, 8),
    "archived-reached": (Instance(tasks=1, groups=("core", "archive")), 15),
    "wait-released-reached": (Instance(tasks=1, groups=("core", "waits")), 3),
    "wait-expired-reached": (Instance(tasks=1, groups=("core", "waits", "env")), 5),
    "retry-reached": (_RUN, 5),
    "resume-reached": (_RUN, 6),
    "lost-reached": (_RUN, 6),
    "pid-reuse-detected": (_RUN, 6),
    "needs-reconciliation-reached": (Instance(tasks=1, groups=("core", "legacy")), 4),
    "reconstructed-reached": (Instance(tasks=1, groups=("core", "legacy")), 4),
    "upgrade-blocked-reached": (Instance(tasks=1, generations=2, groups=_OPS), 5),
    "aborted-preserved-reached": (Instance(tasks=1, generations=2, groups=_OPS), 5),
    "reset-reached": (Instance(tasks=1, generations=2, groups=_OPS), 4),
    "import-reached": (_RUN, 6),
    "compaction-continued": (Instance(tasks=1, groups=("core", "evidence")), 5),
    "dependent-reruns-after-reopen": (_REOPEN, 6),
    "dependency-reopened-held": (_REOPEN, 12),
}
DEFAULT_WITNESS = (Instance(tasks=2, attempts=2, generations=2, versions=2,
                            groups=("core", "evidence", "operator", "legacy", "env")), 8)


def witness(prop_id: str, sem: Semantics = MODEL,
            progress: Callable[[str], None] | None = None) -> CheckResult:
    """A shortest trace reaching ``sometimes`` property ``prop_id`` (or ``unreachable``)."""
    p = REGISTRY[prop_id]
    if p.kind != "sometimes":
        raise ValueError(f"{prop_id} is not a sometimes property")
    inst, depth = WITNESSES.get(prop_id, DEFAULT_WITNESS)
    return check(invariant_goal(p), inst, depth, sem, progress)


def witnesses(sem: Semantics = MODEL, progress: Callable[[str], None] | None = None
              ) -> list[CheckResult]:
    """A shortest witness of every sometimes property (goals sharing an instance share
    one unrolling)."""
    by_instance: dict[Instance, list[Property]] = {}
    depths: dict[Instance, int] = {}
    for p in REGISTRY.values():
        if p.kind == "sometimes":
            inst, depth = WITNESSES.get(p.id, DEFAULT_WITNESS)
            by_instance.setdefault(inst, []).append(p)
            depths[inst] = max(depths.get(inst, 0), depth)
    found: dict[str, CheckResult] = {}
    for inst, props in by_instance.items():
        for r in check_many([invariant_goal(p) for p in props], inst, depths[inst], sem):
            found[r.goal.id] = r
            if progress:
                progress(f"{r.goal.id}: {r.status}"
                         + (f" at depth {r.found_at}" if r.found_at is not None else ""))
    return [found[p.id] for p in REGISTRY.values() if p.kind == "sometimes"]


def sometimes_goals() -> list[str]:
    """Every registered ``sometimes`` property, in registry order."""
    return [p.id for p in REGISTRY.values() if p.kind == "sometimes"]


def witness_reports(goals: list[str]) -> list[dict]:
    """Shortest witnesses of ``goals``, as JSON (runs in a worker process too)."""
    return [witness(g).to_json() for g in goals]
