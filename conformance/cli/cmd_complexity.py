"""wgk complexity: the complexity budget of the kernel, measured from this code base."""
from __future__ import annotations

import argparse

from wgk.conformance.reports.complexity import Measurement, measure
from wgk.conformance.cli.output import emit_json

HELP = "measure authorities, transition APIs, terminal writers, journals, processes and lines against the budget"
EXAMPLES = """  wgk complexity
  wgk complexity --json
  wgk complexity --check
Exit codes: 0 within budget (or no --check), 1 --check and a figure over its limit, 2 bad usage.
The limits live in one place: BUDGET in conformance/reports/complexity.py.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true",
                   help="exit 1 naming every figure that exceeds its limit")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")


def run(args: argparse.Namespace) -> int:
    m = measure()
    if args.json:
        emit_json(m.to_json())
    else:
        print_table(m)
    if args.check and not m.ok:
        if not args.json:
            for f in m.over:
                print(f"over budget: {f.name} = {f.value} > limit {f.limit} ({f.reason})")
        return 1
    return 0


def print_table(m: Measurement) -> None:
    width = max(len(f.name) for f in m.figures)
    print(f"{'figure':<{width}}  {'here':>6}  {'limit':>6}  peer (audited baseline)")
    group = None
    for f in m.figures:
        if f.group != group:
            group = f.group
            print(f"-- {group}")
        peer = f.baseline.counted if f.baseline.value is None else f"{f.baseline.value}: {f.baseline.counted}"
        mark = "  OVER" if f.over else ""
        print(f"{f.name:<{width}}  {f.value:>6}  {str(f.limit):>6}  {peer}{mark}")
    print("within budget" if m.ok else "OVER BUDGET: " + ", ".join(f.name for f in m.over))
