"""The observable projection as flat rows, and what a step changed.

A task's projection (``wgk.model.observe.observe_task``) is flattened to
``key: value`` rows (``owner.pid``, ``receipts.work-save.fence``...) grouped
in the sections the page shows; a step's changes are the rows whose value
differs from the state before.
"""
from __future__ import annotations

import json
from typing import Any

#: section -> the top-level projection keys shown in it (everything else is "other").
SECTIONS: dict[str, tuple[str, ...]] = {
    "status": ("status", "dependency-satisfied", "recovery-rank"),
    "attempt": ("generation", "attempt", "fence", "lease-epoch", "attempt-state", "leases",
                "deadline"),
    "owner": ("owner", "owner-seen"),
    "phase": ("phase", "exit", "reason", "revision", "candidate", "base", "version",
              "disposition", "promotions", "effect-done"),
    "receipts": ("receipts",),
    "evidence": ("evidence", "counters"),
    "work": ("worktree", "saved-work", "retained", "imported"),
    "plan": ("plan",),
}
ORDER = tuple(SECTIONS) + ("other",)


def show(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":")) if v else "[]" if isinstance(v, list) else "{}"
    return str(v)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):  # an empty object has no rows (like an absent one)
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def section_of(key: str) -> str:
    head = key.split(".", 1)[0]
    for name, keys in SECTIONS.items():
        if head in keys:
            return name
    return "other"


def task_rows(before: dict | None, after: dict) -> dict[str, dict[str, Any]]:
    """``key -> {section, value, before?}`` for one task's projection (``before`` only if changed)."""
    old = flatten(before) if before is not None else {}
    new = flatten(after)
    rows: dict[str, dict[str, Any]] = {}
    for key in list(new) + [k for k in old if k not in new]:
        value = show(new.get(key))
        row = {"section": section_of(key), "value": value}
        if before is not None and show(old.get(key)) != value:
            row["before"] = show(old.get(key))
        rows[key] = row
    return rows


def changes(before: dict, after: dict) -> list[str]:
    """Readable ``t1.base: - -> c3`` lines between two whole projections (``observe``)."""
    out = []
    for name, t in after["tasks"].items():
        for key, row in task_rows(before["tasks"].get(name), t).items():
            if "before" in row and section_of(key) != "plan":
                out.append(f"{name}.{key}: {row['before']} -> {row['value']}")
    for key in ("target", "now"):
        if before.get(key) != after.get(key):
            out.append(f"{key}: {show(before.get(key))} -> {show(after.get(key))}")
    if len(before.get("journal", {})) != len(after.get("journal", {})):
        out.append(f"journal: {len(before['journal'])} -> {len(after['journal'])} entries")
    return out
