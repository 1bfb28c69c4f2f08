"""wgk docs: refresh or check the blocks of the design documents that are generated from code."""
from __future__ import annotations

import argparse
import sys

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.reports import docgen, docgen_save

HELP = "refresh (--write) or check (--check) the generated blocks of the design documents"
EXAMPLES = """  wgk docs --check
  wgk docs --write
  wgk docs --inventory
Exit codes: 0 up to date (or refreshed), 1 --check and a block is stale, 2 bad usage or a malformed document.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when a block is out of date")
    mode.add_argument("--inventory", action="store_true",
                      help="print the rows of the atomic-save inventory that its searches find "
                           "(category | file | function)")


def run(args: argparse.Namespace) -> int:
    kernel_doc, save_doc = docgen.ROOT / docgen.DOC, docgen_save.DOC
    try:
        if args.inventory:
            text = save_doc.read_text()
            for e in sorted(docgen_save.inventory_from_searches(docgen_save.parse_searches(text))):
                print(f"| {e.category} | `{e.file}` | `{e.function}` |  |")
            return 0
        if args.write:
            return _write(kernel_doc, save_doc)
        return _check(kernel_doc, save_doc)
    except (OSError, docgen_save.DocError) as e:
        raise UsageError(str(e)) from None


def _write(kernel_doc, save_doc) -> int:
    kernel_doc.write_text(docgen.render(kernel_doc.read_text()))
    print(f"{docgen.DOC}: {len(docgen.BLOCKS)} generated blocks refreshed")
    text = save_doc.read_text()
    new = docgen_save.refreshed(text)
    if new != text:
        save_doc.write_text(new)
    print(f"{save_doc.name}: {len(docgen_save.GENERATORS)} generated blocks refreshed")
    return 0


def _check(kernel_doc, save_doc) -> int:
    stale = docgen.check(kernel_doc)
    for s in stale:
        sys.stdout.write(s.diff if s.diff.endswith("\n") else s.diff + "\n")
    diff = docgen_save.doc_diff(save_doc)
    sys.stdout.write(diff)
    if stale:
        print(f"{docgen.DOC}: stale blocks {', '.join(s.name for s in stale)}; refresh: {docgen.REFRESH}",
              file=sys.stderr)
    if diff:
        print(f"{save_doc.name}: generated blocks out of date; refresh: {docgen.REFRESH}", file=sys.stderr)
    if stale or diff:
        return 1
    print(f"{docgen.DOC}: {len(docgen.BLOCKS)} generated blocks up to date")
    print(f"{save_doc.name}: {len(docgen_save.GENERATORS)} generated blocks up to date")
    return 0
