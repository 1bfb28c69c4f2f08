"""The implementation's request path of this checkout against another revision's, side by
side in one process.

    python bench/impl_against.py main                # 30 rounds of 40 requests per column
    python bench/impl_against.py main --rounds 60 --batch 25 --json

The other revision's ``impl/`` is exported with ``git archive`` (as ``gate_against`` does,
into ``bench/.cache/``) and imported under another name, so both implementations run in
this interpreter: the raw SQLite loop, then heartbeats and completion transactions on this
checkout's kernel and on the other's, taking turns in small batches (the order rotating)
so that all of them see the same disk and the same load. With synchronous=OFF, timed in
CPU time (the thread's: the part a shared machine's other processes do not stretch), and
FULL, timed in wall time (durable). Prints requests/s, microseconds per request and the
ratio to the raw loop; writes ``bench/results/impl-against-<date>.json``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gate_against import BENCH, export  # noqa: E402
import time  # noqa: E402

import impl_workloads  # noqa: E402
from impl_workloads import Completions, Heartbeats, Raw  # noqa: E402

import wgk.impl  # noqa: E402
from wgk.impl import Pragmas  # noqa: E402


def other_impl(rev: str):
    """(commit, the revision's implementation imported as the package ``wgk_against_impl``)."""
    sha, tree, _ = export(rev)
    spec = importlib.util.spec_from_file_location(
        "wgk_against_impl", tree / "impl" / "__init__.py",
        submodule_search_locations=[str(tree / "impl")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["wgk_against_impl"] = module
    spec.loader.exec_module(module)
    return sha, module


def rounds(workdir: str, sync: str, impls: dict, n_rounds: int, batch: int) -> dict:
    """Rates and microseconds per request: CPU time of this thread with synchronous=OFF
    (what the other processes on a shared machine do not stretch), wall time with FULL."""
    impl_workloads.CLOCK["now"] = time.thread_time if sync == "OFF" else time.perf_counter
    pragmas = Pragmas(synchronous=sync)
    columns = [("raw", Raw(os.path.join(workdir, f"raw-{sync}.db"), pragmas))]
    for label, impl in impls.items():
        for cls, short in ((Heartbeats, "heartbeats"), (Completions, "completion")):
            path = os.path.join(workdir, f"{label}-{short}-{sync}.db")
            columns.append((f"{short} {label}", cls(path, pragmas, impl)))
    times = {name: 0.0 for name, _ in columns}
    for i in range(n_rounds):
        for name, column in columns[i % len(columns):] + columns[:i % len(columns)]:
            times[name] += column.run(batch)
    n = n_rounds * batch
    return {name: {"per-second": n / t, "us": t / n * 1e6,
                   "ratio-to-raw": times["raw"] / t} for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the revision to measure against (e.g. main)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sha, other = other_impl(args.rev)
    impls = {"this": wgk.impl, args.rev: other}
    workdir = tempfile.mkdtemp(prefix="wgk-impl-against-")
    load0 = os.getloadavg()[0]
    try:
        out = {sync: rounds(workdir, sync, impls, args.rounds, args.batch)
               for sync in ("OFF", "FULL")}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {"against": args.rev, "commit": sha, "rounds": args.rounds, "batch": args.batch,
              "load": [round(load0, 2), round(os.getloadavg()[0], 2)], "figures": out}
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    (BENCH / "results" / f"impl-against-{day}.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"against {args.rev} ({sha[:12]}), load {result['load'][0]} -> {result['load'][1]}, "
          f"{args.rounds} rounds of {args.batch} per column")
    for sync, figures in out.items():
        print(f"synchronous={sync} ({'CPU' if sync == 'OFF' else 'wall'} time)")
        for name, f in figures.items():
            print(f"  {name:28} {f['per-second']:9,.0f} /s {f['us']:8.1f} us   "
                  f"ratio to raw {f['ratio-to-raw']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
