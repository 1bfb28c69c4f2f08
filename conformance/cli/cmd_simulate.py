"""wgk simulate: seeded random walks through the model, every invariant checked after every step."""
from __future__ import annotations

import argparse
import random
import sys

from wgk.model.actions import GROUPS, Instance

from wgk.conformance.cli import instance_args
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.instance_args import add_instance_arguments
from wgk.conformance.cli.output import emit_json
from wgk.conformance.check.simulate import SimulationResult, simulate

HELP = "random walks through the model, checking every invariant after every step"
EXAMPLES = """  wgk simulate --traces 1000 --steps 20
  wgk simulate --traces 10000 --steps 50 --tasks 5 --seed 7 --json
  wgk simulate --tasks 3 --groups core,env --attempts 1 --generations 1 --versions 1
"""

MAX_TASKS = 64


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--traces", type=int, default=1000, help="number of walks (default 1000)")
    p.add_argument("--steps", type=int, default=20, help="steps per walk at most (default 20)")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed; the same seed reproduces the run (default: a fresh one, printed)")
    add_instance_arguments(p, tasks=3, attempts=2, generations=2, versions=2,
                           groups=",".join(GROUPS), keys_help="send idempotency keys (walks the journal)")
    p.add_argument("--interpreted", action="store_true",
                   help="evaluate the rules and properties by the interpreter instead of the "
                        "compiled model (for debugging; the result is the same)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def instance_from(args: argparse.Namespace) -> Instance:
    if args.traces < 1:
        raise UsageError("--traces must be at least 1")
    if args.steps < 0:
        raise UsageError("--steps must not be negative")
    return instance_args.instance_from(args, max_tasks=MAX_TASKS,
                                       too_many=f"--tasks must be at most {MAX_TASKS}")


def reproduce_command(args: argparse.Namespace, seed: int) -> str:
    parts = ["wgk simulate", f"--traces {args.traces}", f"--steps {args.steps}", f"--seed {seed}",
             f"--tasks {args.tasks}", f"--attempts {args.attempts}",
             f"--generations {args.generations}", f"--versions {args.versions}",
             f"--groups {args.groups}"]
    parts += ["--review"] if args.review else []
    parts += ["--keys"] if args.keys else []
    return " ".join(parts)


def summary(result: SimulationResult, command: str) -> str:
    lines = [f"simulated {result.traces:,} traces of up to {result.max_steps} steps "
             f"({result.steps:,} steps) in {result.seconds:.2f}s: "
             f"{result.traces_per_second:,.0f} traces/s, {result.steps_per_second:,.0f} steps/s"]
    if result.deadlocks:
        lines.append(f"{result.deadlocks:,} traces ended early: no step enabled")
    for v in result.violations:
        lines.append(f"VIOLATION {v.invariant}: {v.doc}")
        lines.append(f"  trace {v.trace}, after step {len(v.path)}:")
        lines += [f"  {n:3}. {step}" for n, step in enumerate(v.path, 1)]
    if not result.violations:
        lines.append("no invariant violated")
    if result.unreached:
        lines.append("sometimes-properties not reached: " + ", ".join(result.unreached))
    lines.append(f"reproduce: {command}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    inst = instance_from(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    show = (not args.json) and sys.stderr.isatty()
    result = simulate(inst, args.traces, args.steps, seed, compiled=not args.interpreted,
                      progress=(lambda k, n: print(f"  {k:,}/{n:,} traces", file=sys.stderr,
                                                   flush=True)) if show else None)
    command = reproduce_command(args, seed)
    if args.json:
        emit_json({**result.to_json(), "reproduce": command})
    else:
        print(summary(result, command))
    return 1 if result.violations else 0
