"""wgk explore: breadth-first explicit-state exploration of a bounded instance."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from wgk.conformance.check.explore import explore, to_dot
from wgk.model.actions import Instance

from wgk.conformance.cli import instance_args
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.instance_args import add_instance_arguments
from wgk.conformance.cli.output import emit_json, write_text

HELP = "explore every reachable state of a bounded instance and check every invariant"
EXAMPLES = """  wgk explore --tasks 2
  wgk explore --tasks 3 --json
  wgk explore --tasks 2 --invariant done-iff-graphsave --invariant no-phase-skip
  wgk explore --tasks 1 --attempts 2 --groups core,env,evidence,operator
  wgk explore --tasks 1 --max-states 500 --dot states.dot
  wgk explore --tasks 1 --dot near.dot --around 3        # labelled: within 3 steps of the start
  wgk explore --tasks 1 --dot path.dot --path cx.json    # a trace's path and its alternatives
  wgk explore --tasks 1 --mutant convergence-never-acts --lasso out/   # a liveness lasso as a trace
  wgk explore --tasks 2 --no-liveness                    # safety only
  wgk explore --tasks 3 --workers 0                      # every core this process may use
  wgk explore --tasks 1 --groups core,env,evidence --max-seconds 60   # a time budget
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_instance_arguments(p, tasks=2, keys_help="send idempotency keys (explores the journal)")
    p.add_argument("--invariant", action="append", metavar="ID",
                   help="check only this invariant or state assumption (repeatable; default: every "
                        "property of the registry)")
    p.add_argument("--max-states", type=int, default=None, help="stop after this many distinct states")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop once this many seconds have passed (incomplete: the result says how "
                        "many found states wait unexpanded)")
    p.add_argument("--dot", metavar="FILE", help="write the state graph as Graphviz DOT")
    p.add_argument("--around", type=int, metavar="N",
                   help="with --dot: only the labelled states within N steps of the initial state")
    p.add_argument("--path", metavar="TRACE",
                   help="with --dot: only a trace's path (labelled) and the alternatives at each state")
    p.add_argument("--no-liveness", action="store_true",
                   help="skip the eventually-properties (checked under the fairness assumptions)")
    p.add_argument("--mutant", metavar="NAME",
                   help="explore a liveness mutant (wgk.conformance.check.liveness_mutants)")
    p.add_argument("--lasso", metavar="DIR",
                   help="write each liveness violation as a replayable wgk-trace/1 file in DIR")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="share the model's work among N processes (0: one per core this process "
                        "may use; default 1); the result is the same")
    p.add_argument("--interpreted", action="store_true",
                   help="evaluate the rules and properties by the interpreter instead of the "
                        "compiled model (for debugging; the result is the same)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def instance_from(args: argparse.Namespace) -> Instance:
    """The instance of the arguments; a liveness mutant adds the groups its own instance needs
    (the clock, for a mutant of a deadline's consequence)."""
    inst = instance_args.instance_from(
        args, max_tasks=8, too_many="--tasks above 8 is beyond a bounded instance; use wgk simulate")
    from wgk.conformance.check.liveness_mutants import LIVENESS_MUTANTS
    m = LIVENESS_MUTANTS.get(args.mutant or "")
    if m is None:
        return inst
    extra = tuple(g for g in m.instance.groups if g not in inst.groups)
    return dataclasses.replace(inst, groups=inst.groups + extra)


def run(args: argparse.Namespace) -> int:
    inst = instance_from(args)
    if args.max_states is not None and args.max_states < 1:
        raise UsageError("--max-states must be at least 1")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise UsageError(f"--max-seconds must be above 0, got {args.max_seconds}")
    from wgk.conformance.check.workers import every_core
    most = max(64, 4 * every_core())
    if not 0 <= args.workers <= most:
        raise UsageError(f"--workers must be 0 (every core) to {most}, got {args.workers}")
    workers = args.workers or every_core()
    properties = None
    if args.invariant:
        from wgk.model.invariants import REGISTRY
        # an environment assumption of one state is checked in every state like an invariant
        unknown = [i for i in args.invariant if i not in REGISTRY or not (
            REGISTRY[i].kind == "always" or (REGISTRY[i].kind == "assume" and REGISTRY[i].scope == "state"))]
        if unknown:
            raise UsageError(f"unknown invariant {unknown[0]!r} (see wgk trace-matrix or "
                             "model/invariants.py for the ids)")
        properties = {i: REGISTRY[i] for i in args.invariant}
    show = (not args.json) and sys.stderr.isatty()
    bounded = args.around is not None or args.path is not None
    if bounded and not args.dot:
        raise UsageError("--around and --path choose what --dot draws: give --dot FILE")
    picture = bounded_dot(inst, args) if bounded else None
    rules = mutant_rules(args)
    liveness = not args.no_liveness and properties is None
    result = explore(inst, max_states=args.max_states, max_seconds=args.max_seconds,
                     keep_graph=bool(args.dot) and not bounded,
                     properties=properties, rules=rules, liveness=liveness, workers=workers,
                     compiled=not args.interpreted,
                     progress=(lambda n, q: print(f"  {n:,} states, {q:,} queued", file=sys.stderr,
                                                  flush=True)) if show else None)
    if args.dot:
        write_text(args.dot, picture if bounded else to_dot(result.graph))
    lassos = write_lassos(args, inst, rules, result)
    if args.json:
        emit_json(result.to_json())
    else:
        print(f"explored {result.distinct_states:,} distinct states, {result.transitions:,} "
              f"transitions in {result.seconds:.2f}s "
              f"({result.distinct_states / max(result.seconds, 1e-9):,.0f} states/s"
              + (f", {workers} workers)" if workers > 1 else ")")
              + ("" if result.complete else f" - INCOMPLETE: stopped by {stopped_by(args)}, "
                 f"{result.queued:,} found states not expanded"))
        for v in result.violations:
            print(f"VIOLATION {v.invariant}: {v.doc}")
            for n, step in enumerate(v.path, 1):
                print(f"  {n:2}. {step}")
        if not result.violations:
            print("no invariant violated")
        if result.unreached:
            print("sometimes-properties not reached in this instance: " + ", ".join(result.unreached))
        print_liveness(result, liveness, lassos)
        if args.dot:
            print(f"state graph written to {args.dot}")
    bad = result.violations or (result.liveness is not None and result.liveness.violations)
    return 1 if bad else 0


def stopped_by(args: argparse.Namespace) -> str:
    if args.max_states is not None and args.max_seconds is not None:
        return f"--max-states {args.max_states} or --max-seconds {args.max_seconds:g}"
    return f"--max-states {args.max_states}" if args.max_seconds is None \
        else f"--max-seconds {args.max_seconds:g}"


def mutant_rules(args: argparse.Namespace):
    from wgk.conformance.check.liveness_mutants import LIVENESS_MUTANTS
    from wgk.model.rules import RULES
    if args.mutant is None:
        return RULES
    if args.mutant not in LIVENESS_MUTANTS:
        raise UsageError(f"unknown liveness mutant {args.mutant!r} (known: "
                         f"{', '.join(sorted(LIVENESS_MUTANTS))})")
    return LIVENESS_MUTANTS[args.mutant].rule_table()


def command_line(args: argparse.Namespace, inst: Instance) -> str:
    """The one command that finds the result again."""
    parts = ["wgk", "explore", "--tasks", str(inst.tasks), "--attempts", str(inst.attempts),
             "--generations", str(inst.generations), "--versions", str(inst.versions),
             "--groups", ",".join(inst.groups)]
    parts += [flag for flag, on in (("--review", inst.review), ("--keys", inst.keys)) if on]
    if args.mutant:
        parts += ["--mutant", args.mutant]
    return " ".join(parts)


def write_lassos(args: argparse.Namespace, inst: Instance, rules, result) -> list[str]:
    """Each liveness violation as a wgk-trace/1 file in ``--lasso`` DIR; the paths."""
    from pathlib import Path
    from wgk.conformance.check.liveness import lasso_run
    if not args.lasso or result.liveness is None:
        return []
    out = []
    for v in result.liveness.violations:
        run = lasso_run(inst, rules, v, command_line(args, inst))
        out.append(str(run.write(Path(args.lasso) / f"{run.id}.json")))
    return out


def print_liveness(result, asked: bool, lassos: list[str]) -> None:
    live = result.liveness
    if live is None:
        if asked:
            print("liveness not checked: the search is incomplete")
        return
    print(f"liveness: {len(live.checked)} eventually-properties checked "
          f"({', '.join(live.checked)}) under {', '.join(live.assumed)}; "
          f"{live.components} components examined")
    for v in live.violations:
        who = f" ({v.task})" if v.task else ""
        print(f"LIVENESS VIOLATION {v.property}{who}: {v.doc}")
        for n, step in enumerate(v.prefix, 1):
            print(f"  {n:2}. {step}")
        print("  cycle, repeated forever:")
        for n, step in enumerate(v.cycle, len(v.prefix) + 1):
            print(f"  {n:2}. {step}")
    for path in lassos:
        print(f"lasso written to {path} (wgk replay {path} --system model)")
    if not live.violations:
        print("no liveness property violated")


def bounded_dot(inst: Instance, args: argparse.Namespace) -> str:
    """The labelled, bounded DOT of ``--around`` or ``--path`` (drawn by wgk view's writer)."""
    from wgk.conformance.traces.format import TraceError, load_trace
    from wgk.conformance.view.dot import neighbourhood, path_with_alternatives
    from wgk.conformance.view.session import Session, SessionError, mutant_of
    if args.around is not None and args.around < 0:
        raise UsageError("--around must be at least 0")
    try:
        if args.path is None:
            return neighbourhood(Session.from_instance(inst), 0, args.around)
        trace = load_trace(args.path)
        return path_with_alternatives(Session.from_trace(trace, inst, mutant_of(trace)))
    except (TraceError, SessionError) as e:
        raise UsageError(str(e)) from None
