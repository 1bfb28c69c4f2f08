"""Shared by the gate's tests: the packages' sources copied where the cache reads them from, one
function of a copy edited, a gate run cold and again without a cache, a report without what
differs from run to run, and a run's sections and checks in their order."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wgk.conformance.reports import gate, gate_cache


def copied_sources(into: Path) -> dict[str, Path]:
    """Each package of ``gate_cache.ROOTS`` copied under ``into``/src (no bytecode)."""
    sources = {}
    for name, root in gate_cache.ROOTS.items():
        sources[name] = into / "src" / name
        shutil.copytree(root, sources[name], ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return sources


def edit_function(path: Path, qual: str) -> str:
    """Add a statement to the body of function ``qual`` of ``path``; the text before."""
    text = path.read_text()
    for found, first, _last in gate_cache._functions(path)[1]:
        if found == qual:
            lines = text.splitlines(keepends=True)
            body = lines[first - 1]
            lines.insert(first - 1, body[:len(body) - len(body.lstrip())] + "_changed = 1\n")
            path.write_text("".join(lines))
            return text
    raise AssertionError(f"no function {qual} in {path}")


def plain_report(report: dict) -> dict:
    """A JSON report without its timings (the sections', the checks' and any check data's),
    scratch folder and the cache's line."""
    out = json.loads(json.dumps(report))
    for k in ("seconds", "scratch", "cache"):
        out.pop(k, None)
    for s in out["sections"].values():
        s.pop("seconds")
        for c in s["checks"]:
            c.pop("seconds")
            if isinstance(c.get("data"), dict):
                c["data"].pop("seconds", None)
    return out


def cold_then_plain(runs, noted) -> tuple:
    """The first gate of ``runs`` (with its cache), what ``noted()`` reads right after it,
    and the same gate without a cache (``runs.gate(monkeypatch, cache=...)``)."""
    mp = pytest.MonkeyPatch()
    try:
        first = runs.gate(mp)
        seen = noted()
        plain = runs.gate(mp, cache=False)
    finally:
        mp.undo()
    return first, seen, plain


def report_shape(result) -> list:
    """A gate run's sections and checks in their order: name, verdict, detail and group."""
    return [(s.name, s.verdict, [(c.name, c.verdict, c.detail, c.group) for c in s.checks])
            for s in result.sections_run]


def small_quick_budget(monkeypatch) -> None:
    """The quick budget cut to the replay, the in-process crash cuts and the two kernels."""
    monkeypatch.setitem(gate.BUDGETS, "quick", {"replay": True, "crash-cuts": ["in-process"],
                                                "two-kernels": True})


def trace_with_rejected_dispatch(tmp_path: Path) -> Path:
    """A dependent dispatched before its dependency is done: rejected (the fake kernel's
    ``diverge`` mode answers ``unknown-task`` instead)."""
    doc = {"format": "wgk-trace/1", "id": "planted-dispatch",
           "title": "A dependent is not dispatched before its dependency is done",
           "source": {"kind": "counterexample", "provenance": "tests/gate_sources.py"},
           "description": "Dispatch a, then b (which depends on a): b is rejected.",
           "graph": {"id": "g", "target": "main-0",
                     "tasks": [{"name": "a", "deps": []}, {"name": "b", "deps": ["a"]}]},
           "steps": [{"request": {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "k1",
                                  "expected-attempt": 0, "mint": "t1",
                                  "owner": {"pid": 10, "birth": 100, "session": "s1"}},
                      "expect": {"decision": "applied"}},
                     {"request": {"kind": "dispatch", "actor": "daemon", "task": "b", "key": "k2",
                                  "expected-attempt": 0, "mint": "t2",
                                  "owner": {"pid": 11, "birth": 101, "session": "s2"}},
                      "expect": {"decision": "rejected", "code": "dependency-not-done"}}]}
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(doc))
    return path
