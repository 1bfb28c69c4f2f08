"""wgk gate: the CI conformance gate.

Runs every section that is available and reports each as data. Sections are
added as the suite grows; a section that is not part of this build is listed
as such, never reported as passing.
"""
from __future__ import annotations

import argparse
import sys

from wgk.conformance.reports import gate as gate_mod
from wgk.conformance.cli.backend_arg import add_backend_argument, backend_dsn
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json
from wgk.conformance.traces.format import TraceError

HELP = "run the conformance gate: model checks, proofs, mutants, trace replay with crash cuts"
EXAMPLES = """  wgk gate
  wgk gate --quick
  wgk gate --deep --junit gate.xml --json
  wgk gate --quick --traces traces/incidents
  wgk gate --quick --backend postgresql://wgk@localhost/wgk
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="small budget for pull requests")
    budget.add_argument("--deep", action="store_true", help="large budget for nightly runs")
    p.add_argument("--traces", nargs="+", metavar="PATH",
                   help="trace files or folders to replay (default: the bundled traces/)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML, one testcase per check")
    p.add_argument("--counterexamples", metavar="DIR", default="traces/counterexamples",
                   help="where a generated failure is written as a trace (default traces/counterexamples)")
    add_backend_argument(p)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def run(args: argparse.Namespace) -> int:
    budget = "quick" if args.quick else "deep" if args.deep else "default"
    show = not args.json
    backend = backend_dsn(args)
    try:
        result = gate_mod.run_gate(budget, progress=(lambda m: print(m, file=sys.stderr, flush=True))
                                   if show else None, traces=args.traces,
                                   counterexamples=args.counterexamples, backend=backend)
    except TraceError as e:
        raise UsageError(str(e)) from None
    if args.junit:
        gate_mod.write_junit(result, args.junit)
    if args.json:
        emit_json(result.to_json())
    else:
        print(result.summary())
    return 0 if result.verdict == "pass" else 1
