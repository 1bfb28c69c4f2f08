"""wgk coverage: which cells of the model's decision space the implementation is sent."""
from __future__ import annotations

import argparse

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json, progress
from wgk.conformance.oracle import witnesses
from wgk.conformance.oracle.coverage import cells, recording
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.reports.gate_budget import bundled_traces
from wgk.conformance.reports.gate_coverage import measure
from wgk.conformance.traces.format import load_traces

HELP = "decision coverage: every cell the model can reach, sent to the implementation"
EXAMPLES = """  wgk coverage                 per kind: reachable cells, covered, the uncovered named
  wgk coverage --json          the same as JSON, with every unreachable cell and its reason
  wgk coverage --write         search a witness for every reachable cell, store them; a
                               refusal no witness reaches must be proved unreachable (z3)
A cell is (kind, outcome), (kind, actor class) or (kind, capability class). The traces are
replayed through the model and the implementation in lockstep, then the stored witnesses
(conformance/oracle/witnesses.json); every request sent to the implementation is classified
into its cells. Exit codes: 0 every reachable cell covered, 1 a cell uncovered or a witness
answered differently or stale, 2 bad usage or input.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--write", action="store_true",
                   help="search a witness for every reachable cell (from the bundled traces' "
                        "states) and store them")
    p.add_argument("--json", action="store_true", help="print the coverage as JSON")
    p.add_argument("--traces", metavar="PATH", action="append",
                   help="trace files or folders (default: the bundled traces)")


def _replayed(loaded: list) -> set:
    """The cells the traces send the implementation in lockstep replay."""
    found: set = set()
    for trace in loaded:
        with recording() as sent:
            try:
                systems = [ModelSystem(trace), ImplSystem(trace)]
            except StepError:
                continue
            try:
                replay(trace, systems)
            finally:
                systems[1].close()
        found |= sent
    return found


def run(args: argparse.Namespace) -> int:
    loaded = load_traces(args.traces or [str(bundled_traces())])
    if not loaded:
        raise UsageError("no traces to measure coverage on")
    say = lambda m: progress(m, enabled=not args.json)
    if args.write:
        if args.traces:
            raise UsageError("--write searches from the bundled traces: no --traces")
        found, unfound = witnesses.search(loaded, set(), progress=say)
        unfound = witnesses.add_written(found, unfound, loaded)
        say(f"proving the {len(unfound)} cells without a witness unreachable ...")
        unreached = witnesses.unreachable_reasons(unfound) if unfound else {}
        path = witnesses.write(found, unfound, loaded, unreached=unreached)
        if args.json:
            emit_json({"written": str(path), "witnesses": len(found), "unfound": unfound})
        else:
            print(f"{path}: {len(found)} witnesses ({sum(bool(w['fork']) for w in found)} forks), "
                  f"{len(unfound)} reachable cells without one")
            for c in unfound:
                print(f"  no witness: {c}" + (f" ({unreached[c]})" if c in unreached else ""))
        return 1 if set(unfound) - set(unreached) else 0
    say("replaying the traces ...")
    m = measure(loaded, _replayed(loaded))
    bad = m["stale"] or m["problems"] or any(r["uncovered"] for r in m["kinds"].values())
    if args.json:
        emit_json(dict(m, verdict="fail" if bad else "pass",
                       cells=len(cells())))
        return 1 if bad else 0
    for kind, row in m["kinds"].items():
        mark = "FAIL" if row["uncovered"] else "PASS"
        print(f"{kind:22} {mark} {row['covered']:3}/{row['reachable']:<3} "
              f"({len(row['unreachable'])} unreachable)")
        for c in row["uncovered"]:
            print(f"    uncovered {kind}/{c}")
    if m["stale"]:
        print("witnesses stale: run wgk coverage --write")
    for p in m["problems"][:10]:
        print(f"witness: {p}")
    print(f"coverage {'FAIL' if bad else 'PASS'}: {m['covered']}/{m['reachable']} reachable "
          f"cells, {len(cells()) - m['reachable']} unreachable, {m['witnesses']} witnesses")
    return 1 if bad else 0
