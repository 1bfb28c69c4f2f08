"""z3 proofs and bounded model checking: how long they take, measured side by side.

    python bench/bench_z3.py            # everything (several minutes on 2 cores)
    python bench/bench_z3.py --quick    # a smaller sweep
    python bench/run.py --only z3       # the growth tables as figures (BenchResult)

Every measurement runs in a fresh process (z3's term store grows within one
process and later runs get slower). Prints wall-clock and CPU seconds; on a
shared machine CPU seconds are the steadier figure. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = __file__


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


# --- single measurements (each run in its own process) ----------------------------------

def m_prove(tasks: str, solver: str = "simple") -> dict:
    import z3
    from wgk.conformance.z3.prove import Bounds, Prover
    prover = Prover(Bounds(tasks=int(tasks)))
    if solver == "default":
        fresh = z3.Solver()
        for a in prover.solver.assertions():
            fresh.add(a)
        prover.solver = fresh
    rep, w, c = timed(prover.run)
    return {"frames": len(rep.results), "solved": sum(r.solved for r in rep.results),
            "ok": rep.ok, "build": rep.build_seconds, "wall": w + rep.build_seconds,
            "cpu": c + rep.build_seconds}


def m_witnesses() -> dict:
    from wgk.conformance.z3.witnesses import witnesses
    ws, w, c = timed(witnesses)
    return {"reached": sum(r.found for r in ws), "total": len(ws), "wall": w, "cpu": c}


def m_bmc(goal: str, tasks: str, depth: str, prune: str = "yes", frames: str = "assume") -> dict:
    from wgk.conformance.z3.bmc import Unrolling, check, goal_for
    from wgk.model.actions import Instance
    if prune == "no":
        Unrolling.forbid_rejection = lambda self, k: None
    inst = Instance(tasks=int(tasks), groups=("core", "env"))
    r, w, c = timed(lambda: check(goal_for(goal), inst, int(depth),
                                  unrolling=Unrolling(inst, frames=frames)))
    return {"status": r.status, "found_at": r.found_at, "per_depth": r.per_depth,
            "wall": w, "cpu": c}


MEASURES = {"prove": m_prove, "witnesses": m_witnesses, "bmc": m_bmc}


def measure(name: str, *args: object) -> dict:
    out = subprocess.run([sys.executable, HERE, "--one", name, *map(str, args)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the report ----------------------------------------------------------------------

def whole_prove() -> None:
    print("== wgk prove at 3 tasks (proofs and the witnesses of every sometimes property) ==")
    for jobs in (2, 1):
        w = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "wgk.conformance", "prove", "--jobs", str(jobs)],
                             capture_output=True, text=True, check=False)
        print(f"  wgk prove --jobs {jobs}: exit {out.returncode}, "
              f"{time.perf_counter() - w:6.2f}s wall (interpreter start included)")
    p = measure("prove", 3)
    ws = measure("witnesses")
    print(f"  of which proofs: {p['wall']:6.2f}s wall {p['cpu']:6.2f}s cpu "
          f"({p['frames']} frames, {p['solved']} solved, build {p['build']:.2f}s)")
    print(f"  of which witnesses: {ws['wall']:6.2f}s wall {ws['cpu']:6.2f}s cpu "
          f"({ws['reached']}/{ws['total']} reached)")


def proof_growth(sizes) -> None:
    print("== proof time by number of tasks (every always property x every transition) ==")
    print("  tasks  frames  solved  build(s)  wall(s)  cpu(s)")
    base = None
    for n in sizes:
        p = measure("prove", n)
        base = base or p["cpu"]
        print(f"  {n:5}  {p['frames']:6}  {p['solved']:6}  {p['build']:8.2f}  {p['wall']:7.2f}  "
              f"{p['cpu']:6.2f}  x{p['cpu'] / base:.2f}" + ("" if p["ok"] else "  NOT PROVED"))


def solver_choice() -> None:
    print("== proofs at 3 tasks: z3's plain incremental core vs its default solver ==")
    simple, default = measure("prove", 3, "simple"), measure("prove", 3, "default")
    print(f"  SimpleSolver {simple['cpu']:6.2f}s cpu; Solver {default['cpu']:6.2f}s cpu; "
          f"ratio x{default['cpu'] / simple['cpu']:.2f}")


def bmc_growth(tasks: int, depth: int) -> None:
    goal = "promotion-at-most-once"
    print(f"== BMC by depth: {goal}, {tasks} task(s), core+env: UNSAT at every depth "
          "(the worst case: every path must be refuted) ==")
    r = measure("bmc", goal, tasks, depth)
    total = 0.0
    for k, s in enumerate(r["per_depth"]):
        total += s
        if k in (5, 8, 10, 12, 15, 18, 20) or k == depth:
            print(f"  depth {k:2}: {s:6.2f}s at this depth, {total:7.2f}s cumulative")
    print(f"  result: {r['status']}; {r['wall']:.2f}s wall {r['cpu']:.2f}s cpu in all")


def witness_depth() -> None:
    print("== a 13-step witness (done-reached), shortest, by number of tasks ==")
    for n in (1, 2, 3):
        r = measure("bmc", "done-reached", n, 13)
        print(f"  {n} task(s): found at depth {r['found_at']}, {r['wall']:6.2f}s wall "
              f"{r['cpu']:6.2f}s cpu")


def pruning(depth: int) -> None:
    print(f"== BMC with and without pruning rejected steps (2 tasks, depth {depth}) ==")
    on = measure("bmc", "promotion-at-most-once", 2, depth, "yes")
    off = measure("bmc", "promotion-at-most-once", 2, depth, "no")
    print(f"  with {on['cpu']:6.2f}s cpu, without {off['cpu']:6.2f}s cpu, "
          f"ratio x{off['cpu'] / on['cpu']:.2f}")


def frames(depth: int) -> None:
    print(f"== BMC queries: guarded by an assumption literal vs push/pop (2 tasks, depth {depth}) ==")
    on = measure("bmc", "promotion-at-most-once", 2, depth, "yes", "assume")
    off = measure("bmc", "promotion-at-most-once", 2, depth, "yes", "push")
    print(f"  assumption {on['cpu']:6.2f}s cpu, push/pop {off['cpu']:6.2f}s cpu, "
          f"ratio x{off['cpu'] / on['cpu']:.2f}")


def run(quick: bool = False):
    """The growth tables as figures: proof time for 2..6 tasks, BMC time by depth."""
    sys.path.insert(0, str(Path(HERE).resolve().parent))
    from common import Check, Figure, say, settle
    t0 = time.perf_counter()
    figures, checks = [], []
    sizes = (2, 3, 4) if quick else (2, 3, 4, 5, 6)
    base = None
    for n in sizes:
        say(f"  wgk prove at {n} tasks ...")
        p = measure("prove", n)
        base = base or p["cpu"]
        checks.append(Check(f"every frame proved at {n} tasks", p["ok"],
                            f"{p['frames']} frames"))
        figures.append(Figure(f"prove, {n} tasks", p["cpu"], "s cpu", higher_is_better=False,
                              target=None, note=f"{p['frames']} frames, {p['solved']} by the "
                              f"solver, {p['wall']:.2f} s wall, x{p['cpu'] / base:.2f} of 2 tasks"))
    ws = measure("witnesses")
    checks.append(Check("every sometimes property reached", ws["reached"] == ws["total"],
                        f"{ws['reached']}/{ws['total']}"))
    figures.append(Figure("witnesses of every sometimes property", ws["cpu"], "s cpu",
                          higher_is_better=False, note=f"{ws['total']} properties"))
    depth = 12 if quick else 20
    for tasks in (1, 2):
        say(f"  BMC promotion-at-most-once, {tasks} task(s), to depth {depth} ...")
        r = measure("bmc", "promotion-at-most-once", tasks, depth)
        checks.append(Check(f"BMC {tasks} task(s): no violation within depth {depth}",
                            r["status"] == "holds", r["status"]))
        total = 0.0
        for k, sec in enumerate(r["per_depth"]):
            total += sec
            if k in (5, 10, 15, 20) and k <= depth:
                figures.append(Figure(f"BMC to depth {k}, {tasks} task(s)", total, "s",
                                      higher_is_better=False,
                                      note="cumulative over depths 0..k, UNSAT at every depth"))
    return settle("z3", figures, checks, [
        "growth tables; no peer runs the same proofs, so there is no ratio",
        "every measurement in a fresh process"], [], t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        name, *rest = args.one
        print(json.dumps(MEASURES[name](*rest)))
        return
    whole_prove()
    proof_growth((2, 3, 4) if args.quick else (2, 3, 4, 5, 6))
    solver_choice()
    witness_depth()
    bmc_growth(1, 12 if args.quick else 20)
    bmc_growth(2, 12 if args.quick else 20)
    if not args.quick:
        bmc_growth(3, 20)
    pruning(12 if args.quick else 16)
    frames(12 if args.quick else 16)


if __name__ == "__main__":
    main()
