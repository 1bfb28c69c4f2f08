"""wgk trace-matrix: invariant -> model rule -> z3 proof -> traces -> crash test -> runtime guard."""
from __future__ import annotations

import argparse
import sys

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json, progress
from wgk.conformance.reports.tracematrix import DOCUMENT, build, document_block, markdown, text, write_document

HELP = "the traceability matrix of every invariant, generated from the code"
EXAMPLES = """  wgk trace-matrix                 one line per invariant: what traces it, what is missing
  wgk trace-matrix --check         exit 1 when an invariant lacks a column or the document is stale
  wgk trace-matrix --markdown      the table the design document carries
  wgk trace-matrix --write-docs    refresh that table in docs/design-atomic-graph-work-save.md
  wgk trace-matrix --json
Columns: the model's predicate and the transitions that affect it; the z3 proof of every
(transition x invariant) frame; the traces of the incidents it prevents; their crash cuts;
the implementation's '# guards: <id>' markers.
Exit codes: 0 every invariant fully traced, 1 a column missing (with --check), 2 bad usage.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true",
                   help="exit 1 when any invariant lacks a column, or the document's table differs")
    p.add_argument("--tasks", type=int, default=3, help="tasks of the proofs (default 3)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the matrix as JSON")
    out.add_argument("--markdown", action="store_true", help="print the markdown table")
    out.add_argument("--write-docs", action="store_true",
                     help="write the markdown table into the design document")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.tasks <= 6:
        raise UsageError("--tasks must be between 1 and 6")
    m = build(tasks=args.tasks, progress=lambda msg: progress(msg, enabled=not args.json))
    stale = False
    if args.write_docs:
        try:
            write_document(m)
        except (OSError, ValueError) as e:
            raise UsageError(str(e)) from None
        print(f"wrote the traceability matrix into {DOCUMENT}")
    elif args.check:
        stale = document_block() != markdown(m)
    if args.json:
        data = m.to_json()
        data["document_current"] = not stale
        emit_json(data)
    elif args.markdown:
        sys.stdout.write(markdown(m))
    elif not args.write_docs:
        sys.stdout.write(text(m))
        if stale:
            print(f"the table in {DOCUMENT} differs from the code: "
                  "run wgk trace-matrix --write-docs")
    if args.check and (not m.ok or stale):
        return 1
    return 0
