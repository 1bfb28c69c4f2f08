"""wgk mutants: every known-bad variant of the model must be caught by a proof and by BMC;
with --impl, every planted bug of the implementation by the gate's own sections."""
from __future__ import annotations

import argparse

from wgk.conformance.cli.backend_arg import add_backend_argument
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.external_arg import add_external_arguments
from wgk.conformance.oracle.mutant_traces import trace_verdicts
from wgk.conformance.z3.mutants import MUTANTS, kill
from wgk.conformance.cli.output import emit_json, progress
from wgk.conformance.cli.output import solver_guarded
from wgk.model.actions import Instance

from wgk.conformance.z3.prove import prove

HELP = ("kill every mutant of the model: the proof of the property it names fails, and "
        "exploration or its incident traces detect it; --impl: kill every planted bug of the "
        "implementation with the gate's own sections")
EXAMPLES = """  wgk mutants
  wgk mutants --json
  wgk mutants --name pid-only-liveness --name cas-ignores-moved-target
  wgk mutants --impl --list
  wgk mutants --impl --only zombie-is-live --budget quick
  wgk mutants --impl --json > impl-mutants.json
  wgk mutants --impl --only zombie-is-live --external 'python -m wgk.impl.serve'
  wgk mutants --impl --external 'python -m wgk.impl.serve' --record runs.jsonl --json
  wgk mutants --impl --only pg-dependencies-unlocked --backend postgresql://wgk@localhost/wgk
Exit codes: 0 every mutant killed (and the model itself proved), 1 a mutant survived, 2 bad usage.
With --impl: 0 the kill rate reaches 90% and every survivor is one the catalogue explains,
1 otherwise, 2 bad usage or the unmutated implementation does not pass the sections.
--impl runs each mutant in a child process on a patched copy of wgk.impl (never the
installed source) through the gate's sections that run the implementation (replay, fuzz,
crash cuts, and any such section the gate gains), on the quick budget by default
(about a minute per surviving mutant, seconds per killed one). The deep gate runs it as
its impl-mutants section; the default and quick gates do not (too slow).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", action="append", metavar="NAME",
                   help="only this mutant (repeatable)")
    p.add_argument("--tasks", type=int, default=2,
                   help="tasks of the proof that the unmutated model survives (default 2)")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--impl", action="store_true",
                   help="the implementation's mutant catalogue, run against the gate's sections")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="with --impl: only this implementation mutant (repeatable)")
    p.add_argument("--budget", choices=("quick", "default"), default="quick",
                   help="with --impl: the gate budget of the sections each mutant runs (default quick)")
    p.add_argument("--traces", nargs="+", metavar="PATH",
                   help="with --impl: trace files or folders (default: the bundled traces)")
    p.add_argument("--progress", action="store_true",
                   help="with --impl: a line per mutant on stderr even when it is not a terminal")
    p.add_argument("--record", metavar="FILE",
                   help="with --impl: append each mutant's result to FILE as a JSON line as soon "
                        "as it is known (a long run keeps what it measured)")
    p.add_argument("--no-baseline", action="store_true",
                   help="with --impl: skip the run of the unmutated copy (its kills are then unchecked)")
    add_external_arguments(p)
    add_backend_argument(p)


def run(args: argparse.Namespace) -> int:
    return solver_guarded("mutants", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if args.impl:
        from wgk.conformance.cli.impl_mutants_view import run_impl
        return run_impl(args)
    if args.only or args.no_baseline or args.traces or args.progress or args.external or \
            args.backend != "sqlite" or args.record:
        raise UsageError("--only, --traces, --progress, --no-baseline, --record, --external and "
                         "--backend go with --impl")
    names = args.name or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise UsageError(f"unknown mutant {unknown[0]!r} (known: {', '.join(MUTANTS)})")
    if args.list:
        return list_catalogue(names, args.json)
    if not 1 <= args.tasks <= 8:
        raise UsageError("--tasks must be between 1 and 8")
    show = lambda msg: progress(f"  {msg}", enabled=not args.json)
    model = prove(Instance.proof(tasks=args.tasks))
    show(f"model: {'proved' if model.ok else 'NOT proved'}")
    kills = [kill(MUTANTS[n], progress=show, traces=trace_verdicts) for n in names]
    killed = sum(k.killed for k in kills)
    if args.json:
        emit_json({"mutants": [k.to_json() for k in kills], "killed": killed, "total": len(kills),
                   "model": {"survives": model.ok, "proved": model.count("proved"),
                             "frames": len(model.results)}})
    else:
        print(f"model: {'survives' if model.ok else 'FAILS'} "
              f"({model.count('proved')}/{len(model.results)} frames proved at {args.tasks} tasks)")
        for k in kills:
            m = k.mutant
            status = "killed  " if k.killed else "SURVIVED"
            print(f"  {status} {m.name} (incident {', '.join(map(str, m.incidents))}): "
                  f"{k.summary()}")
            if not k.killed:
                print(f"           expected: the proof of {m.proof_target} fails, and {m.kills} "
                      f"is found by exploration or a trace; {m.doc}")
        print(f"{killed} of {len(kills)} mutants killed")
    return 0 if killed == len(kills) and model.ok else 1


def list_catalogue(names: list[str], as_json: bool) -> int:
    rows = [MUTANTS[n] for n in names]
    if as_json:
        emit_json({"mutants": [{"name": m.name, "incidents": list(m.incidents), "doc": m.doc,
                                "invariant": m.kills, "depth": m.depth,
                                "instance": m.instance.describe()} for m in rows]})
        return 0
    for m in rows:
        print(f"{m.name} (incident {', '.join(map(str, m.incidents))}; caught by {m.kills} "
              f"within depth {m.depth}): {m.doc}")
    return 0
