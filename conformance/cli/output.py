"""Printing at the edge: verdicts are data until here."""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, TextIO


def emit_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    # one write: ``json.dump`` writes every token on its own (seconds for a gate's report)
    out.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def progress(message: str, *, enabled: bool = True) -> None:
    """One progress line on stderr (never on stdout, which may carry JSON)."""
    if enabled and sys.stderr.isatty() or enabled == "always":
        print(message, file=sys.stderr, flush=True)


def write_text(path: str, text: str) -> None:
    from pathlib import Path
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def solver_guarded(command: str, body: Callable[[], int]) -> int:
    """Run a command's body; a disagreement between the solver and the executable model,
    or a vacuous proof, fails the command (exit 1) with one line: never a silent pass."""
    from wgk.conformance.z3.prove import SymbolicMismatch, VacuousProof   # z3 only for z3 commands
    try:
        return body()
    except SymbolicMismatch as e:
        print(f"wgk {command}: the solver and the executable model disagree: {e}", file=sys.stderr)
        return 1
    except VacuousProof as e:
        print(f"wgk {command}: vacuous proof refused: {e}", file=sys.stderr)
        return 1


def print_results(results, args, reproduce_line) -> None:
    """Each replayed trace's verdict, its divergences and, for a failure, the command that
    reproduces it (``reproduce_line(result)``)."""
    for r in results:
        cuts = f", {r.crash_cuts} crash cuts" if args.crash_cuts else ""
        print(f"{r.verdict.upper():4} {r.id} ({len(r.steps)} steps{cuts}, {r.path})")
        for d in r.divergences:
            for line in d.describe().splitlines():
                print("     " + line)
        if not r.passed:
            print(f"     reproduce: {reproduce_line(r)}")
