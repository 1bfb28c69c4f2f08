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
  wgk trace-matrix --verify-guards                 disable each guard in turn: does a check fail?
  wgk trace-matrix --verify-guards --only impl/world/git.py --json
Columns: the model's predicate and the transitions that affect it; the z3 proof of every
(transition x invariant) frame; the traces that exercise it (its antecedent holds in one of
their states, replayed through the model); the crash cuts of the listed traces that pass
(in-process; the gate reuses its crash-cuts section's); the implementation's
'# guards: <id>' markers.
--verify-guards is slow (a child process per marker, about a minute for a marker that
guards nothing): it disables each marked guard in a copy of wgk.impl and runs the gate's
sections that run the implementation on it; a marker whose disabled guard every check
passes guards nothing. The deep gate runs it as its verify-guards section; --check (the
default gate's trace-matrix section) does not.
Exit codes: 0 every invariant fully traced (with --verify-guards: every marker guards
something), 1 a column missing (with --check) or a marker guards nothing, 2 bad usage.
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
    out.add_argument("--verify-guards", action="store_true",
                     help="disable each '# guards:' marker's guard in a copy and run the checks")
    p.add_argument("--only", metavar="PATH", action="append",
                   help="with --verify-guards: only the markers in this file (repeatable)")
    p.add_argument("--budget", choices=("quick", "default"), default="quick",
                   help="with --verify-guards: the gate budget of the sections run (default quick)")


def run(args: argparse.Namespace) -> int:
    if args.verify_guards:
        return verify(args)
    if args.only:
        raise UsageError("--only goes with --verify-guards")
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


def verify(args: argparse.Namespace) -> int:
    from wgk.conformance.reports.gate import mutant_sections
    from wgk.conformance.reports.guard_verify import verify_guards
    only = set(args.only or [])
    tty = sys.stderr.isatty()

    def show(n: int, total: int, v) -> None:
        if tty:
            sys.stderr.write(f"\r\x1b[K[verify-guards] {n}/{total} {v.describe()[:100]}")
            sys.stderr.flush()
    verdicts = verify_guards(args.budget, mutant_sections(args.budget),
                             only=lambda g: not only or g.path in only, progress=show)
    if tty:
        sys.stderr.write("\n")
    if only and not verdicts:
        raise UsageError(f"no guard marker in {', '.join(sorted(only))}")
    bad = [v for v in verdicts if v.verdict != "guards"]
    if args.json:
        emit_json({"markers": [v.to_json() for v in verdicts], "guarding": len(verdicts) - len(bad),
                   "total": len(verdicts)})
    else:
        for v in verdicts:
            print(v.describe())
        print(f"{len(verdicts) - len(bad)} of {len(verdicts)} guard markers guard something "
              f"the gate's sections check ({args.budget} budget)")
    return 1 if bad else 0
