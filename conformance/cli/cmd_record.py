"""wgk record: turn a run of the implementation into a regression trace in one command."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json
from wgk.conformance.oracle.record import RecordError, record_trace
from wgk.conformance.oracle.replay import replay
from wgk.conformance.traces.format import write_trace
from wgk.impl.cli import demo

HELP = "record a run of the implementation (a kernel database, or the demo) as a trace"
EXAMPLES = """  wgk record --db .wgk/kernel.db --out traces/incidents/18-what-happened.json
  wgk record --demo --out traces/recorded/demo.json
  wgk record --db kernel.db --id incident-18 --title "Worker lost during review" --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", metavar="PATH", help="a kernel database (wgk kernel --db PATH ...)")
    source.add_argument("--demo", action="store_true", help="run wgk demo and record it")
    p.add_argument("--out", metavar="FILE", help="where to write the trace (default: print it)")
    p.add_argument("--id", help="the trace's id (default: from the file name)")
    p.add_argument("--title", help="the trace's title")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _run_demo(workdir: str) -> str:
    args = argparse.Namespace(workdir=workdir, json=True, keep=True)
    devnull = open(os.devnull, "w")
    old, sys.stdout = sys.stdout, devnull
    try:
        code = demo.run(args)
    finally:
        sys.stdout = old
        devnull.close()
    if code != 0:
        raise UsageError("the demo did not keep its promises; nothing recorded")
    return os.path.join(workdir, "kernel.db")


def run(args: argparse.Namespace) -> int:
    workdir = None
    try:
        if args.demo:
            workdir = tempfile.mkdtemp(prefix="wgk-record-demo-")
            db = _run_demo(workdir)
        else:
            db = args.db
            if not os.path.isfile(db):
                raise UsageError(f"{db}: no such file")
        default_id = re.sub(r"[^a-z0-9-]+", "-",
                            os.path.splitext(os.path.basename(args.out or "recorded-run"))[0].lower())
        try:
            trace = record_trace(db, id=args.id or default_id.strip("-") or "recorded-run",
                                 title=args.title or ("Recorded run of wgk demo" if args.demo else None))
        except RecordError as e:
            raise UsageError(str(e)) from None
        if args.demo:
            trace.source["provenance"] = "wgk record --demo"
        result = replay(trace)
        if args.out:
            write_trace(trace, args.out)
        if args.json:
            emit_json({"trace": args.out, "id": trace.id, "steps": len(trace.steps),
                       "model": result.verdict,
                       "divergences": [d.to_json() for d in result.divergences],
                       "reproduce": f"wgk replay {args.out}" if args.out else None})
        else:
            if not args.out:
                from wgk.conformance.traces.format import dump_trace
                sys.stdout.write(dump_trace(trace))
            else:
                print(f"recorded {len(trace.steps)} steps to {args.out}")
            print(f"the model {'agrees with' if result.passed else 'DISAGREES with'} the recorded run"
                  + ("" if result.passed else f" ({len(result.divergences)} divergences)"),
                  file=sys.stderr if not args.out else sys.stdout)
            for d in result.divergences[:10]:
                print(d.describe(), file=sys.stderr)
            if args.out:
                print(f"reproduce: wgk replay {args.out}")
        return 0 if result.passed else 1
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
