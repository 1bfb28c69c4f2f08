"""wgk export-itf: write a trace's state sequence as ITF JSON for the TLA+/Quint tooling."""
from __future__ import annotations

import argparse
import sys

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.traces.itf import dumps, encode_trace
from wgk.conformance.oracle.replay import states
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.cli.output import emit_json, write_text
from wgk.conformance.traces.format import TraceError, load_trace

HELP = "write the model's state sequence of a trace as ITF JSON (Apalache/Quint trace format)"
EXAMPLES = """  wgk export-itf traces/incidents/04-dead-worker-converges.json
  wgk export-itf traces/incidents/13-crash-at-every-phase.json --out /tmp/13.itf.json
  wgk export-itf traces/peers/wg/v1/happy_land.json --out happy.itf.json --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE", help="a wgk-trace/1 file")
    p.add_argument("--out", metavar="FILE", help="write the ITF here (default: standard output)")
    p.add_argument("--json", action="store_true",
                   help="with --out, print a JSON summary (without --out the output is ITF JSON anyway)")


def run(args: argparse.Namespace) -> int:
    try:
        trace = load_trace(args.trace)
        doc = encode_trace(trace, states(trace))
    except TraceError as e:
        raise UsageError(str(e)) from None
    except StepError as e:
        raise UsageError(f"{args.trace}: {e}") from None
    text = dumps(doc)
    if not args.out:
        sys.stdout.write(text)
        return 0
    write_text(args.out, text)
    if args.json:
        emit_json({"trace": trace.id, "out": args.out, "states": len(doc["states"]), "vars": doc["vars"]})
    else:
        print(f"{len(doc['states'])} states of {trace.id} written to {args.out}")
    return 0
