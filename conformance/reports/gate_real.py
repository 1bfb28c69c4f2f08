"""The gate's sections on real effects: the environment contract and real races.

- ``contract``: every real backend (``GitRepository`` on a fresh git repository,
  ``ProcProcessTable`` on real child processes) held to its in-memory double on
  the same operations (``wgk.conformance.oracle.contract``);
- ``races``: the race incidents (two dispatchers, reset against completion, two
  terminal reports) as real multi-process races on one SQLite database, and on
  PostgreSQL too when the gate is given a backend; each round has exactly one
  winner, and the ledger, the audit and the rebuild are clean afterwards.

Every check says the world it ran on (``data["world"]``).
"""
from __future__ import annotations

from wgk.conformance.oracle.contract import contract_results
from wgk.conformance.oracle.races import RACES, race
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, count_of, flag_of
from wgk.conformance.reports.gate_report import Check


def contract_checks(budget: str, progress: Progress | None) -> list[Check]:
    """One check per contract case and backend (the double and the real one)."""
    flag_of(budget, "contract", BUDGETS[budget]["contract"])
    meter = Meter("contract", None, progress)
    out = []
    for r in contract_results(progress=meter.step):
        out.append(Check("contract", r.name, "pass" if r.ok else "fail", r.seconds,
                         r.detail, r.to_json(), group=r.contract))
    return out


def race_settings(budget: str) -> tuple[int, int]:
    """(processes, rounds) of each race in ``budget``."""
    b = BUDGETS[budget]["races"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: races must map processes and rounds, not {b!r}")
    return (count_of(budget, "races", b.get("processes"), "processes"),
            count_of(budget, "races", b.get("rounds"), "rounds"))


def race_checks(budget: str, progress: Progress | None, backend: str | None = None) -> list[Check]:
    """Each race on SQLite, and on the PostgreSQL ``backend`` when one is given."""
    processes, rounds = race_settings(budget)
    worlds = [("sqlite", None)] + ([("postgresql", backend)] if backend is not None else [])
    meter = Meter("races", len(RACES) * len(worlds), progress)
    out = []
    for world, dsn in worlds:
        for name in RACES:
            r = race(dsn, name, processes=processes, rounds=rounds)
            data = dict(r.to_json(), world=f"{world}, real processes")
            out.append(Check("races", f"{name} ({world})", "pass" if r.ok else "fail", r.seconds,
                             "" if r.ok else r.problems[0], data, group=world))
            meter.step(f"{name} ({world})")
    return out
