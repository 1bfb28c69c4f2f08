"""Exploration vs TLC: distinct states per second on the same bounded slice.

The slice is ``wgk explore --tasks N`` (groups core,env, one attempt, one
generation, one candidate version) and bench/peers/WgkSlice.tla with the same
N. Before any speed is compared, both must report exactly the same number of
distinct states and of transitions (the equivalence check); a mismatch fails
the benchmark.

Per size, two figures:

- distinct states/s while searching — the ratio the target applies to: ours is
  the exploration time ``wgk explore`` reports (interpreter start and imports
  excluded); TLC's is the time TLC reports itself (``-tool``: JVM start
  excluded) minus TLC's set-up, i.e. what TLC reports for a 57-state run of the
  same spec (parsing, level checking, initial states), measured in the same run;
- distinct states/s with process start: both commands' wall time, Python start
  and JVM start included;
- memory per stored state: the process's peak resident set above that of a 57-state run
  of the same command (interpreter or JVM, the model, the first states), divided by the
  distinct states. TLC's resident set is the JVM's heap as its collector sized it, an
  upper bound of what TLC keeps (fingerprints and the state queue); ours is every interned
  task state, the parent of every state and the verdicts per local context.

Runs of ours and TLC alternate, and each figure is the median of the repeats.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchResult, Check, Figure, guarded, median, report, say, settle, wgk  # noqa: E402
from peer_tools import Unavailable, run_tlc, tlc  # noqa: E402

NAME = "explore"
TARGET = 2.0
SIZES = {False: (1, 2, 3), True: (1, 2)}       # by quick
REPEATS = {False: {1: 3, 2: 3, 3: 1}, True: {1: 1, 2: 1}}
#: why the equal-work figure falls short where it does
WHY = ("a local context met for the first time runs every request through the model's "
       "rules and every invariant once, in Python (about 1 ms); at 1 task nearly every state "
       "is a context of its own, so the rate is the model's evaluation, not the search's "
       "bookkeeping, and TLC's compiled evaluator of the slice is faster at that; from 3 tasks "
       "on the contexts repeat and the interned search wins")
WHY_WORKERS = ("the workers share the model's work of a level (new local contexts); the "
               "search's bookkeeping (interning, the parents, the queue) stays in one process, "
               "and at 3 tasks most contexts were met before, so little is left to share")
CORES = max(2, len(os.sched_getaffinity(0)))     # the workers of the several-workers figure
#: The largest full-model instance the target names: every request group, more than one
#: attempt and generation (one task), on every core, within a budget of 60 s.
FULL_MODEL = ("--tasks", "1", "--attempts", "2", "--generations", "2", "--groups",
              "core,evidence,review,operator,legacy,archive,waits,clock,reopen,intruder,env",
              "--no-liveness")
FULL_BUDGET = 60.0
WHY_FULL = ("every group on one task with two attempts and two generations is over a million "
            "states (an earlier run had not finished after 1,200 s), and at one task nearly "
            "every state is a local context of its own, evaluated by the model's rules and "
            "every property in Python: some hundreds to a thousand states a second")


@dataclass(frozen=True)
class Ours:
    distinct: int
    transitions: int
    seconds: float          # exploration, inside the process
    wall: float             # the whole command, interpreter start included
    peak_rss: int | None = None     # the command's peak resident set, bytes


#: The invariants WgkSlice.tla's Safety checks: the equal-work comparison checks only these.
SLICE_INVARIANTS = ("done-iff-graphsave", "dependency-needs-done", "receipts-fenced",
                    "promotion-at-most-once", "promotion-needs-review-of-exact-candidate",
                    "worksave-exact", "exactly-one-way-forward",
                    "no-dead-owner-in-progress-without-action")


def explore_once(n: int, same_work: bool = False, max_states: int | None = None,
                 workers: int = 1) -> Ours:
    only = [a for i in SLICE_INVARIANTS for a in ("--invariant", i)] if same_work else []
    if max_states is not None:
        only += ["--max-states", str(max_states)]
    if workers != 1:
        only += ["--workers", str(workers)]
    p = wgk("explore", "--tasks", str(n), "--groups", "core,env", "--json", *only)
    if p.returncode != 0:
        raise RuntimeError(f"wgk explore --tasks {n} exited {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-300:]}")
    data = json.loads(p.stdout)
    return Ours(data["distinct_states"], data["transitions"], data["seconds"], p.seconds,
                p.peak_rss)


def equivalence(n: int, ours: Ours, run) -> list[Check]:
    """TLC's counts against ours: distinct states, and transitions (TLC counts the initial state too)."""
    shown = "none" if run.distinct is None else f"{run.distinct:,}"
    return [
        Check(f"TLC completed without error, tasks={n}", run.ok,
              "" if run.ok else run.output.strip()[-300:]),
        Check(f"same distinct states, tasks={n}", run.distinct == ours.distinct,
              f"wgk explore {ours.distinct:,}, TLC {shown}"),
        Check(f"same transitions, tasks={n}",
              run.generated is not None and run.generated == ours.transitions + 1,
              f"wgk explore {ours.transitions:,} + the initial state, TLC {run.generated}"),
    ]


