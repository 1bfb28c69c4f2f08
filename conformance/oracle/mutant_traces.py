"""A model mutant replayed through the incident traces it stands for.

Every trace whose ``source.incident`` is one of the mutant's incidents is run
through the executable model with the mutant's rules (its reducer and patched
functions installed; a mutant with a reducer of its own is run by the interpreter, which
calls it, not by the compiled model, which compiles the kernel's). The trace's expectations are the correct model's
answers, so a divergence (a decision, a fact, a broken invariant, a step the
mutant cannot take) means the trace detects the bug it is for.
"""
from __future__ import annotations

import importlib.resources
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from wgk.conformance.oracle import systems
from wgk.conformance.oracle.lockstep import Divergence, Oracle, match_facts, meets_expectations
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.traces.format import load_trace, trace_files
from wgk.conformance.z3.mutants import patched


def corpus() -> Path:
    """The bundled traces (the package data ``wgk.traces``, or the checkout's ``traces/``)."""
    try:
        return Path(str(importlib.resources.files("wgk.traces")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "traces"


#: Traces already read, by path, with the file's size and time of change when it was read
#: (every mutant looks through the same corpus; a file changed since is read again).
_READ: dict[Path, tuple[tuple[int, int], Any]] = {}


def _read(path: Path):
    st = path.stat()
    stamp = (st.st_size, st.st_mtime_ns)
    hit = _READ.get(path)
    if hit is None or hit[0] != stamp:
        hit = _READ[path] = (stamp, load_trace(path))
    return hit[1]


def remember(traces: list) -> None:
    """Traces the caller has just read from their files (``trace.path``), kept as if read
    here: the gate reads the corpus once, before its workers start, and every mutant looks
    through it (a file changed since is still read again)."""
    for trace in traces:
        if trace.path:
            path = Path(trace.path)
            st = path.stat()
            _READ[path] = ((st.st_size, st.st_mtime_ns), trace)


def unchanged(trace) -> bool:
    """``trace`` was read from its file as it is now: the file's size and time of change are
    those recorded when it was read (``remember``, or read here); False for one not recorded."""
    if not trace.path:
        return False
    path = Path(trace.path)
    hit = _READ.get(path)
    try:
        st = path.stat()
    except OSError:
        return False
    return hit is not None and hit[1] is trace and hit[0] == (st.st_size, st.st_mtime_ns)


#: The trace files under a folder, by folder, with the time of change of every folder under it
#: when they were listed (every mutant looks through the same corpus; a folder whose entries
#: changed since, or a new one under it, changes one of those times: it is listed again).
_LISTED: dict[Path, tuple[tuple[tuple[str, int], ...], list[Path]]] = {}


def _folders(root: Path) -> tuple[tuple[str, int], ...] | None:
    try:
        return tuple((d, os.stat(d).st_mtime_ns) for d in
                     [str(root)] + [os.path.join(top, n) for top, names, _ in os.walk(root)
                                    for n in names])
    except OSError:
        return None


def _unchanged(folders: tuple[tuple[str, int], ...]) -> bool:
    try:
        return all(os.stat(d).st_mtime_ns == t for d, t in folders)
    except OSError:
        return False


def listed(root: Path) -> list[Path]:
    """``trace_files([root])``, listed again only when a folder under ``root`` changed."""
    hit = _LISTED.get(root)
    if hit is not None and _unchanged(hit[0]):
        return hit[1]
    folders = _folders(root) if root.is_dir() else None
    files = trace_files([root])
    if folders is not None:
        _LISTED[root] = (folders, files)
    return files


def incident_traces(m: Any, root: Path | None = None) -> list[Path]:
    """The traces of the mutant's incidents (counterexample traces are not incidents)."""
    out = []
    for path in listed(Path(root or corpus())):
        if "counterexamples" in path.parts:
            continue
        incident = (_read(path).source or {}).get("incident")
        if incident in m.incidents:
            out.append(path)
    return out


def trace_verdicts(m: Any, root: Path | None = None) -> list[dict]:
    """``[{"trace", "detects", "why"}]``: each incident trace replayed on the mutated model, up
    to its first divergence (the one ``replay`` would list first)."""
    out = []
    sem = m.semantics()
    for path in incident_traces(m, root):
        trace = _read(path)
        with ExitStack() as stack:
            stack.enter_context(sem.active())
            if m.decide is not None:
                stack.enter_context(patched(((systems, "decide", m.decide),)))
            try:
                # interpreted: a reducer of its own is not the kernel's ``decide`` the compiled
                # model compiles, and a mutant's rules and patches are its own, so a model
                # compiled for them would serve the steps up to one divergence only (compiling
                # a task's verdicts costs some 25 interpreted ones)
                first = first_divergence(trace, ModelSystem(trace, rules=sem.rules,
                                                            compiled=False))
            except StepError as e:
                out.append({"trace": path.stem, "detects": True, "why": f"step refused: {e}"})
                continue
        why = "" if first is None else f"step {first.step}: {first.what}"
        out.append({"trace": path.stem, "detects": first is not None, "why": why})
    return out


def first_divergence(trace, model: ModelSystem) -> Divergence | None:
    """The first divergence of ``replay(trace, [model])``, the trace run no further than the
    step where it is found: the model's invariants before the first step, then each step's
    decision, invariants and facts against the trace (a step the model cannot take is one),
    then the trace's final facts."""
    bad = model.check()
    if bad:
        return Divergence(trace.id, None, model.name, "invariant", None, [], bad)
    oracle = Oracle(model, trace=trace.id)
    for n, step in enumerate(trace.steps):
        oracle.n = n - 1
        try:
            decision = oracle.advance(step)
        except StepError as e:
            return Divergence(trace.id, n, model.name, "step-error", step, None, str(e))
        found = meets_expectations(trace.id, n, step, model, decision)
        if found:
            return found[0]
    if trace.expect:
        diffs = match_facts(trace.expect, model.project())
        if diffs:
            return Divergence(trace.id, None, model.name, "final-facts", None, trace.expect,
                              None, tuple(diffs))
    return None
