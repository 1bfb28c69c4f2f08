"""Shortest witnesses of the ``sometimes`` properties, each searched by bounded model
checking on a small instance of its own, and their JSON reports (``wgk prove`` and the gate).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY, Property

from wgk.conformance.z3.bmc import CheckResult, check, check_many, follow, invariant_goal
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
    # the default budget (2) spent in one generation: three attempts, each failed
    "retry-budget-spent-reached": (Instance(tasks=1, attempts=3, groups=("core",)), 6),
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
    # dispatch, edit, receipt-completion, owner-dies, probe-owner, resume
    "receipt-resumed-reached": (Instance(tasks=1, groups=("core", "receipt", "env")), 7),
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


def witness_reports(goals: list[str], recorded: bool = False) -> list[dict]:
    """Shortest witnesses of ``goals``, as JSON (runs in a worker process too); with
    ``recorded``, each goal along its recorded path first (``witness_along``)."""
    if not recorded:
        return [dict(witness(g).to_json(), found_by="search") for g in goals]
    paths = recorded_paths()
    out = []
    for g in goals:
        r, how = witness_along(g, paths)
        out.append(dict(r.to_json(), found_by=how))
    return out


# --- recorded paths ---------------------------------------------------------------------

#: The path of templates each witness took when it was last searched (``wgk prove
#: --write-witness-paths``). Following one costs an unrolling of one template per step
#: instead of every template at every depth; the solver still finds the request fields,
#: and the trace is replayed through the executable model like a searched one.
PATHS_FILE = Path(__file__).with_name("witness_paths.json")
PATHS_FORMAT = "wgk-witness-paths/1"


class PathsError(ValueError):
    """A recorded-paths file that cannot be read (one line naming the file and where)."""


def recorded_paths(path: Path | None = None) -> dict[str, list[str]]:
    """The recorded witness paths by goal, from ``path`` (default ``PATHS_FILE``; none when
    the file is absent)."""
    path = PATHS_FILE if path is None else path
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as e:
        raise PathsError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    paths = doc.get("paths") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("format") != PATHS_FORMAT \
            or not isinstance(paths, dict) \
            or not all(isinstance(p, list) and all(isinstance(x, str) for x in p)
                       for p in paths.values()):
        raise PathsError(f"{path}: not a {PATHS_FORMAT} document")
    return paths


def write_paths(found: dict[str, list[str]], path: Path | None = None) -> None:
    """Record ``found`` (goal -> template labels) beside the paths already recorded."""
    path = PATHS_FILE if path is None else path
    paths = {g: p for g, p in recorded_paths(path).items() if g in REGISTRY}
    paths.update(found)
    lines = [f"  {json.dumps(g)}: {json.dumps(paths[g])}" for g in sorted(paths)]
    path.write_text(f'{{"format": "{PATHS_FORMAT}", "paths": {{\n' + ",\n".join(lines) + "\n}}\n")


def witness_along(prop_id: str, paths: dict[str, list[str]] | None = None
                  ) -> tuple[CheckResult, str]:
    """The witness of ``prop_id`` along its recorded path when that still reaches it
    (``"recorded path"``), else searched (``"search"``, or ``"search: recorded path
    stale"`` when a recorded path no longer reaches it)."""
    p = REGISTRY[prop_id]
    path = (recorded_paths() if paths is None else paths).get(prop_id)
    if path is not None:
        inst, _ = WITNESSES.get(prop_id, DEFAULT_WITNESS)
        r = follow(invariant_goal(p), inst, path)
        if r is not None:
            return r, "recorded path"
    return witness(prop_id), ("search" if path is None else "search: recorded path stale")
