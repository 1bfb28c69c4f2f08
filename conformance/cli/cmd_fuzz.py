"""wgk fuzz: generated request sequences from every actor, checked after every step."""
from __future__ import annotations

import argparse
import sys

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.external_arg import add_external_arguments, external_kernel
from wgk.conformance.oracle.fuzz import FuzzConfig, run_fuzz
from wgk.conformance.oracle.fuzz_shapes import SHAPES
from wgk.conformance.cli.output import emit_json

HELP = "generate request sequences from every actor (hypothesis) and check every step"
EXAMPLES = """  wgk fuzz
  wgk fuzz --examples 500 --steps 40 --seed 7 --out traces/counterexamples
  wgk fuzz --system model --tasks 3 --json
  wgk fuzz --system both --shape diamond --examples 100
  wgk fuzz --external 'python -m wgk.impl.serve' --examples 20
"""

SYSTEMS = ("model", "impl", "both")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--examples", type=int, default=200, help="runs to generate (default 200)")
    p.add_argument("--steps", type=int, default=30, help="steps per run (default 30)")
    p.add_argument("--seed", type=int, default=None, help="seed for a reproducible campaign")
    p.add_argument("--tasks", type=int, default=2, help="tasks in the generated graph (default 2)")
    p.add_argument("--shape", choices=SHAPES, default="chain",
                   help="the graph's shape: a chain, a fan-in (the last task depends on every other) "
                        "or a diamond (a root, branches, a join); default chain")
    p.add_argument("--review", action="store_true", help="every second task requires a review")
    p.add_argument("--system", choices=SYSTEMS, default="model",
                   help="model alone, or the implementation in lockstep with it (default model)")
    p.add_argument("--out", metavar="DIR", default="traces/counterexamples",
                   help="where a shrunk failure is written as a trace (default traces/counterexamples)")
    p.add_argument("--database", metavar="DIR", default=".hypothesis/wgk-fuzz",
                   help="hypothesis example database, so a found failure replays first")
    add_external_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def system_factory(name: str):
    if name == "model":
        return None
    from wgk.conformance.oracle import impl_system   # the implementation in lockstep with the model
    return impl_system.factory()


def run(args: argparse.Namespace) -> int:
    for name in ("examples", "steps", "tasks"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    kernel = external_kernel(args)
    if kernel is not None:
        return _run_external(args, kernel)
    try:
        factory = system_factory(args.system)
    except ImportError:
        raise UsageError(f"--system {args.system} is not available in this build") from None
    _announce(args, args.system)
    return _report(args, run_fuzz(FuzzConfig(tasks=args.tasks, review=args.review, shape=args.shape,
                                             system=factory),
                                  examples=args.examples, steps=args.steps, seed=args.seed,
                                  out_dir=args.out, database=args.database), args.system)


def _run_external(args: argparse.Namespace, kernel) -> int:
    """Generated runs against the external kernel, in lockstep with the model (ERROR, exit 2:
    it broke the protocol; SKIP, exit 2: it does not declare what the runs send)."""
    from wgk.conformance.oracle.external_runs import (
        FuzzAbort, Unusable, fuzz_factory, fuzz_missing,
    )
    if args.system != "model":
        raise UsageError("--external is the system under test: leave --system out")
    try:
        why = fuzz_missing(kernel.probe())
    except Unusable as e:
        print(f"ERROR [fuzz] {e}")
        return 2
    if why:
        print(f"SKIP [fuzz] {why}: nothing checked")
        return 2
    make = fuzz_factory(kernel)
    config = FuzzConfig(tasks=args.tasks, review=args.review, shape=args.shape, system=make)
    _announce(args, f"external: {kernel.command}")
    try:
        result = run_fuzz(config, examples=args.examples, steps=args.steps, seed=args.seed,
                          out_dir=args.out, database=args.database)
    except FuzzAbort as e:
        print(f"ERROR [fuzz] {e}")
        return 2
    finally:
        make.close()
    return _report(args, result, f"--external '{kernel.command}'")


def _announce(args: argparse.Namespace, system: str) -> None:
    if not args.json:
        print(f"generating {args.examples} runs of up to {args.steps} steps "
              f"({system}{', seed ' + str(args.seed) if args.seed is not None else ''}) ...",
              file=sys.stderr, flush=True)


def _report(args: argparse.Namespace, result, system: str) -> int:
    if args.json:
        emit_json(result.to_json())
    elif result.verdict == "pass":
        print(f"{result.examples} generated runs: every step valid")
    else:
        print(f"FAIL after shrinking to {result.steps} steps:\n{result.failure}")
        if result.trace_path:
            again = (f"wgk replay {result.trace_path} {system}" if system.startswith("--external")
                     else result.reproduce)
            print(f"trace written to {result.trace_path}\nreproduce: {again}")
    return 0 if result.verdict == "pass" else 1
