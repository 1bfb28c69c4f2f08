"""Admission parity: ``ready`` lists a task exactly when a daemon ``dispatch`` with the task's
current expected attempt would be applied, in the model and in the implementation, at every
state of the traces that exercise what dispatch refuses (unassigned, parked on a wait, a spent
retry budget, a semantic failure)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from wgk.conformance.oracle.crashcuts import _restore, _snapshot
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import load_trace
from wgk.impl import no_hook

INCIDENTS = Path(__file__).resolve().parent.parent / "traces" / "incidents"
TRACES = [INCIDENTS / "43-ready-is-what-dispatch-admits.json",
          INCIDENTS / "41-retries-per-generation.json",
          INCIDENTS / "31-typed-failures-and-retry-budget.json",
          INCIDENTS / "33-external-wait.json"]


def _dispatch(name: str, attempt: int, n: int) -> dict:
    """The daemon's dispatch of ``name`` with the expected attempt it sees (a fresh key)."""
    return {"request": {"kind": "dispatch", "actor": "daemon", "task": name,
                        "key": f"parity:{name}:{n}", "expected-attempt": attempt,
                        "owner": {"pid": 9000 + n, "birth": 90000 + n, "session": f"parity-{n}",
                                  "wrapper-epoch": 1, "child-epoch": 1},
                        "mint": f"tok-parity-{n}"}}


def _admitted_by_the_model(model: ModelSystem, n: int) -> set[str]:
    out = set()
    for name, facts in model.project()["tasks"].items():
        snap = model.snapshot()
        if model.apply(_dispatch(name, facts["attempt"], n))["decision"] == "applied":
            out.add(name)
        model.restore(snap)
    return out


def _admitted_by_the_implementation(impl: ImplSystem, where: str, n: int) -> set[str]:
    out = set()
    snap = _snapshot(impl, where + ".snap")
    for name, facts in impl.project()["tasks"].items():
        scratch = _restore(snap, where, no_hook)
        try:
            if scratch.apply(_dispatch(name, facts["attempt"], n))["decision"] == "applied":
                out.add(name)
        finally:
            scratch.close()
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_ready_is_what_a_dispatch_admits_in_the_model(path):
    trace = load_trace(path)
    model = ModelSystem(trace)
    for n, step in enumerate(trace.steps):
        model.apply(step)
        assert set(model.project()["ready"]) == _admitted_by_the_model(model, n), f"after step {n}"


@pytest.mark.parametrize("path", TRACES[:2], ids=lambda p: p.name)
def test_ready_is_what_a_dispatch_admits_in_the_implementation(path, tmp_path):
    trace = load_trace(path)
    impl = ImplSystem(trace)
    refused_while_open = 0
    try:
        for n, step in enumerate(trace.steps):
            impl.apply(step)
            ready = set(impl.project()["ready"])
            admitted = _admitted_by_the_implementation(impl, os.path.join(tmp_path, f"s{n}.db"), n)
            assert ready == admitted, f"after step {n}"
            tasks = impl.project()["tasks"]
            refused_while_open += sum(1 for name, t in tasks.items()
                                      if t["status"] == "open" and name not in admitted)
    finally:
        impl.close()
    assert refused_while_open > 0          # the traces do reach open tasks dispatch refuses
