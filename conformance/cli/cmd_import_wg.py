"""wgk import-wg: translate the peer's golden vectors into wgk-trace/1 files."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.traces.wg import Imported, WgImportError, import_results
from wgk.conformance.cli.output import emit_json
from wgk.conformance.traces.format import TraceError, write_trace

HELP = ("translate WG's fixture files (v1, v2, deletion map, daemon planner, runtime reducer, simple-land, "
        "planner runtime state) into wgk-trace/1 traces; report every case that cannot be mapped")
EXAMPLES = """  wgk import-wg ../shared/fixtures/wg --out traces/peers/wg
  wgk import-wg ../shared/fixtures/wg/v1/happy_land.json --out /tmp/wg
  wgk import-wg ../shared/fixtures/wg --out traces/peers/wg --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", metavar="SRC", help="fixture files or directories")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output directory (one subdirectory per family: v1, v2, deletion-map, daemon/v1 ...)")
    p.add_argument("--json", action="store_true", help="print what was written, and a result per file, as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        results = import_results(args.sources)
    except WgImportError as e:
        raise UsageError(str(e)) from None
    errors = [r for r in results if r.status == "error"]
    imported = [i for r in results for i in r.traces]
    unmapped = [u for r in results for u in r.unmapped]
    if not errors and not imported and not unmapped:
        raise UsageError("no WG fixture files found in " + " ".join(args.sources))
    out = Path(args.out)
    written = [] if errors else [_write(i, out) for i in imported]
    if args.json:
        emit_json({"written": written, "count": len(written), "not-mapped": len(unmapped),
                   "files": [r.to_json() for r in results]})
    else:
        for w in written:
            print(f"{w['path']}  <- {w['source']} ({w['steps']} steps)")
        for r in results:
            if r.status == "skipped" and r.family != "index":
                print(f"skipped {r.reason}", file=sys.stderr)
        for u in unmapped:
            print(f"not mapped: {u.line()}", file=sys.stderr)
        if not errors:
            print(f"{len(written)} traces written to {out}"
                  + (f"; {len(unmapped)} cases not mapped (listed above)" if unmapped else ""), file=sys.stderr)
    if errors:
        raise UsageError(errors[0].reason + (f" (and {len(errors) - 1} more files with errors; nothing written)"
                                              if len(errors) > 1 else ""))
    # every case mapped: 0; some cases reported as not mapped (their traces not written): 1
    return 1 if unmapped else 0


def _write(item: Imported, out: Path) -> dict:
    path = item.out_path(out)
    try:
        write_trace(item.trace, path)
    except TraceError as e:
        raise UsageError(f"translation of {item.source} is not a valid trace: {e}") from None
    return {"source": str(item.source), "family": item.family, "trace": item.trace.id,
            "path": str(path), "steps": len(item.trace.steps)}
