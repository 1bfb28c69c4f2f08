"""wgk gate: the CI conformance gate.

Runs every section its budget lists and reports each as data: a section the
budget does not run is listed as skipped, a section that checks nothing or
cannot run is an error, never a pass. Exit codes: 0 pass, 1 a check failed,
2 a section is an error (or bad input).
"""
from __future__ import annotations

import argparse
from pathlib import Path
import shutil
import sys
import time
from typing import TextIO

from wgk.conformance.reports import gate as gate_mod
from wgk.conformance.reports.gate_cache import CacheError
from wgk.conformance.reports.gate_html import write_failure_reports
from wgk.conformance.cli.backend_arg import add_backend_argument, backend_dsn
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.external_arg import add_external_arguments, external_kernel
from wgk.conformance.cli.output import emit_json
from wgk.conformance.traces.format import TraceError

HELP = "run the conformance gate: model checks, proofs, mutants, trace replay with crash cuts"
EXAMPLES = """  wgk gate
  wgk gate --quick
  wgk gate --deep --junit gate.xml --json
  wgk gate --quick --traces traces/incidents
  wgk gate --quick --progress 2> progress.log
  wgk gate --quick --workers 1
  wgk gate --quick --backend postgresql://wgk@localhost/wgk
  wgk gate --quick --external 'python -m wgk.impl.serve'
  wgk gate --quick --cache .wgk-gate-cache
  wgk gate --quick --external 'python -m wgk.impl.serve' --cache .wgk-gate-cache
"""

EXIT = {"pass": 0, "fail": 1, "error": 2}


def add_arguments(p: argparse.ArgumentParser) -> None:
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="small budget for pull requests")
    budget.add_argument("--deep", action="store_true", help="large budget for nightly runs")
    p.add_argument("--traces", nargs="+", metavar="PATH",
                   help="trace files or folders to replay (default: the traces bundled with wgk)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML, one testcase per check")
    p.add_argument("--counterexamples", metavar="DIR", default=gate_mod.COUNTEREXAMPLES,
                   help="where a generated failure is written as a trace (default traces/counterexamples)")
    add_backend_argument(p)
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes sharing the sections' work (default: one per core; 1: every "
                        "section in turn in this process; the report is the same)")
    add_external_arguments(p)
    p.add_argument("--cache", metavar="DIR",
                   help="keep each check's verdict in DIR under a key covering what it depends "
                        "on, and reuse those a change cannot have touched (the report says how "
                        "many; it is otherwise the same). With --external only the checks that "
                        "do not run the kernel under test (the sections on the model) are kept "
                        "and reused, under the same keys as without it, so one DIR serves both; "
                        "a check over the protocol always runs (no key covers an outside "
                        "command's behaviour). Several gates may share DIR at once")
    p.add_argument("--cache-scope", choices=sorted(gate_mod.CACHE_SCOPES), default=None,
                   help="with --cache: all (the default) keeps every section's checks; model "
                        "keeps only the sections on the model (prove, mutants, explore), the "
                        "others run as without a cache and cost nothing more: what a gate with "
                        "--external can reuse")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--progress", action="store_true",
                   help="report progress on stderr even when it is not a terminal")


class ProgressView:
    """Per-section progress on a stream: one redrawn line on a terminal, else a line every
    few seconds; a closing line per section with its count, time and rate."""

    def __init__(self, stream: TextIO, tty: bool):
        self.stream, self.tty = stream, tty
        self.every = 0.1 if tty else 5.0
        self.last, self.section = 0.0, ""
        self.width = shutil.get_terminal_size((100, 20)).columns - 1 if tty else 10_000

    def __call__(self, tick: gate_mod.Tick) -> None:
        now = time.monotonic()
        if tick.final:
            self._write(f"[{tick.section}] {tick.label.upper()}: {tick.done} checks in "
                        f"{tick.seconds:.1f}s ({tick.rate:.1f}/s)", end="\n")
            self.last = 0.0
            return
        if now - self.last < self.every and tick.section == self.section:
            return
        self.last, self.section = now, tick.section
        count = f"{tick.done}/{tick.total}" if tick.total is not None else f"{tick.done}"
        line = f"[{tick.section}] {count} {tick.seconds:.1f}s ({tick.rate:.1f}/s) {tick.label}"
        self._write(line, end="" if self.tty else "\n")

    def _write(self, line: str, end: str) -> None:
        prefix = "\r\x1b[K" if self.tty else ""
        self.stream.write(prefix + line[:self.width] + end)
        self.stream.flush()


def run(args: argparse.Namespace) -> int:
    budget = "quick" if args.quick else "deep" if args.deep else "default"
    tty = sys.stderr.isatty()
    view = ProgressView(sys.stderr, tty) if tty or args.progress else None
    backend = backend_dsn(args)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers: must be at least 1, not {args.workers}")
    external = external_kernel(args)
    if args.cache_scope is not None and args.cache is None:
        raise UsageError(f"--cache-scope {args.cache_scope}: only with --cache DIR (without a cache "
                         "nothing is kept)")
    if args.cache is not None and Path(args.cache).exists() and not Path(args.cache).is_dir():
        raise UsageError(f"--cache: {args.cache} is not a directory")
    try:
        result = gate_mod.run_gate(budget, progress=view, traces=args.traces,
                                   counterexamples=args.counterexamples, backend=backend,
                                   workers=args.workers, external=external, cache=args.cache,
                                   cache_scope=args.cache_scope or "all")
    except TraceError as e:
        raise UsageError(str(e)) from None
    except CacheError as e:
        raise UsageError(f"--cache: {e}") from None
    for warning in (result.cache or {}).get("warnings", []):
        print(f"wgk gate: warning: {warning}", file=sys.stderr)
    if args.junit:
        # one self-contained HTML report per failing trace, next to the JUnit file
        write_failure_reports(result, Path(args.junit).resolve().parent)
        gate_mod.write_junit(result, args.junit)
    if args.json:
        emit_json(result.to_json())
    else:
        print(result.summary())
    return EXIT[result.verdict]
