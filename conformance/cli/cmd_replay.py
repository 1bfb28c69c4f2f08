"""wgk replay: run trace files through the model, the implementation or both in lockstep,
optionally crashing the implementation at every durable boundary."""
from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile

from dataclasses import replace

from wgk.conformance.cli.backend_arg import add_backend_argument, backend_dsn
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.external_arg import add_external_arguments, external_kernel
from wgk.conformance.oracle.lockstep import Divergence
from wgk.conformance.oracle.replay import TraceResult, replay
from wgk.conformance.oracle.real_world import world_for
from wgk.conformance.oracle.select import CHOICES, systems_for
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.cli.output import emit_json, print_results
from wgk.conformance.reports.gate_pool import scratch
from wgk.conformance.traces.format import TraceError, load_traces

HELP = "replay traces through the model and/or the implementation, with every crash cut"
EXAMPLES = """  wgk replay traces/
  wgk replay traces/incidents/04-dead-worker-converges.json --system both
  wgk replay traces/ --system both --crash-cuts --json
  wgk replay traces/incidents/13-crash-at-every-phase.json --system impl --crash-cuts --kill
  wgk replay traces/ --system both --crash-cuts --backend postgresql://wgk@localhost/wgk
  wgk replay traces/incidents --crash-cuts --external 'python -m wgk.impl.serve'
  wgk replay traces/peers/wg/daemon --planner historical
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="TRACE_OR_DIR",
                   help="trace files, or directories searched recursively for *.json")
    p.add_argument("--system", default="model", choices=CHOICES,
                   help="what to replay through (default model)")
    p.add_argument("--crash-cuts", action="store_true",
                   help="also crash the implementation at every durable boundary (in-process; "
                        "their databases in WGK_GATE_SCRATCH, else /dev/shm when writable, as "
                        "the gate's; --json names where)")
    p.add_argument("--kill", action="store_true",
                   help="crash cuts by a real kill -9 of a child process (implies --crash-cuts)")
    p.add_argument("--on-disk", action="store_true",
                   help="in-process crash cuts on a database file reopened by a new connection "
                        "after each crash (by default, on the in-memory world, a trace's cuts hold "
                        "their database in memory on one connection)")
    p.add_argument("--cut-checks", choices=("thorough", "scoped"), default="thorough",
                   help="after each cut compare everything (default), or only what the step can "
                        "touch, at a cost that does not grow with the trace (long recorded traces)")
    p.add_argument("--world", choices=("memory", "real"), default="memory",
                   help="the implementation's environment: in memory (default), or a fresh real "
                        "git repository and real child processes where the trace's steps allow "
                        "(pid reuse and seeded attempts stay in memory; the clock is logical)")
    p.add_argument("--planner", choices=("corrected", "historical"), default="corrected",
                   help="the model's planner ruleset (default corrected); historical replays, on the "
                        "model only, the traces that carry a 'historical' expectation and checks the "
                        "old planner's way (wgk.model.planner_rulesets)")
    add_backend_argument(p)
    add_external_arguments(p)
    p.add_argument("--interpreted", action="store_true",
                   help="evaluate the model's rules and properties by the interpreter instead of "
                        "the compiled model (for debugging; the result is the same)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def check_usage(args: argparse.Namespace) -> None:
    if getattr(args, "external", None) is not None:
        if args.system != "model" or args.cut_checks != "thorough" \
                or getattr(args, "planner", "corrected") != "corrected":
            raise UsageError("--external is the system under test, in lockstep with the model "
                             "(on its own world, or with --world real on one the harness "
                             "makes): leave --system, --cut-checks and --planner out")
        args.crash_cuts = args.crash_cuts or args.kill
        return
    if getattr(args, "planner", "corrected") != "corrected" and (args.system != "model" or args.crash_cuts
                                                                  or args.kill):
        raise UsageError(f"--planner {args.planner} is a ruleset of the model's planner: use --system model, "
                         "without crash cuts")
    if (args.crash_cuts or args.kill) and args.system == "model":
        raise UsageError("crash cuts crash the implementation: use --system impl or --system both")
    if args.kill:
        args.crash_cuts = True


def reproduce(result: TraceResult, args: argparse.Namespace) -> str:
    flags = " --crash-cuts" if args.crash_cuts else ""
    flags += " --kill" if args.kill else ""
    flags += (f" --cut-checks {args.cut_checks}"
              if args.crash_cuts and getattr(args, "cut_checks", "thorough") != "thorough" else "")
    flags += f" --backend {args.backend}" if getattr(args, "backend", "sqlite") != "sqlite" else ""
    flags += " --world real" if getattr(args, "world", "memory") == "real" else ""
    flags += f" --planner {args.planner}" if getattr(args, "planner", "corrected") != "corrected" else ""
    return f"wgk replay {result.path or result.id} --system {args.system}{flags}"


def unchecked_warning(trace, args: argparse.Namespace) -> str | None:
    """A recorded run's expectations are the implementation's own answers: replayed on the
    implementation alone, it is compared with nothing but itself."""
    if args.system != "impl" or (trace.source or {}).get("kind") != "recorded-run":
        return None
    cuts = ("; only its crash cuts are compared with the model" if args.crash_cuts else "")
    return (f"wgk replay: warning: {trace.path or trace.id}: the expectations of this recorded "
            f"run were recorded from the implementation, so replaying it on the implementation "
            f"alone checks nothing against the model{cuts} (use --system both)")


def replay_one(trace, args: argparse.Namespace, progress) -> TraceResult:
    """Replay one trace; with --crash-cuts every cut's divergences join the result."""
    if getattr(args, "planner", "corrected") != "corrected":
        from wgk.conformance.oracle.historical import replay_historical
        return replay_historical(trace, args.planner)
    world = world_for(trace)[0] if getattr(args, "world", "memory") == "real" else "memory"
    try:
        systems = systems_for(trace, args.system, world)
    except StepError as e:
        return TraceResult(trace.id, trace.path, (args.system,), (), (Divergence(
            trace.id, None, args.system, "step-error", None, "set up the trace", str(e)),))
    try:
        result = replay(trace, systems)
    finally:
        for s in systems:
            s.close()
    if not args.crash_cuts:
        return result
    from wgk.conformance.oracle.crashcuts import crash_cuts
    cuts = crash_cuts(trace, mode="kill" if args.kill else "in-process", checks=args.cut_checks,
                      progress=progress, world=world, on_disk=getattr(args, "on_disk", False))
    extra = tuple(d for c in cuts.cuts for d in c.divergences)
    return replace(result, divergences=result.divergences + extra, crash_cuts=len(cuts.cuts))


