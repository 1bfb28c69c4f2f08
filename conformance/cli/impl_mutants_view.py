"""``wgk mutants --impl``: the implementation's mutant catalogue against the gate's sections,
with progress on a terminal and a report per mutant (see ``reports.impl_mutants``)."""
from __future__ import annotations

import argparse
import json
import sys
import time

from wgk.conformance.cli.backend_arg import backend_dsn
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json
from wgk.conformance.oracle.impl_mutants import AnchorError, check_anchors
from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS, MUTANTS_BY_NAME
from wgk.conformance.cli.external_arg import external_kernel
from wgk.conformance.reports.gate import mutant_sections
from wgk.conformance.reports.impl_mutants import TARGET_RATE, CatalogueRun, MutantRun, run_catalogue
from wgk.conformance.traces.format import TraceError


def _external(args: argparse.Namespace) -> dict | None:
    """--external: each mutated copy is served by CMD in the child (which inherits the copy
    on its PYTHONPATH), and its sections run over the protocol."""
    kernel = external_kernel(args)
    return None if kernel is None else {"command": kernel.command, "timeout": kernel.timeout}


def run_impl(args: argparse.Namespace) -> int:
    if args.name:
        raise UsageError("--name names model mutants; with --impl use --only NAME")
    names = args.only or [m.name for m in IMPL_MUTANTS]
    unknown = [n for n in names if n not in MUTANTS_BY_NAME]
    if unknown:
        raise UsageError(f"unknown implementation mutant {unknown[0]!r} "
                         f"(known: {', '.join(MUTANTS_BY_NAME)})")
    mutants = [MUTANTS_BY_NAME[n] for n in names]
    drift = check_anchors(mutants)
    if drift:
        raise UsageError(f"the catalogue no longer matches the implementation: {drift[0]}"
                         + (f" ({len(drift)} problems)" if len(drift) > 1 else ""))
    if args.list:
        if args.json:
            emit_json({"mutants": [m.to_json() for m in mutants]})
        else:
            for m in mutants:
                print(f"{m.name} [{m.category}; {m.area}] breaks {m.breaks}: {m.doc}")
        return 0
    tty = sys.stderr.isatty()
    t0 = time.perf_counter()

    record = open_record(args.record)

    def show(n: int, total: int, r: MutantRun) -> None:
        if record is not None:
            record.write(json.dumps(r.to_json() | {"baseline": r.mutant.name == "identity"})
                         + "\n")
            record.flush()
        if not (tty or args.progress):
            return
        rate = n / max(time.perf_counter() - t0, 1e-9) * 60
        what = f"killed by {r.section}: {r.check}" if r.killed else r.verdict
        line = f"[impl-mutants] {n}/{total} ({rate:.1f}/min) {r.mutant.name}: {what} ({r.seconds:.0f}s)"
        sys.stderr.write(f"\r\x1b[K{line}" if tty else line + "\n")
        sys.stderr.flush()
    try:
        result = run_catalogue(mutants, args.budget, mutant_sections(args.budget), traces=args.traces,
                               baseline=not args.no_baseline, progress=show,
                               external=_external(args), backend=backend_dsn(args))
    except (AnchorError, TraceError) as e:
        raise UsageError(str(e)) from None
    finally:
        if record is not None:
            record.close()
    if tty:
        sys.stderr.write("\n")
    if args.json:
        emit_json(result.to_json())
    else:
        print(summary(result))
    return exit_code(result)


def open_record(path: str | None):
    """The file ``--record`` appends to (None without it); a path that cannot be written is
    bad usage, said before any mutant runs."""
    if path is None:
        return None
    try:
        return open(path, "a", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--record {path}: {e.strerror or e}") from None


def exit_code(result: CatalogueRun) -> int:
    if not result.baseline_ok:
        return 2
    return 0 if result.rate >= TARGET_RATE and not result.surprises() else 1


def summary(result: CatalogueRun) -> str:
    out = []
    if result.baseline is not None:
        b = result.baseline
        ok = b.verdict == "survived"
        out.append(f"baseline (unmutated copy): {'passes the sections' if ok else 'DOES NOT PASS'}"
                   f" in {b.seconds:.0f}s" + ("" if ok else f": {b.section} {b.check}: {b.detail}"
                                              if b.section else f": {b.detail}"))
        if not ok:
            return "\n".join(out + ["no mutant was run: a kill would mean nothing"])
    for c, row in result.by_category().items():
        out.append(f"{row['title']}: {row['killed']} of {row['total']} killed "
                   f"({row['rate']:.0%})")
        out += _lines([r for r in result.runs if r.mutant.category == c], result.external)
    out.append(f"{result.killed} of {len(result.runs)} implementation mutants killed "
               f"({result.rate:.0%}; target {TARGET_RATE:.0%}) on the {result.budget} budget "
               f"in {result.seconds:.0f}s")
    if result.external:
        both = result.both_ways()
        sections = ", ".join(f"{k} {v}" for k, v in both["by-section"].items())
        out.append(f"through the protocol: {len(both['through-protocol'])} killed over it"
                   + (f" ({sections}; {both['first-pass']} by the check that killed it in "
                      f"process)" if sections else "") + ", "
                   f"{len(both['inside-the-process'])} only inside the process, "
                   f"{len(both['listed-in-process'])} survivors listed as needing access "
                   f"inside the process")
    return "\n".join(out)


def _lines(runs: list[MutantRun], external: bool = False) -> list[str]:
    out = []
    for r in runs:
        m = r.mutant
        if r.killed:
            out.append(f"  killed   {m.name} [{m.area}] by {r.section}: {r.check} "
                       f"({r.seconds:.0f}s)" + ("  (the catalogue says it survives: update it)"
                                                if r.reason_stale else "")
                       + ("  (inside the process)" if external and not r.through_protocol else ""))
        elif r.verdict == "survived":
            out.append(f"  SURVIVED {m.name} [{m.area}] breaks {m.breaks}")
            out.append(f"           {m.explained(external) or 'no reason written: the gate was expected to kill it'}")
        else:
            out.append(f"  ERROR    {m.name} [{m.area}]: {r.detail}")
    return out
