"""wgk prove --unbounded: the cutoff theorem's verdict per always property."""
from __future__ import annotations

import argparse
from typing import Callable

from wgk.conformance.cli.output import emit_json
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.unbounded import CUTOFF_INSTANCE, UnboundedReport, prove_unbounded


def run_unbounded(args: argparse.Namespace, pid: str | None, show: Callable[[str], None]) -> int:
    report = prove_unbounded(only=None if pid is None else [pid], progress=show, jobs=args.jobs)
    if args.json:
        emit_json(report.to_json())
    else:
        print_unbounded(report)
    return 0 if report.ok else 1


def print_unbounded(report: UnboundedReport) -> None:
    held = sum(f.ok for f in report.conditions)
    frames = report.proof
    print(f"cutoff theorem: {held} of {len(report.conditions)} locality conditions hold; "
          f"{frames.count('proved')} of {len(frames.results)} frames proved at the cutoff "
          f"graph ({CUTOFF_INSTANCE.tasks} tasks) in {report.seconds:.2f}s")
    for f in report.refused():
        print(f"  REFUSED {f.subject} ({f.kind}): {f.detail}")
    for c in report.claims:
        kind = "lemma" if c.property in LEMMAS else "invariant"
        if c.graphs == "every graph":
            print(f"  for every graph  {c.property} ({kind}; keys: {c.keys}; "
                  f"evidence ids: {c.evidence_ids})")
        else:
            print(f"  NOT GENERALISED  {c.property} ({kind})")
        for why in c.reasons if c.graphs != "every graph" else c.reasons[-1:]:
            if c.graphs != "every graph" or "evidence ids" in why:
                print(f"      {why}")