def tlc_setup(peer, repeats: int, workers: int = 1) -> tuple[float, float | None]:
    """TLC's own time for a 57-state run of the same spec (parsing and set-up), and its
    peak resident set."""
    runs = [run_tlc(peer, 1, env=False, workers=workers) for _ in range(repeats)]
    bad = [r for r in runs if not r.ok or r.reported is None]
    if bad:
        raise RuntimeError(f"TLC failed on the 57-state run: {bad[0].output.strip()[-300:]}")
    rss = [r.peak_rss for r in runs if r.peak_rss]
    return median([r.reported for r in runs]), (median(rss) if rss else None)


def per_state(peak: float | None, base: float | None, states: int) -> float | None:
    """Bytes of resident set per distinct state above a 57-state run's."""
    return None if peak is None or base is None else max(0.0, peak - base) / states


def run(quick: bool = False, only: tuple[int, ...] | None = None) -> BenchResult:
    """Every size of ``SIZES`` (then several workers and the full model); with ``only``, those
    sizes alone, nothing else."""
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    notes = ["the target is read on the equal-work figure (the slice's 8 invariants on both sides); "
             "a second figure has wgk explore check every property of the registry, state and step"]
    missing: list[str] = []
    sizes, repeats = only or SIZES[quick], {**REPEATS[False], **REPEATS[quick]}
    peer = tlc()
    if isinstance(peer, Unavailable):
        missing.append(str(peer))
    else:
        say("  TLC set-up (a 57-state run) ...")
        setup, tlc_base = tlc_setup(peer, max(repeats.values()))
        notes.append(f"TLC {peer.version}, 1 worker, checks the 8 state invariants of WgkSlice.tla "
                     f"(Safety); its set-up, subtracted from its reported time: {setup:.2f} s")
    last = None
    base = median([explore_once(1, max_states=57).peak_rss or 0
                   for _ in range(max(repeats.values()))]) or None
    for n in sizes:
        say(f"  tasks={n}: wgk explore and TLC, {repeats[n]} time(s) each ...")
        ours_runs, same_runs, tlc_runs = [], [], []
        for _ in range(repeats[n]):
            ours_runs.append(explore_once(n))
            same_runs.append(explore_once(n, same_work=True))
            if not isinstance(peer, Unavailable):
                tlc_runs.append(run_tlc(peer, n))
        ours = Ours(ours_runs[0].distinct, ours_runs[0].transitions,
                    median([r.seconds for r in ours_runs]), median([r.wall for r in ours_runs]),
                    median([r.peak_rss or 0 for r in ours_runs]) or None)
        memory = per_state(ours.peak_rss, base, ours.distinct)
        rate, rate_wall = ours.distinct / ours.seconds, ours.distinct / ours.wall
        if isinstance(peer, Unavailable):
            figures.append(Figure(f"distinct states/s searching, tasks={n}", rate, "states/s",
                                  note=f"{ours.distinct:,} states; {peer}"))
            figures.append(Figure(f"memory per stored state, tasks={n}", memory, "bytes/state",
                                  higher_is_better=False, note=f"{ours.distinct:,} states; {peer}"))
            continue
        for r in tlc_runs:
            checks += [c for c in equivalence(n, ours, r) if c not in checks]
        if not all(c.passed for c in checks):
            break
        search = median([r.reported for r in tlc_runs]) - setup
        wall = median([r.seconds for r in tlc_runs])
        med = f"median of {repeats[n]}" if repeats[n] > 1 else "one run"
        short = "; TLC searches under a second here, the difference of two close times: " \
                "noisy" if search < 1.0 else ""
        same = median([r.seconds for r in same_runs])
        checks.append(Check(f"same states checking the slice's invariants only, tasks={n}",
                            same_runs[0].distinct == ours.distinct,
                            f"{same_runs[0].distinct:,} and {ours.distinct:,}"))
        figures.append(Figure(
            f"distinct states/s searching, the slice's 8 invariants (as TLC), tasks={n}",
            ours.distinct / same, "states/s", "TLC, 1 worker",
            ours.distinct / search if search > 0 else None, target=TARGET, why=WHY,
            note=f"equal work: both check the 8 state invariants of Safety; ours {same:.2f} s, "
                 f"TLC {search + setup:.2f} s reported - {setup:.2f} s set-up; {med}{short}"))
        figures.append(Figure(
            f"distinct states/s searching, every property of the registry, tasks={n}", rate,
            "states/s", "TLC, 1 worker", ours.distinct / search if search > 0 else None,
            note=f"ours also checks the step properties and the other state invariants "
                 f"(TLC: the 8 of Safety); {ours.distinct:,} states; ours {ours.seconds:.2f} s"))
        figures.append(Figure(
            f"distinct states/s with process start, tasks={n}", rate_wall, "states/s",
            "TLC, 1 worker", ours.distinct / wall,
            note=f"ours {ours.wall:.2f} s (Python start included), TLC {wall:.2f} s (JVM start "
                 f"included); {med}"))
        tlc_peak = median([r.peak_rss or 0 for r in tlc_runs]) or None
        figures.append(Figure(
            f"memory per stored state, tasks={n}", memory, "bytes/state", "TLC, 1 worker",
            per_state(tlc_peak, tlc_base, ours.distinct), higher_is_better=False,
            note=f"peak resident set above a 57-state run's: ours {_mib(ours.peak_rss)} "
                 f"(base {_mib(base)}), TLC {_mib(tlc_peak)} (base {_mib(tlc_base)}); "
                 f"TLC's is the JVM heap its collector sized, an upper bound of what it keeps"))
        last = (n, same, same_runs[0].distinct)
    if not isinstance(peer, Unavailable) and all(c.passed for c in checks) and last and not only:
        say(f"  tasks={last[0]}: wgk explore --workers {CORES} and TLC -workers {CORES} ...")
        figures += several_workers(peer, *last, checks)
    if not quick and not only:
        say(f"  the full model on {CORES} workers, within {FULL_BUDGET:.0f} s ...")
        figures.append(full_model(checks))
    return settle(NAME, figures, checks, notes, missing, t0)


