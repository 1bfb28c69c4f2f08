"""The unbounded suite beside the bounded one: wall and CPU seconds of each.

    python bench/bench_unbounded.py [--quick] [--json]   # as bench/run.py runs it: the bounded
                                               # chain proof at 3 and 6 tasks (target: 6 tasks
                                               # within 10 s), then the unbounded suite

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


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def m_bounded(tasks: str) -> dict:
    from wgk.model.actions import Instance
    from wgk.conformance.z3.prove import prove
    rep, w, c = timed(lambda: prove(Instance.proof(tasks=int(tasks))))
    return {"suite": f"bounded chain, {tasks} tasks", "frames": len(rep.results), "ok": rep.ok,
            "wall": w, "cpu": c}


def m_conditions() -> dict:
    from wgk.conformance.z3.unbounded import conditions
    (_, found), w, c = timed(conditions)
    return {"suite": "cutoff conditions (locality, padding)", "frames": len(found),
            "ok": all(f.ok for f in found), "wall": w, "cpu": c}


def m_unbounded() -> dict:
    from wgk.conformance.z3.unbounded import prove_unbounded
    rep, w, c = timed(prove_unbounded)
    return {"suite": "unbounded (conditions + cutoff-graph proof)",
            "frames": len(rep.proof.results), "ok": rep.ok, "wall": w, "cpu": c}


MEASURES = {"bounded": m_bounded, "conditions": m_conditions, "unbounded": m_unbounded}


def measure(name: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", name, *args],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"suite": name, "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout)


NAME = "unbounded"
TARGET_SECONDS = 10.0          # `wgk prove` at 6 tasks


def run(quick: bool = False) -> BenchResult:
    """The bounded chain proof at 3 tasks (and 6, the target's size) and the unbounded suite,
    each in a fresh process; ``quick``: 3 tasks only."""
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    plan = [("bounded", "3")] + ([] if quick else [("bounded", "6"), ("unbounded",)])
    for args in plan:
        say(f"  {' '.join(args)} ...")
        r = measure(*args)
        if "error" in r:
            checks.append(Check(f"{r['suite']} ran", False, r["error"]))
            continue
        checks.append(Check(f"{r['suite']}: every frame proved", bool(r["ok"]),
                            f"{r['frames']:,} frames"))
        six = args == ("bounded", "6")
        figures.append(Figure(
            f"{r['suite']}, wall", r["wall"], "s",
            peer="target" if six else None, peer_value=TARGET_SECONDS if six else None,
            higher_is_better=False, target=1.0 if six else None,
            why="every (property x transition) frame is one z3 query whose goal is built "
                "through z3's Python API: building the goals takes about as long as solving "
                "them, and the frames grow with the tasks",
            note=f"{r['frames']:,} frames, {r['cpu']:.1f} s CPU, in a fresh process "
                 "(interpreter start and imports excluded)"))
    return settle(NAME, figures, checks, [], [], t0)


def child(argv: list[str]) -> int:
    """One measurement, in the fresh process ``measure`` starts: its JSON on stdout."""
    print(json.dumps(MEASURES[argv[0]](*argv[1:])))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        sys.exit(child(sys.argv[2:]))
    sys.exit(main(NAME, run))
