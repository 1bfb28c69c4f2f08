"""wgk replay: run trace files through the model and compare every decision and fact."""
from __future__ import annotations

import argparse
import sys

from .errors import UsageError
from .replay import TraceResult, replay
from .systems import ModelSystem, StepError
from .output import emit_json
from .traces import TraceError, load_traces

HELP = "replay trace files through the model and check every expected decision and fact"
EXAMPLES = """  wgk replay traces/
  wgk replay traces/incidents/04-dead-worker-converges.json
  wgk replay traces/peers/wg --json
  wgk replay traces/incidents --system model
"""

NOT_AVAILABLE = {
    "impl": "--system impl is not available in this build (the implementation adapter is not installed)",
    "both": "--system both is not available in this build (the implementation adapter is not installed)",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="TRACE_OR_DIR",
                   help="trace files, or directories searched recursively for *.json")
    p.add_argument("--system", default="model", choices=("model", "impl", "both"),
                   help="what to replay through (default model)")
    p.add_argument("--crash-cuts", action="store_true",
                   help="also crash at every durable boundary (needs the implementation)")
    p.add_argument("--kill", action="store_true",
                   help="crash cuts by a real kill -9 of a child process (needs the implementation)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def check_available(args: argparse.Namespace) -> None:
    if args.system in NOT_AVAILABLE:
        raise UsageError(NOT_AVAILABLE[args.system])
    if args.crash_cuts or args.kill:
        flag = "--crash-cuts" if args.crash_cuts else "--kill"
        raise UsageError(f"{flag} is not available in this build (crash cuts need the implementation)")


def reproduce(result: TraceResult, system: str) -> str:
    return f"wgk replay {result.path or result.id} --system {system}"


def run(args: argparse.Namespace) -> int:
    check_available(args)
    try:
        traces = load_traces(args.paths)
    except TraceError as e:
        raise UsageError(str(e)) from None
    if not traces:
        raise UsageError("no trace files found in " + " ".join(args.paths))
    results = []
    for n, trace in enumerate(traces, 1):
        if not args.json and sys.stderr.isatty():
            print(f"  [{n}/{len(traces)}] {trace.id}", file=sys.stderr, flush=True)
        try:
            results.append(replay(trace, [ModelSystem(trace)]))
        except StepError as e:
            raise UsageError(f"{trace.path}: {e}") from None
    failed = [r for r in results if not r.passed]
    if args.json:
        emit_json({"system": args.system, "traces": [r.to_json() for r in results],
                   "passed": len(results) - len(failed), "failed": len(failed)})
    else:
        print_human(results, args.system)
    return 1 if failed else 0


def print_human(results: list[TraceResult], system: str) -> None:
    for r in results:
        print(f"{r.verdict.upper():4} {r.id} ({len(r.steps)} steps, {r.path})")
        for d in r.divergences:
            for line in d.describe().splitlines():
                print("     " + line)
        if not r.passed:
            print(f"     reproduce: {reproduce(r, system)}")
    failed = sum(1 for r in results if not r.passed)
    print(f"{len(results) - failed} passed, {failed} failed")
