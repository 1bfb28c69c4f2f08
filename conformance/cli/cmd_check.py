"""wgk check: bounded model checking (z3) of an invariant or a reachability question."""
from __future__ import annotations

import argparse
import shlex

from wgk.conformance.check.explore import Instance
from wgk.model.env import EnvStep
from wgk.model.invariants import REGISTRY
from wgk.model.observe import observe

from wgk.conformance.cli import instance_args
from wgk.conformance.z3.bmc import CheckResult, Goal, check, invariant_goal
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.instance_args import add_instance_arguments
from wgk.conformance.traces.export import step_json, step_label
from wgk.conformance.view.diff import changes
from wgk.conformance.view.session import step_label as view_label
from wgk.conformance.z3.mutants import MUTANTS
from wgk.conformance.cli.output import emit_json, progress
from wgk.conformance.cli.output import solver_guarded
from wgk.conformance.z3.reach_expr import ReachError, compile_reach
from wgk.conformance.z3.transition import MODEL

HELP = "search for a shortest trace that breaks an invariant or reaches a state (z3 BMC)"
EXAMPLES = """  wgk check --invariant promotion-at-most-once --depth 12
  wgk check --reach 't2.status == "in-progress" and t1.status == "needs-repair"' --tasks 2
  wgk check --reach 't1.status == "done"' --depth 13 --tasks 1 --out done.trace.json --itf done.itf.json
  wgk check --invariant cas-base-exact --mutant cas-ignores-moved-target --depth 11 --tasks 1
Exit codes: 0 nothing found within the depth (for a sometimes property: its witness was found),
1 a trace was found (for a sometimes property: none within the depth), 2 bad usage.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--invariant", metavar="ID", help="an invariant of the registry")
    what.add_argument("--reach", metavar="EXPR",
                      help="a state predicate, e.g. 't1.status == \"needs-repair\"' "
                           "(fields of the observable projection, and/or/not, comparisons)")
    p.add_argument("--depth", type=int, default=10, help="maximum number of steps (default 10)")
    p.add_argument("--mutant", metavar="NAME", help="check a named mutant instead of the model")
    p.add_argument("--out", metavar="TRACE", help="write the trace found as a wgk-trace/1 file")
    p.add_argument("--itf", metavar="FILE", help="write the trace found as ITF JSON")
    add_instance_arguments(p, tasks=2, keys_help="requests carry idempotency keys")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def instance_from(args: argparse.Namespace) -> Instance:
    return instance_args.instance_from(args, max_tasks=6,
                                       too_many="--tasks above 6 is beyond bounded model checking")


def goal_from(args: argparse.Namespace, inst: Instance) -> Goal:
    if args.invariant is not None:
        if args.invariant not in REGISTRY:
            raise UsageError(f"unknown invariant {args.invariant!r} "
                             f"(known: {', '.join(sorted(REGISTRY))})")
        return invariant_goal(REGISTRY[args.invariant])
    try:
        expr = compile_reach(args.reach, inst.graph().tasks)
    except ReachError as e:
        raise UsageError(f"--reach: {e}") from None
    return Goal("reach", args.reach, "reach", "state", state=expr.holds)


def reproduce(args: argparse.Namespace, depth: int) -> str:
    """The one command that finds this trace again."""
    parts = ["wgk", "check"]
    parts += ["--invariant", args.invariant] if args.invariant else ["--reach", args.reach]
    parts += ["--depth", str(depth), "--tasks", str(args.tasks)]
    for name in ("attempts", "generations", "versions"):
        if getattr(args, name) != 1:
            parts += [f"--{name}", str(getattr(args, name))]
    if args.groups != "core,env":
        parts += ["--groups", args.groups]
    parts += ["--review"] if args.review else []
    parts += ["--keys"] if args.keys else []
    parts += ["--mutant", args.mutant] if args.mutant else []
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    return solver_guarded("check", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if not 0 <= args.depth <= 60:
        raise UsageError("--depth must be between 0 and 60")
    if args.mutant is not None and args.mutant not in MUTANTS:
        raise UsageError(f"unknown mutant {args.mutant!r} (known: {', '.join(MUTANTS)})")
    inst = instance_from(args)
    goal = goal_from(args, inst)
    sem = MUTANTS[args.mutant].semantics() if args.mutant else MODEL
    result = check(goal, inst, args.depth, sem,
                   progress=lambda m: progress(f"  {m}", enabled=not args.json))
    command = reproduce(args, result.found_at) if result.found else None
    if result.trace is not None:
        finish_trace(result, args, command)
    if args.json:
        out = result.to_json()
        out["reproduce"] = reproduce_line(args, command) if command else None
        out["found_by"] = command
        if result.trace is not None:
            out["steps"] = [step_json(s) for s in result.trace.steps]
        out["out"], out["itf"] = (args.out if result.trace else None,
                                  args.itf if result.trace else None)
        emit_json(out)
    else:
        print_result(result, args, command)
    if result.status == "unknown":
        return 1
    if goal.kind == "sometimes":
        return 0 if result.found else 1
    return 1 if result.found else 0


def finish_trace(result: CheckResult, args: argparse.Namespace, command: str) -> None:
    """Name the trace, give its final facts, and write the files asked for."""
    trace = result.trace
    goal = result.goal
    trace.id = ("reach" if goal.kind == "reach" else goal.id) + (
        f"-{args.mutant}" if args.mutant else "")
    trace.title = (f"{goal.id}: {goal.description}" if goal.kind != "reach"
                   else f"reach: {goal.description}")
    found = "violates" if result.status == "violated" else "reaches"
    trace.description = (f"A shortest trace that {found} it, found by z3 bounded model checking "
                         f"at depth {result.found_at}"
                         + (f" on the mutant {args.mutant} (not the model)" if args.mutant else "")
                         + ".")
    trace.provenance = command
    final = observe(trace.states[-1], trace.names())
    trace.final = {"target": final["target"],
                   "tasks": {n: {"status": t["status"], "attempt-state": t["attempt-state"],
                                 "phase": t["phase"], "exit": t["exit"]}
                             for n, t in final["tasks"].items()}}
    if args.out:
        trace.write(args.out)
    if args.itf:
        trace.write_itf(args.itf)


def trace_lines(trace) -> list[str]:
    """Each step numbered from 0 as ``wgk replay`` numbers them, then what it changed in the
    observable projection, content ids by the names the trace file gives them."""
    names = trace.names()
    seen = [observe(s, names) for s in trace.states]
    out = []
    for n, (step, d) in enumerate(zip(trace.steps, trace.decisions)):
        text = view_label(step, names) if isinstance(step, EnvStep) else step_label(step)
        out.append(f"  step {n}: {text}" + (f" -> {d.label}" if d is not None else ""))
        out += [f"      {change}" for change in changes(seen[n], seen[n + 1])]
    return out


def reproduce_line(args: argparse.Namespace, command: str) -> str:
    """The one command that shows the trace again."""
    if args.out and not args.mutant:
        return shlex.join(["wgk", "replay", args.out])
    return command


def print_result(result: CheckResult, args: argparse.Namespace, command: str | None) -> None:
    goal = result.goal
    inst = result.instance
    where = (f"tasks={inst.tasks}, groups={','.join(inst.groups)}"
             + (f", mutant {args.mutant}" if args.mutant else ""))
    if not result.found:
        what = {"holds": "no violation", "unreachable": "not reachable",
                "unknown": "unknown (solver gave up)"}.get(result.status, result.status)
        print(f"{goal.id}: {what} within depth {result.depth} ({where}) "
              f"in {result.seconds:.2f}s")
        return
    verb = "VIOLATED" if result.status == "violated" else "REACHED"
    print(f"{verb} {goal.id if goal.kind != 'reach' else goal.description} at depth "
          f"{result.found_at} ({where}) in {result.seconds:.2f}s")
    if goal.kind != "reach":
        print(f"  {goal.description}")
    for line in trace_lines(result.trace):
        print(line)
    print(f"reproduce: {reproduce_line(args, command)}")
    if args.out and reproduce_line(args, command) != command:
        print(f"found by: {command}")
    if args.out:
        print(f"trace written to {args.out}")
    if args.itf:
        print(f"ITF written to {args.itf}")