def full_model(checks: list[Check]) -> Figure:
    """The full-model instance on every core with a budget of ``FULL_BUDGET`` seconds: its
    time when it completes, else a lower bound of it (the time so far, times the states
    found over those expanded: every found state is still to be expanded)."""
    p = wgk("explore", *FULL_MODEL, "--workers", str(CORES), "--max-seconds", str(FULL_BUDGET),
            "--json", timeout=FULL_BUDGET * 10)
    r = json.loads(p.stdout) if p.returncode == 0 else {}
    checks.append(Check("the full model: no violation", p.returncode == 0 and not r["violations"],
                        p.stderr.strip()[-300:]))
    name = (f"the full model (every group, 2 attempts, 2 generations, 1 task), wall, "
            f"{CORES} workers")
    if not r:
        return Figure(name, None, "s", "target", FULL_BUDGET, higher_is_better=False, target=1.0)
    found, waiting = r["distinct_states"], r.get("queued", 0)
    if r["complete"]:
        return Figure(name, r["seconds"], "s", "target", FULL_BUDGET, higher_is_better=False,
                      target=1.0, why=WHY_FULL, note=f"complete: {found:,} states")
    bound = r["seconds"] * found / max(found - waiting, 1)
    return Figure(name, bound, "s", "target", FULL_BUDGET, higher_is_better=False, target=1.0,
                  why=WHY_FULL,
                  note=f"at least, at the rate so far: stopped by --max-seconds {FULL_BUDGET:.0f} "
                       f"after {r['seconds']:.1f} s with {found:,} states found, {waiting:,} of "
                       f"them not yet expanded, and more to find")


