"""``wgk replay --external CMD``: traces through an external kernel in lockstep with the
model, with its crash cuts through the crash hook (``--crash-cuts``).

A trace that needs a kind or an environment step the kernel did not declare is
``SKIP`` with its reason, counted; a kernel that breaks the protocol is an
``ERROR`` naming the trace, the step and its last stderr lines (exit 2).
Exit codes: 0 every trace run passed and at least one ran, 1 a divergence,
2 an error, or nothing checked.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from wgk.conformance.cli.output import emit_json, print_results
from wgk.conformance.oracle.external_runs import (
    ALL_KINDS, Kernel, Unusable, applicable, coverage, crash_cuts_external, on_real_world, replay_external,
)


def _one(trace, args: argparse.Namespace, kernel: Kernel):
    real = args.world == "real" and on_real_world(trace, kernel.capabilities)
    result = replay_external(trace, kernel, real=real)
    if not args.crash_cuts:
        return result
    cuts = crash_cuts_external(trace, kernel, real=real)
    extra = tuple(d for c in cuts.cuts for d in c.divergences)
    return replace(result, divergences=result.divergences + extra, crash_cuts=len(cuts.cuts))


def run_external(traces: list, args: argparse.Namespace, kernel: Kernel) -> int:
    results, skipped, error = [], [], None
    try:
        with kernel.reusing():                 # one process after another, reset in between
            caps = kernel.probe()
            if args.crash_cuts and not caps["crash-hook"]:
                error = "--crash-cuts: the kernel declares no crash hook (crash-hook: false)"
            elif args.world == "real" and "real" not in caps.get("worlds", ()):
                error = f"--world real: the kernel declares worlds {caps.get('worlds')} (no \"real\")"
            for n, trace in enumerate(traces if error is None else [], 1):
                why = applicable(trace, caps)
                if why:
                    skipped.append((trace, why))
                    continue
                if not args.json and sys.stderr.isatty():
                    print(f"  [{n}/{len(traces)}] {trace.id}", file=sys.stderr, flush=True)
                results.append(_one(trace, args, kernel))
    except Unusable as e:
        error = str(e)
    failed = [r for r in results if not r.passed]
    applied = (coverage(kernel.capabilities, len(ALL_KINDS), len(skipped), len(traces))
               if kernel.capabilities else "did not start")
    if args.json:
        emit_json({"system": "external", "command": kernel.command, "applied": applied,
                   "traces": [r.to_json() for r in results],
                   "skipped": [{"id": t.id, "path": str(t.path), "reason": why}
                               for t, why in skipped],
                   "passed": len(results) - len(failed), "failed": len(failed),
                   **({"error": error} if error else {})})
    else:
        _print(results, skipped, error, args, kernel, applied)
    if error or not results:
        return 2
    return 1 if failed else 0


def _print(results, skipped, error, args, kernel: Kernel, applied: str) -> None:
    flag = (" --crash-cuts" if args.crash_cuts else "") + \
        (" --world real" if args.world == "real" else "")
    print_results(results, args,
                  lambda r: f"wgk replay {r.path or r.id}{flag} --external '{kernel.command}'")
    for t, why in skipped:
        print(f"SKIP {t.id} ({t.path}): {why}")
    if error:
        print(f"ERROR [replay] {error}")
    failed = sum(1 for r in results if not r.passed)
    print(f"{len(results) - failed} passed, {failed} failed, {len(skipped)} skipped "
          f"(external: {applied})")
    if not results and not error:
        print("ERROR nothing checked: every trace was skipped")
