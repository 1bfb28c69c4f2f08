"""Run every benchmark side by side and print one table.

    python bench/run.py [--quick] [--json] [--only NAME[,NAME]] [--no-save]

Every module bench/bench_<name>.py exposing ``run(quick: bool) -> BenchResult``
is a benchmark. The benchmarks the suite is expected to have are listed in
EXPECTED; one that does not exist is reported as missing, one that raises is
reported as an error, never skipped in silence. The results go to
bench/results/all[-quick]-<date>.json with the machine description.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import MISSING, BenchResult, ERROR, guarded, report, say  # noqa: E402

#: the benchmarks BRIEF §7 asks for, in the order they are run and shown
EXPECTED = ("explore", "simulate", "z3", "impl", "pg", "gate", "cache")


def discover() -> list[str]:
    """Expected names first, then any other bench_*.py found."""
    found = sorted(p.stem[len("bench_"):] for p in BENCH.glob("bench_*.py"))
    return list(EXPECTED) + [n for n in found if n not in EXPECTED]


def run_one(name: str, quick: bool) -> BenchResult:
    if not (BENCH / f"bench_{name}.py").exists():
        return BenchResult(name, MISSING, detail=f"bench/bench_{name}.py does not exist")
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(f"bench_{name}")
    except Exception as e:  # noqa: BLE001 - an unimportable benchmark is reported
        return BenchResult(name, ERROR, seconds=time.perf_counter() - t0,
                           detail=f"import failed: {type(e).__name__}: {e}".splitlines()[0][:300])
    fn = getattr(module, "run", None)
    if not callable(fn):
        return BenchResult(name, ERROR, detail=f"bench/bench_{name}.py has no run(quick) function")
    return guarded(name, fn, quick)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")
    p.add_argument("--only", help="comma-separated benchmark names to run")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = p.parse_args(argv)
    names = discover()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            print(f"bench/run.py: unknown benchmark {unknown[0]!r} (known: {', '.join(names)})",
                  file=sys.stderr)
            return 2
        names = wanted
    results = []
    for name in names:
        say(f"[{name}]")
        r = run_one(name, args.quick)
        say(f"  {r.status} in {r.seconds:.1f} s" + (f": {r.detail}" if r.detail else ""))
        results.append(r)
    return report("all" if not args.only else "-".join(names), results, args.quick, args.json,
                  save=not args.no_save)


if __name__ == "__main__":
    sys.exit(main())
