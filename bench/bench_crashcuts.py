"""Crash cuts: the cost of one cut must not grow with the trace's length.

Each cut restores a snapshot taken before its step (a SQLite backup and the
world), reruns that step with a crash at one boundary, recovers and compares;
it never replays the trace from its start. This benchmark builds traces of 10,
100 and 1000 steps (tasks in a chain, each driven through the whole completion
transaction), cuts every boundary of the last steps of each trace (where the
database is largest) and reports the time per cut and its ratio to the
10-step trace's. The one-off crash-free pass that takes the snapshots is
reported separately. The thorough checks are also run with every rebuild replaying
the whole ledger (``crash_cuts(images=False)``), beside the default, where a rebuild
starts from the ledger as replayed before the step in the crash-free run.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchResult, Check, Figure, main, say, settle  # noqa: E402

from wgk.conformance.oracle.crashcuts import crash_cuts  # noqa: E402
from wgk.conformance.oracle.replay import TraceBuilder  # noqa: E402

NAME = "crashcuts"
LAST = 8          # steps cut at the end of every trace

PLAN = [
    ("submit", "worker", {}), ("quiesce", "wrapper", {}),
    ("save-work", "wrapper", {"candidate": "W", "base": "B"}), ("seal-candidate", "daemon", {"candidate": "W"}),
    ("validate", "validator", {"candidate": "W", "verdict": "pass"}),
    ("accept", "daemon", {"candidate": "W", "verdict": "not-required"}),
    ("record-disposition", "wrapper", {"disposition": "land"}), ("prepare-effect", "promoter", {}),
    ("commit-effect", "promoter", {"candidate": "W", "base": "B"}), ("prepare-cleanup", "cleanup", {}),
    ("commit-cleanup", "cleanup", {}), ("save-graph", "daemon", {}),
]


def long_trace(steps: int):
    """A chain of tasks completed one after another, cut off at ``steps`` steps."""
    per_task = 2 + len(PLAN)
    n = -(-steps // per_task)
    names = [f"t{i}" for i in range(n)]
    tasks = [{"name": t, "deps": [names[i - 1]] if i else []} for i, t in enumerate(names)]
    b = TraceBuilder(f"bench-{steps}", f"{steps} steps", {"kind": "recorded-run", "provenance": "bench"},
                     "synthetic", tasks)
    base = "main-0"
    for i, t in enumerate(names):
        work = f"c-{t}"
        b.send("dispatch", "daemon", t, None, owner={"pid": 1000 + i, "birth": 5000 + i, "session": t})
        b.env("edit", task=t, content=work)
        for kind, actor, params in PLAN:
            p = {k: (work if v == "W" else base if v == "B" else v) for k, v in params.items()}
            b.send(kind, actor, t, None, **p)
        base = work
    b.trace.steps = b.trace.steps[:steps]
    return b.trace


def run(quick: bool = False) -> BenchResult:
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    per_cut: dict[int, float] = {}
    for length in (10, 100) if quick else (10, 100, 1000):
        trace = long_trace(length)
        say(f"  {length} steps: cutting the last {LAST} steps ...")
        for mode in ("scoped", "thorough", "whole"):
            t1 = time.perf_counter()
            result = crash_cuts(trace, steps=range(length - LAST, length),
                                checks="thorough" if mode == "whole" else mode,
                                images=mode != "whole")
            total = time.perf_counter() - t1
            cut_time = sum(c.seconds for c in result.cuts)
            checks.append(Check(f"{length} steps, {mode}: every cut passes", result.passed,
                                f"{len(result.failed)} of {len(result.cuts)} cuts failed"))
            per_cut[(length, mode)] = cut_time / len(result.cuts)
            if mode == "whole":
                ours = per_cut[(length, "thorough")]
                figures.append(Figure(
                    f"time per crash cut, {length}-step trace, thorough checks, rebuilds from "
                    "the replay before the step", ours * 1000, "ms",
                    peer="each rebuild replaying the whole ledger", peer_value=cut_time / len(result.cuts) * 1000,
                    higher_is_better=False, note="the same cuts and checks, back to back"))
                continue
            figures.append(Figure(f"time per crash cut, {length}-step trace, {mode} checks",
                                  per_cut[(length, mode)] * 1000, "ms", higher_is_better=False,
                                  note=f"{len(result.cuts)} cuts of the last {LAST} steps"))
            if mode == "scoped":
                figures.append(Figure(f"crash-free pass with snapshots, {length}-step trace",
                                      total - cut_time, "s", higher_is_better=False,
                                      note="once per trace: replays it and snapshots the cut steps"))
    for (length, mode), t in per_cut.items():
        if length != 10 and mode != "whole":
            figures.append(Figure(f"per-cut cost, {length} / 10 steps, {mode} checks",
                                  t / per_cut[(10, mode)], "x", higher_is_better=False,
                                  note="near 1: a cut restores a snapshot and checks what the step "
                                       "can touch" if mode == "scoped" else
                                       "grows with history: the whole projection, ledger, rebuild "
                                       "and audit are checked after every cut"))
    return settle(NAME, figures, checks, [], [], t0)


if __name__ == "__main__":
    sys.exit(main(NAME, run))
