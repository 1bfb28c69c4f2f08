"""The served kernel's start and a crash-cut replay over the protocol, this checkout against
another revision, side by side in one run.

    python bench/serve_against.py main                    # 3 rounds: 10 starts and 1 replay each
    python bench/serve_against.py main --rounds 5 --starts 20 --bytecode

Over the protocol each crash cut starts the served kernel (``python -m wgk.impl.serve``)
twice: once for the cut's prefix, once to recover after the planned crash. A start is
timed from the spawn to the answer to ``start`` on a fresh storage (one task, SQLite, the
in-memory world) and to the process's exit after ``stop``; the replay is
``wgk replay TRACE --crash-cuts --external 'python -m wgk.impl.serve'``, its wall time.
The other revision is exported with ``git archive`` (``gate_against.export``, into
``bench/.cache/``) and put first on ``PYTHONPATH``, so its harness and its kernel run;
the two columns take turns (the order alternating each round) so that both see the same
load. ``--bytecode``: with Python's bytecode cache (``PYTHONDONTWRITEBYTECODE`` unset, the
cache under ``bench/.cache/pycache``, filled before timing); without it, as the
environment says. Prints medians and the ratio; writes
``bench/results/serve-against-<date>.json`` (``-bytecode.json`` with ``--bytecode``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gate_against import BENCH, ROOT, export  # noqa: E402

TRACE = "traces/incidents/04-dead-worker-converges.json"
GRAPH = {"id": "g", "target": "main-0", "tasks": [{"name": "a", "deps": []}]}
SERVE = [sys.executable, "-m", "wgk.impl.serve"]


def environment(path: Path | None, bytecode: bool) -> dict:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(BENCH / ".cache" / "pycache")
    return env


def one_start(env: dict) -> tuple[float, float]:
    """(seconds to the answer to ``start``, seconds to the exit after ``stop``)."""
    with tempfile.TemporaryDirectory(prefix="wgk-bench-serve-") as storage:
        start = {"op": "start", "protocol": "wgk-conformance/2", "storage": storage, "graph": GRAPH}
        t0 = time.perf_counter()
        p = subprocess.Popen(SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
        p.stdin.write((json.dumps(start) + "\n").encode())
        p.stdin.flush()
        reply = json.loads(p.stdout.readline())
        started = time.perf_counter() - t0
        p.stdin.write(b'{"op":"stop"}\n')
        p.stdin.flush()
        p.stdout.readline()
        p.wait()
        if not reply.get("started"):
            raise SystemExit(f"the served kernel did not start: {reply}")
        return started, time.perf_counter() - t0


def one_replay(env: dict) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "wgk.conformance", "replay", TRACE, "--crash-cuts",
                          "--external", "python -m wgk.impl.serve"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if out.returncode != 0 or "1 passed" not in out.stdout:
        raise SystemExit(f"the replay did not pass:\n{out.stdout[-800:]}{out.stderr[-800:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the revision to compare with (e.g. main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--starts", type=int, default=10, help="starts per column per round")
    ap.add_argument("--bytecode", action="store_true",
                    help="with Python's bytecode cache (else as PYTHONDONTWRITEBYTECODE says)")
    args = ap.parse_args()
    sha, _, shim = export(args.rev)
    columns = {args.rev: environment(shim, args.bytecode), "this": environment(None, args.bytecode)}
    if args.bytecode:                       # fill the cache first: timed starts read it
        for env in columns.values():
            one_start(env)
    times = {c: {"started": [], "exited": [], "replay": []} for c in columns}
    for r in range(args.rounds):
        order = list(columns) if r % 2 == 0 else list(columns)[::-1]
        for c in order:
            for _ in range(args.starts):
                started, exited = one_start(columns[c])
                times[c]["started"].append(started)
                times[c]["exited"].append(exited)
        for c in order:
            times[c]["replay"].append(one_replay(columns[c]))
    med = {c: {k: statistics.median(v) for k, v in t.items()} for c, t in times.items()}
    mode = "bytecode cached" if args.bytecode else \
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!s}"
    print(f"{args.rev} = {sha[:12]}; {args.rounds} rounds, {args.starts} starts each; {mode}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'median seconds':32} {args.rev:>10} {'this':>10} {'this/' + args.rev:>10}")
    for k, label in (("started", "start: spawn to 'started'"), ("exited", "start: spawn to exit"),
                     ("replay", "replay --crash-cuts (wall)")):
        a, b = med[args.rev][k], med["this"][k]
        print(f"{label:32} {a:10.3f} {b:10.3f} {b / a:9.2f}x")
    suffix = "-bytecode" if args.bytecode else ""
    out = BENCH / "results" / f"serve-against-{datetime.now(timezone.utc):%Y-%m-%d}{suffix}.json"
    out.write_text(json.dumps({"rev": args.rev, "commit": sha, "bytecode": args.bytecode,
                               "trace": TRACE, "times": times, "medians": med}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
