"""The gate's ``coverage`` section: which cells of the model's decision space
(``wgk.conformance.oracle.coverage``) the gate's deterministic checks sent to the
implementation, per kind.

The replay, probes and fuzz sections record the cells of every request they send to the
implementation (``coverage.recording``, in the lockstep driver); this section adds the
stored witnesses (``wgk.conformance.oracle.witnesses``), replayed in lockstep against the
implementation, and fails a kind with any reachable cell nobody sent, naming the cells (a
cell the tables allow that no witness reaches is listed as unreachable only with a z3 proof
as its reason, ``wgk.conformance.z3.unreachable``).
Stale witnesses (a trace they start from changed, or the model's behaviour as they read it:
its reachable cells, the proofs of the unreachable ones, a witness no longer reaching its cell;
``witnesses.stale_reason``) fail the section with the command that searches them again."""
from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Callable

from wgk.conformance.oracle import mutant_traces, witnesses
from wgk.conformance.oracle.coverage import cells, per_kind
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, bundled_traces, flag_of
from wgk.conformance.reports.gate_report import Check
from wgk.conformance.traces.format import load_trace

#: The sections whose checks carry the cells they sent (``data["cells"]``).
MEASURED = ("replay", "probes", "fuzz")


def sent_cells(sections: dict) -> set | None:
    """The cells the measured sections' checks recorded (None: none of them ran)."""
    found: set = set()
    ran = False
    for name in MEASURED:
        for c in sections.get(name, []):
            if "cells" in c.data:
                ran = True
                found.update(c.data["cells"])
    return found if ran else None


def bundled_as_loaded(loaded: list, ids: set[str] | None = None) -> list:
    """The bundled traces, each taken from ``loaded`` when a trace there was read from the same
    file (the gate read them once; the file unchanged since, by size and time of change) and
    read from its file otherwise. The folder's listing is kept while no folder under it
    changed (``mutant_traces.listed``), and a file named by the very path a trace was read
    from is that trace's without resolving either (every part of the coverage's witnesses
    asks this again; the paths resolved only for a file not found so). ``ids``: only the
    traces of those ids (a file whose text names another id as its ``id`` is not read whole:
    its trace would be left out)."""
    as_read = {Path(t.path): t for t in loaded if t.path}
    by_path: dict | None = None
    out = []
    for f in mutant_traces.listed(Path(bundled_traces())):
        t = as_read.get(f)
        if t is None:
            if by_path is None:
                by_path = {}
                for u in loaded:
                    if u.path:
                        with contextlib.suppress(OSError):
                            by_path[Path(u.path).resolve()] = u
            t = by_path.get(f.resolve())
        if t is None or not mutant_traces.unchanged(t):
            if ids is not None and _named_id(f) not in ids | {None}:
                continue
            t = load_trace(f)
        if ids is None or t.id in ids:
            out.append(t)
    return out