def several_workers(peer, n: int, one: float, distinct: int, checks: list[Check]) -> list[Figure]:
    """The slice at ``n`` tasks on every core: ours (``--workers``) against TLC with as many
    workers (its set-up with as many measured the same way), and against ours on one."""
    setup, _ = tlc_setup(peer, 1, workers=CORES)
    ours = explore_once(n, same_work=True, workers=CORES)
    theirs = run_tlc(peer, n, workers=CORES)
    checks += [Check(c.name.replace(f"tasks={n}", f"tasks={n}, {CORES} workers"), c.passed, c.detail)
               for c in equivalence(n, ours, theirs)]
    if not theirs.ok or theirs.reported is None:
        return []
    search = theirs.reported - setup
    return [
        Figure(f"distinct states/s searching, the slice's 8 invariants, {CORES} workers, tasks={n}",
               distinct / ours.seconds, "states/s", f"TLC, {CORES} workers",
               distinct / search if search > 0 else None, target=TARGET, why=WHY_WORKERS,
               note=f"wgk explore --workers {CORES} {ours.seconds:.2f} s, TLC -workers {CORES} "
                    f"{theirs.reported:.2f} s reported - {setup:.2f} s set-up; one run each"),
        Figure(f"wgk explore on {CORES} workers against one, the slice, tasks={n}",
               distinct / ours.seconds, "states/s", "wgk explore, 1 worker", distinct / one,
               note=f"{ours.seconds:.2f} s against {one:.2f} s: {WHY_WORKERS}"),
    ]


def _mib(x: float | None) -> str:
    return "?" if x is None else f"{x / 2**20:.0f} MiB"


def sizes(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        out = ()
    if not out or any(n not in REPEATS[False] for n in out):
        raise argparse.ArgumentTypeError(
            f"--tasks {text!r}: a comma-separated list of {', '.join(map(str, REPEATS[False]))}")
    return out


def cli(argv: list[str] | None = None) -> int:
    """``main``'s command line, and ``--tasks`` to measure some sizes alone."""
    p = argparse.ArgumentParser(prog="bench_explore.py",
                                description="the explore benchmark (see bench/README.md)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    p.add_argument("--tasks", type=sizes, metavar="N[,N]",
                   help="these sizes alone (e.g. 3), without the several workers' figure and "
                        "the full model")
    args = p.parse_args(argv)
    result = guarded(NAME, lambda quick: run(quick, args.tasks), args.quick)
    return report(NAME, [result], args.quick, args.json, save=not args.no_save)


if __name__ == "__main__":
    sys.exit(cli())
