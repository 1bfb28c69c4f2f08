"""The unbounded suite beside the bounded one: wall and CPU seconds of each.

    python bench/bench_unbounded.py [--quick] [--json]   # as bench/run.py runs it: the bounded
                                               # chain proof at 3 and 6 tasks and the proof at
                                               # the cutoff graph (targets: 10 s each, on 2
                                               # processes as `wgk prove` runs them), then the
                                               # unbounded suite

Each measurement runs in its own process (z3's term store grows within one process).
Each proof's verdict is a check: a frame not proved fails the benchmark.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchResult, Check, Figure, main, say, settle  # noqa: E402


JOBS = 2                       # processes, as `wgk prove` runs by default


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def m_bounded(tasks: str, jobs: str = str(JOBS)) -> dict:
    from wgk.model.actions import Instance
    from wgk.conformance.z3.prove import prove
    before = children_cpu()
    rep, w, c = timed(lambda: prove(Instance.proof(tasks=int(tasks)), jobs=int(jobs)))
    return {"suite": f"bounded chain, {tasks} tasks, {jobs} process{'es' if jobs != '1' else ''}",
            "frames": len(rep.results), "ok": rep.ok, "wall": w,
            "cpu": c + children_cpu() - before, "busiest": max(c, children_cpu() - before)}


def m_cutoff(jobs: str = str(JOBS)) -> dict:
    from wgk.conformance.z3.cutoff import CUTOFF_DEPS
    from wgk.conformance.z3.prove import prove
    from wgk.conformance.z3.unbounded import CUTOFF_INSTANCE
    before = children_cpu()
    rep, w, c = timed(lambda: prove(CUTOFF_INSTANCE, deps=CUTOFF_DEPS, jobs=int(jobs)))
    return {"suite": f"the proof at the cutoff graph, {jobs} process{'es' if jobs != '1' else ''}",
            "frames": len(rep.results), "ok": rep.ok, "wall": w,
            "cpu": c + children_cpu() - before, "busiest": max(c, children_cpu() - before)}


def m_conditions() -> dict:
    from wgk.conformance.z3.unbounded import conditions
    (_, found), w, c = timed(conditions)
    return {"suite": "cutoff conditions (locality, padding)", "frames": len(found),
            "ok": all(f.ok for f in found), "wall": w, "cpu": c}


def m_unbounded() -> dict:
    from wgk.conformance.z3.unbounded import prove_unbounded
    before = children_cpu()
    rep, w, c = timed(lambda: prove_unbounded(jobs=JOBS))
    c += children_cpu() - before
    return {"suite": "unbounded (conditions + cutoff-graph proof)",
            "frames": len(rep.proof.results), "ok": rep.ok, "wall": w, "cpu": c}


MEASURES = {"bounded": m_bounded, "cutoff": m_cutoff, "conditions": m_conditions,
            "unbounded": m_unbounded}


def measure(name: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", name, *args],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"suite": name, "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout)


#: why a proof misses 10 s (bench/README.md, "where a proof's time goes now")
WHY = ("every (property x transition) frame is one z3 query when the step can affect the "
       "property (4,836 frames at 6 tasks, 2,124 asked); a query is asked of a solver holding "
       "the type domain alone, then, when that does not refute it, of one holding every "
       "invariant and lemma at every task. Solving is about two thirds of the CPU (about 8 ms "
       "a query: internalising a goal over every task's branches of one kind, and for the "
       "full solver a search over about 1,500 assumptions; a tail of exactly-one-way-forward); "
       "a request with a key is a branch per answer of the journal; the branches through the "
       "model's decide about a tenth, the goals about a quarter; shared among 2 processes kind "
       "by kind, each kind to the process that comes free")

NAME = "unbounded"
TARGET_SECONDS = 10.0          # `wgk prove` at 6 tasks, and the proof at the cutoff graph


def run(quick: bool = False) -> BenchResult:
    """The bounded chain proof at 3 tasks (and 6, the target's size) and the unbounded suite,
    each in a fresh process; ``quick``: 3 tasks only."""
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    plan = [("bounded", "3")] + ([] if quick else [
        ("bounded", "6"), ("bounded", "6", "1"), ("cutoff",), ("unbounded",)])
    for args in plan:
        say(f"  {' '.join(args)} ...")
        r = measure(*args)
        if "error" in r:
            checks.append(Check(f"{r['suite']} ran", False, r["error"]))
            continue
        checks.append(Check(f"{r['suite']}: every frame proved", bool(r["ok"]),
                            f"{r['frames']:,} frames"))
        six = args in (("bounded", "6"), ("cutoff",))
        figures.append(Figure(
            f"{r['suite']}, wall", r["wall"], "s",
            peer="target" if six else None, peer_value=TARGET_SECONDS if six else None,
            higher_is_better=False, target=1.0 if six else None, why=WHY,
            note=f"{r['frames']:,} frames, {r['cpu']:.1f} s CPU, in a fresh process "
                 "(interpreter start and imports excluded)"))
        if six:
            # on a shared machine the wall time is the share of the cores the other work left;
            # the busier process's CPU is what the wall time would be on two idle cores
            figures.append(Figure(
                f"{r['suite']}, CPU of the busier process (the wall time on 2 idle cores)",
                r["busiest"], "s", peer="target", peer_value=TARGET_SECONDS,
                higher_is_better=False, target=1.0, why=WHY,
                note=f"{r['cpu']:.1f} s CPU over both processes"))
    return settle(NAME, figures, checks, [], [], t0)


def child(argv: list[str]) -> int:
    """One measurement, in the fresh process ``measure`` starts: its JSON on stdout."""
    print(json.dumps(MEASURES[argv[0]](*argv[1:])))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        sys.exit(child(sys.argv[2:]))
    sys.exit(main(NAME, run))