def _named_id(path: Path) -> str | None:
    """The ``id`` a trace file's JSON names (None: unread, then the file is read whole)."""
    try:
        found = json.loads(path.read_bytes()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def witness_replays(loaded: list, doc: dict | None = None, make_impl: Callable = ImplSystem,
                    workers: int = 1, kept: Callable | None = None,
                    only: set[str] | None = None, stale: bool = True,
                    prove: Callable | None = None) -> dict:
    """The witnesses of ``doc`` (the stored ones by default) replayed against the implementation
    from the bundled traces' states: the cells they sent, the problems found, why they are
    stale (``witnesses.stale_reason``; None: current) and the seconds taken. They read
    neither the other sections' results nor their cells, so the gate replays them among its
    other sections' parts (``gate._on_workers``) and hands the outcome to this
    section after them. ``kept``: as ``witnesses.replay_witnesses``'s (the gate's cache keeps
    each run of a trace's witnesses, ``gate_cache_memo.kept_run``). ``only``: the witnesses
    of those traces alone (by id); ``stale``: False leaves out why they are stale (then no
    ``stale-reason``: the only thing here that reads the model's text). The outcomes of
    disjoint ``only``, in the witnesses' order of their traces, with one that finds why they
    are stale, give the whole one (``merged``). ``prove``: as ``witnesses.stale_reason``'s."""
    doc = witnesses.load() if doc is None else doc
    t0 = time.perf_counter()
    # where the witnesses start (every trace when finding whether they are stale: it compares
    # the digests of all those they start from)
    bundled = bundled_as_loaded(loaded, None if stale or only is None else only)
    chosen = [w for w in doc["witnesses"] if only is None or w["trace"] in only]
    sent, problems = witnesses.replay_witnesses(bundled, chosen, make_impl, workers,
                                                **({} if kept is None else {"kept": kept})) \
        if chosen else (set(), [])
    out = {"sent": sorted(sent), "problems": problems}
    if stale:
        # whether they are stale reads neither (the unreachable cells' proofs may take seconds:
        # found here, beside the other sections' parts, rather than after them)
        out["stale-reason"] = witnesses.stale_reason(doc, bundled, prove)
    out["seconds"] = time.perf_counter() - t0
    return out


def witness_traces(doc: dict | None = None) -> list[str]:
    """The ids of the traces the witnesses start from, in the order ``replay_witnesses``
    replays them (the first witness of each)."""
    doc = witnesses.load() if doc is None else doc
    return list(dict.fromkeys(w["trace"] for w in doc["witnesses"]))


def merged(outcomes: list[dict]) -> dict:
    """The outcome of ``witness_replays`` over every trace from those of its parts (disjoint
    traces, in ``witness_traces``' order; one of them with ``stale-reason``): the cells sent,
    the problems in that order, why they are stale, the seconds summed."""
    out: dict = {"sent": sorted({c for o in outcomes for c in o["sent"]}),
                 "problems": [p for o in outcomes for p in o["problems"]]}
    for o in outcomes:
        if "stale-reason" in o:
            out["stale-reason"] = o["stale-reason"]
    out["seconds"] = sum(o["seconds"] for o in outcomes)
    return out


def measure(loaded: list, earlier: set | None, doc: dict | None = None,
            make_impl: Callable = ImplSystem, workers: int = 1,
            replayed: dict | None = None) -> dict:
    """The coverage of the checks that sent ``earlier`` (the traces alone, by the model, when
    None) plus the witnesses of ``doc`` (the stored ones by default) replayed against the
    implementation from the bundled traces' states (``make_impl``: trace -> the system under
    test, wgk's own kernel in process by default): per kind, the stale flag, the witnesses'
    problems. ``workers``: the processes the witnesses are replayed on; ``replayed``: their
    replay done already (``witness_replays`` of the same traces and witnesses)."""
    doc = witnesses.load() if doc is None else doc
    t0 = time.perf_counter()
    base = witnesses.trace_cells(loaded) if earlier is None else set(earlier)
    bundled = bundled_as_loaded(loaded)                    # where the witnesses start
    earlier_seconds = 0.0 if replayed is None else replayed["seconds"]
    if replayed is None:
        replayed = witness_replays(loaded, doc, make_impl, workers)
    sent, problems = set(replayed["sent"]), list(replayed["problems"])
    covered = base | sent
    unreached = {c: why for c, why in doc.get("unreached", {}).items() if c not in covered}
    why = replayed["stale-reason"] if "stale-reason" in replayed else \
        witnesses.stale_reason(doc, bundled)
    return {"stale": why is not None, "stale-reason": why, "witnesses": len(doc["witnesses"]),
            "problems": problems, "kinds": per_kind(covered, unreached),
            "seconds": time.perf_counter() - t0 + earlier_seconds,
            "covered": len(covered & {c for c, why in cells().items() if why is None}),
            "reachable": sum(why is None for why in cells().values()) - len(unreached),
            "unreached": unreached}


def coverage_checks(budget: str, progress: Progress | None, loaded: list,
                    earlier: set | None = None, doc: dict | None = None,
                    make_impl: Callable = ImplSystem, workers: int = 1,
                    replayed: dict | None = None) -> list[Check]:
    """One check for the witnesses (current, answered alike), one per kind (every reachable
    cell sent; ``make_impl``, ``workers``, ``replayed``: as ``measure``'s)."""
    flag_of(budget, "coverage", BUDGETS[budget]["coverage"])
    meter = Meter("coverage", None, progress)
    m = measure(loaded, earlier, doc, make_impl, workers, replayed)
    out = [Check("coverage", "witnesses", "fail" if m["stale"] or m["problems"] else "pass",
                 m["seconds"],
                 f"stale ({m['stale-reason']}): run wgk coverage --write" if m["stale"] else
                 (m["problems"][0] if m["problems"] else ""),
                 {"witnesses": m["witnesses"], "problems": m["problems"][:20],
                  "covered": m["covered"], "reachable": m["reachable"],
                  "unreached": m["unreached"]})]
    for kind, row in m["kinds"].items():
        missing = row["uncovered"]
        detail = (f"{len(missing)} of {row['reachable']} reachable cells never sent: "
                  + ", ".join(f"{kind}/{c}" for c in missing[:6])
                  + (" ..." if len(missing) > 6 else "")) if missing else ""
        out.append(Check("coverage", kind, "fail" if missing else "pass", 0.0, detail,
                         {"reachable": row["reachable"], "covered": row["covered"],
                          "uncovered": missing, "unreachable": row["unreachable"]},
                         group="kinds"))
        meter.step(kind)
    return out


__all__ = ["MEASURED", "coverage_checks", "measure", "merged", "sent_cells", "witness_replays",
           "witness_traces"]
