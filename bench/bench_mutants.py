"""The gate's mutant section: each mutant's first kill with its prover built kind by kind as
the frames are checked (the changed kinds first, then the catalogue's order, stopping at the
first failing frame), beside the same kill with the whole prover built up front
(``staged=False``).

Both ways run in one process, mutant by mutant, alternating which goes first (z3's term
store grows within a process and later work gets slower); CPU seconds, the steadier figure
on a shared machine. Both ways must report the same kill (the same proof frame, the same
means) for every mutant of the catalogue, else the comparison is not valid.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchResult, Check, Figure, main, say, settle  # noqa: E402

from wgk.conformance.oracle.mutant_traces import trace_verdicts  # noqa: E402
from wgk.conformance.z3.mutants import MUTANTS, first_kill  # noqa: E402

NAME = "mutants"


def timed_kill(m, staged: bool):
    c = time.process_time()
    k = first_kill(m, traces=trace_verdicts, staged=staged)
    return k, time.process_time() - c


def frame(k) -> tuple | None:
    return None if k.proof is None else (k.proof.invariant, k.proof.transition)


def run(quick: bool = False) -> BenchResult:
    t0 = time.perf_counter()
    catalogue = list(MUTANTS.values())
    if quick:        # the rule mutants and one that patches a function, one that swaps the reducer
        catalogue = [m for m in catalogue if m.rules][:8] + [
            MUTANTS["stale-capability-accepted"], MUTANTS["replay-reexecutes-effect"]]
    timed_kill(catalogue[0], True)           # imports, trace files, solver start: not measured
    seconds = {True: {}, False: {}}
    differ = []
    for n, m in enumerate(catalogue):
        say(f"  {m.name} ...")
        kills = {}
        for staged in ((True, False) if n % 2 == 0 else (False, True)):
            kills[staged], seconds[staged][m.name] = timed_kill(m, staged)
        same = (frame(kills[True]) == frame(kills[False])
                and kills[True].summary() == kills[False].summary())
        if not same or not kills[True].killed:
            differ.append(f"{m.name}: {kills[True].summary()} / {kills[False].summary()}")
    checks = [Check("every mutant killed, with the same proof frame and means both ways",
                    not differ, "; ".join(differ) or f"{len(catalogue)} mutants")]
    figures = []
    for label, names in (("every mutant", [m.name for m in catalogue]),
                         ("mutants changing rules", [m.name for m in catalogue if m.rules]),
                         ("mutants patching a function or the reducer",
                          [m.name for m in catalogue if not m.rules])):
        if not names:
            continue
        ours = sum(seconds[True][x] for x in names)
        whole = sum(seconds[False][x] for x in names)
        figures.append(Figure(f"first kill, {label} ({len(names)})", ours, "s cpu",
                              peer="the whole prover built first", peer_value=whole,
                              higher_is_better=False,
                              note=f"{ours / len(names):.2f} s per mutant against "
                                   f"{whole / len(names):.2f} s"))
    return settle(NAME, figures, checks, [
        "a mutant that changes no rule is built in the catalogue's order up to its kill",
        "both ways in one process, alternating which runs first"], [], t0)


if __name__ == "__main__":
    sys.exit(main(NAME, run))