def run(args: argparse.Namespace) -> int:
    check_usage(args)
    if getattr(args, "interpreted", False):
        from wgk.conformance.oracle.systems import use_compiled
        use_compiled(False)
    try:
        traces = load_traces(args.paths)
    except TraceError as e:
        raise UsageError(str(e)) from None
    if not traces:
        raise UsageError("no trace files found in " + " ".join(args.paths))
    if getattr(args, "planner", "corrected") != "corrected":
        traces = [t for t in traces if t.historical]
        if not traces:
            raise UsageError(f"no trace in {' '.join(args.paths)} carries a 'historical' expectation "
                             f"for --planner {args.planner}")
    for trace in traces:
        warning = unchecked_warning(trace, args)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    kernel = external_kernel(args)
    if kernel is not None:
        from wgk.conformance.cli.replay_external import run_external
        return run_external(traces, args, kernel)
    dsn = backend_dsn(args)
    if dsn is None:
        return _run(traces, args)
    from wgk.conformance.oracle import impl_system
    impl_system.use_backend(dsn)
    try:
        return _run(traces, args)
    finally:
        impl_system.use_backend(None)


def _run(traces, args: argparse.Namespace) -> int:
    results = []
    # in-process crash cuts keep their databases where the gate does (a RAM file system when
    # there is one): a cut is an exception, not a power loss; --kill cuts stay in TMPDIR
    with scratch() if args.crash_cuts and not args.kill else contextlib.nullcontext() as where:
        for n, trace in enumerate(traces, 1):
            show = not args.json and sys.stderr.isatty()
            if show:
                print(f"  [{n}/{len(traces)}] {trace.id}", file=sys.stderr, flush=True)
            results.append(replay_one(trace, args, None))
    failed = [r for r in results if not r.passed]
    if args.json:
        emit_json({"system": args.system, "traces": [r.to_json() for r in results],
                   "passed": len(results) - len(failed), "failed": len(failed),
                   "scratch": where or tempfile.gettempdir()})
    else:
        print_human(results, args)
    return 1 if failed else 0


def print_human(results: list[TraceResult], args: argparse.Namespace) -> None:
    print_results(results, args, lambda r: reproduce(r, args))
    failed = sum(1 for r in results if not r.passed)
    print(f"{len(results) - failed} passed, {failed} failed")
