"""wgk prove: inductive proofs of every always invariant, and witnesses of every sometimes one.

The proofs hold for any number of attempts, generations, revisions and content
ids (they are unbounded integers); the bounds are the tasks of the chain, the
evidence ids per task and the journal's keys. The witnesses are searched on
small instances of their own (``wgk.conformance.z3.witnesses.WITNESSES``)."""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.cli.output import emit_json, progress
from wgk.conformance.cli.output import solver_guarded
from wgk.conformance.z3.prove import DOMAIN, prove
from wgk.conformance.z3.rank import RANK_ID, prove_rank
from wgk.conformance.z3 import witnesses
from wgk.conformance.z3.witnesses import PathsError, recorded_paths, witness_reports, write_paths

HELP = "prove every always invariant inductive (z3) and reach every sometimes property"
EXAMPLES = """  wgk prove
  wgk prove --tasks 4
  wgk prove --invariant done-iff-graphsave --json
  wgk prove --invariant done-reached          (a sometimes property: find its witness)
  wgk prove --unbounded --json                (for every graph: the cutoff theorem)
  wgk prove --write-witness-paths             (record each witness's path for the gate)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", type=int, default=3,
                   help="tasks in the dependency chain of the proof (default 3)")
    p.add_argument("--invariant", metavar="ID",
                   help="only this property (an invariant, a lemma or a sometimes property)")
    p.add_argument("--evidence-ids", type=int, default=2,
                   help="distinct evidence ids per task in the bounded domain (default 2)")
    p.add_argument("--keys", type=int, default=1,
                   help="idempotency keys in the journal (default 1: a step reads and writes "
                        "only its own key's entry)")
    p.add_argument("--jobs", type=int, default=2,
                   help="processes: the proof's transitions are shared among them, and with 2 "
                        "or more the witnesses are searched beside the proofs (default 2)")
    p.add_argument("--unbounded", action="store_true",
                   help="prove for every graph: check the cutoff theorem's conditions on the "
                        "rules (locality of reads and writes) and prove at the cutoff graph; "
                        "--tasks, --evidence-ids and --keys are then fixed by the theorem")
    p.add_argument("--write-witness-paths", action="store_true",
                   help="record the path of every witness found, for the gate to follow "
                        "(conformance/z3/witness_paths.json)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def known_ids() -> list[str]:
    return [DOMAIN.id, RANK_ID] + list(LEMMAS) + list(REGISTRY)


def run(args: argparse.Namespace) -> int:
    return solver_guarded("prove", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if not 1 <= args.tasks <= 8:
        raise UsageError("--tasks must be between 1 and 8")
    if not 1 <= args.evidence_ids <= 4:
        raise UsageError("--evidence-ids must be between 1 and 4")
    if not 1 <= args.keys <= 4:
        raise UsageError("--keys must be between 1 and 4")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.write_witness_paths:
        try:
            recorded_paths()                    # a malformed file is bad input, before any work
        except PathsError as e:
            raise UsageError(str(e)) from None
    pid = args.invariant
    if pid is not None and pid not in known_ids():
        raise UsageError(f"unknown invariant {pid!r} (known: {', '.join(sorted(REGISTRY))})")
    show = lambda msg: progress(f"  {msg}", enabled=not args.json)
    if args.unbounded:
        if pid is not None and not (pid in REGISTRY and REGISTRY[pid].kind == "always"
                                    or pid in LEMMAS):
            raise UsageError(f"--unbounded proves always properties; {pid!r} is not one")
        from wgk.conformance.cli.cmd_prove_unbounded import run_unbounded
        return run_unbounded(args, pid, show)
    inst = Instance.proof(tasks=args.tasks, evidence_ids=args.evidence_ids, keys=args.keys)
    always = pid is None or (pid != RANK_ID and not (
        pid in REGISTRY and REGISTRY[pid].kind in ("sometimes", "assume", "eventually")))
    goals = [p.id for p in REGISTRY.values() if p.kind == "sometimes"
             and (pid is None or p.id == pid)]

    pool = None
    if args.jobs > 1 and goals and always:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
        pending = pool.submit(witness_reports, goals)
    try:
        report = prove(inst, only=None if pid is None else [pid], progress=show,
                       jobs=args.jobs) if always else None
        found = pending.result() if pool is not None else witness_reports(goals)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    for w in found:
        show(f"{w['goal']}: {w['status']}")
    if args.write_witness_paths:
        write_paths({w["goal"]: w["path"] for w in found if w.get("path") is not None})
        show(f"recorded {sum(w.get('path') is not None for w in found)} witness paths in "
             f"{witnesses.PATHS_FILE}")
    rank = prove_rank(inst) if pid in (None, RANK_ID) else []

    failed = (report is not None and not report.ok) or any(w["status"] != "reached" for w in found) \
        or any(r.status != "proved" for r in rank)
    if args.json:
        out = report.to_json() if report is not None else {
            "results": [], "proved": 0, "failed": 0, "unknown": 0, "bounds": inst.bounds_json()}
        out["witnesses"] = found
        out["rank"] = [r.to_json() for r in rank]
        out["ok"] = not failed
        emit_json(out)
    else:
        if report is not None:
            print_report(report)
        print_rank(rank)
        print_witnesses(found)
    return 1 if failed else 0


def print_report(report) -> None:
    per: dict[str, list] = {}
    for r in report.results:
        per.setdefault(r.invariant, []).append(r)
    solved = sum(r.solved for r in report.results)
    n, tasks = len(per), report.instance.tasks
    print(f"{report.count('proved')} of {len(report.results)} frames proved "
          f"({n} propert{'y' if n == 1 else 'ies'} x "
          f"{len({r.transition for r in report.results})} transitions, "
          f"{solved} by the solver, the rest untouched by the step) at {tasks} "
          f"task{'' if tasks == 1 else 's'} in {report.seconds:.2f}s")
    print_base_case(report)
    for pid, rs in per.items():
        bad = [r for r in rs if r.status != "proved"]
        kind = "lemma" if pid in LEMMAS else ("domain" if pid == DOMAIN.id else (
            "environment assumption" if REGISTRY[pid].kind == "assume" else "invariant"))
        if not bad:
            print(f"  proved  {pid} ({kind}, {len(rs)} transitions)")
            continue
        for r in bad:
            print(f"  {r.status.upper()}  {pid} ({kind}) after {r.transition}")
            if r.counterexample is not None:
                print(r.counterexample.render())


def print_rank(rank: list) -> None:
    if not rank:
        return
    bad = [r for r in rank if r.status != "proved"]
    print(f"{RANK_ID}: the convergence rank strictly decreases on every applied due action "
          f"({len(rank) - len(bad)} of {len(rank)} transitions proved)")
    for r in bad:
        print(f"  {r.status.upper()}  {RANK_ID} after {r.transition}")


def print_base_case(report) -> None:
    """The init frames and the enabledness checks: the proof's base case and its non-vacuity."""
    init_ok = sum(f.status == "proved" for f in report.init)
    live = sum(e.status == "enabled" for e in report.enabled)
    print(f"  base case: {init_ok} of {len(report.init)} properties hold in the initial state; "
          f"{live} of {len(report.enabled)} transitions enabled under the invariants")
    for f in report.init:
        if f.status != "proved":
            print(f"  {f.status.upper()}  {f.invariant} in the initial state: {f.detail}")
    for e in report.enabled:
        if e.status != "enabled":
            print(f"  {e.status.upper()}  {e.transition}: no state satisfying the invariants "
                  "lets it change anything (its frames would hold vacuously)")


def print_witnesses(found: list[dict]) -> None:
    if not found:
        return
    print("sometimes properties (shortest witnesses):")
    for w in found:
        inst = w["instance"]
        where = f"tasks={inst['tasks']}, groups={','.join(inst['groups'])}"
        if w["found_at"] is not None:
            print(f"  reached {w['goal']} at depth {w['found_at']} ({where}): "
                  + "; ".join(w["trace"]))
        else:
            print(f"  {w['status'].upper()} {w['goal']} within depth {w['depth']} ({where})")
    sys.stdout.flush()
