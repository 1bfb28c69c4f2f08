"""Witnesses of the ``sometimes`` properties as JSON reports (``wgk prove`` and the gate)."""
from __future__ import annotations

from wgk.model.invariants import REGISTRY

from wgk.conformance.z3.bmc import witness


def sometimes_goals() -> list[str]:
    """Every registered ``sometimes`` property, in registry order."""
    return [p.id for p in REGISTRY.values() if p.kind == "sometimes"]


def witness_reports(goals: list[str]) -> list[dict]:
    """Shortest witnesses of ``goals``, as JSON (runs in a worker process too)."""
    return [witness(g).to_json() for g in goals]
