"""The gate's sections on real effects: the environment contract and real races.

- ``contract``: every real backend (``GitRepository`` on a fresh git repository,
  ``ProcProcessTable`` on real child processes) held to its in-memory double on
  the same operations (``wgk.conformance.oracle.contract``);
- ``races``: the race incidents (two dispatchers, reset against completion, two
  terminal reports) as real multi-process races on one SQLite database, and on
  PostgreSQL too when the gate is given a backend; each round has exactly one
  winner, and the ledger, the audit and the rebuild are clean afterwards. With the
  row locks (SQLite, and PostgreSQL with them), a dependency's reopen against its
  dependents' admissions (none admitted after the reopen in the ledger's order) and
  batches crossing two tasks in opposite orders (PostgreSQL: deadlocks, run again)
  (``wgk.conformance.oracle.dependency_races``).
  With ``lands`` rounds in the budget (the default and deep gates; a round takes
  seconds of real git, too many for the quick one), also two Land workers racing
  one target (WG's exit canary) on real git and real processes: one
  compare-and-swap winner, the loser repaired in place, validated again and
  landed later, no replacement attempt (``wgk.conformance.oracle.land_race``).

- ``two-kernels``: every trace replayed in lockstep with the model by two kernels
  (two connections) on one database taking its steps in turn;
- ``batches``: group commit: a trace's requests sent in batches through
  ``handle_batch`` in lockstep with the model, with crash cuts inside every
  batch (``wgk.conformance.oracle.batches``).

Every check says the world it ran on (``data["world"]``).
"""
from __future__ import annotations

import time

from wgk.conformance.oracle.batches import batch_replay
from wgk.conformance.oracle.contract import contract_results
from wgk.conformance.oracle.dependency_races import DEPENDENCY_RACES, dependency_race
from wgk.conformance.oracle.impl_system import TwoKernels, backend
from wgk.conformance.oracle.land_race import NAME as LAND_RACE, land_race
from wgk.conformance.oracle.model_runs import Played, run_of
from wgk.conformance.oracle.races import RACES, race
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.reports.gate_budget import (
    BUDGETS, Meter, Progress, count_of, first_lines, flag_of,
)
from wgk.conformance.reports.gate_report import Check


def contract_checks(budget: str, progress: Progress | None,
                    backend: str | None = None) -> list[Check]:
    """One check per contract case and backend (the double and the real one; with a
    PostgreSQL ``backend``, the store's durability there too)."""
    flag_of(budget, "contract", BUDGETS[budget]["contract"])
    meter = Meter("contract", None, progress)
    out = []
    for r in contract_results(progress=meter.step, dsn=backend):
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


def deadlock_rounds(budget: str) -> int:
    """Rounds of the crossed batches in ``budget`` (on PostgreSQL each round's deadlock costs
    the server's deadlock_timeout, a second by default); the rounds of the races if unset."""
    b = BUDGETS[budget]["races"]
    return count_of(budget, "races", b.get("deadlocks", race_settings(budget)[1]), "deadlocks")


def race_checks(budget: str, progress: Progress | None, backend: str | None = None) -> list[Check]:
    """Each race on SQLite, and on the PostgreSQL ``backend`` when one is given: there with
    the row locks, and without them (the writes' conditions alone keep one winner)."""
    processes, rounds = race_settings(budget)
    worlds = [("sqlite", None, True)] + ([("postgresql", backend, True),
                                          ("postgresql, no row locks", backend, False)]
                                         if backend is not None else [])
    locked = [w for w in worlds if w[2]]
    meter = Meter("races", len(RACES) * len(worlds) + len(DEPENDENCY_RACES) * len(locked),
                  progress)
    out = []
    for world, dsn, locks in worlds:
        for name in RACES:
            r = race(dsn, name, processes=processes, rounds=rounds, row_locks=locks)
            out.append(_race_check(r, world))
            meter.step(f"{name} ({world})")
    for world, dsn, _ in locked:         # the rows a decision reads are locked for its duration
        for name in DEPENDENCY_RACES:
            n = deadlock_rounds(budget) if name == "crossed-batches" else rounds
            out.append(_race_check(dependency_race(dsn, name, processes=processes, rounds=n),
                                   world))
            meter.step(f"{name} ({world})")
    lands = BUDGETS[budget]["races"].get("lands")
    if lands:
        r = land_race(count_of(budget, "races", lands, "lands"))
        out.append(Check("races", f"{LAND_RACE} (sqlite)", "pass" if r.ok else "fail", r.seconds,
                         "" if r.ok else r.problems[0],
                         dict(r.to_json(), world="sqlite, real git, real processes"),
                         group="sqlite"))
    return out


def _race_check(r, world: str) -> Check:
    data = dict(r.to_json(), world=f"{world}, real processes")
    return Check("races", f"{r.race} ({world})", "pass" if r.ok else "fail", r.seconds,
                 "" if r.ok else r.problems[0], data, group=world)


def database_world() -> str:
    return "postgresql" if backend() is not None else "sqlite"


class DecidingModel(ModelSystem):
    """The model as the two kernels' reference: it decides and projects, and evaluates no
    invariant (``checking=False``): the replay section evaluates them on this trace's run of
    the same model (the same steps from the same start decide the same states), and reports a
    broken one there; here the kernels are held to the model's answers and projections."""

    def __init__(self, trace):
        super().__init__(trace, checking=False)

    def check(self) -> list[str]:
        return []


class DecidingPlayed(Played):
    """``DecidingModel`` on the trace's kept run of the model (``model_runs``): the replay
    section's run, played; no invariant reported here either."""

    def check(self) -> list[str]:
        return []


def deciding_model(trace) -> DecidingModel | DecidingPlayed:
    """The two kernels' reference: the trace's kept run played (inside
    ``model_runs.shared()``), else a ``DecidingModel`` of its own."""
    run = run_of(trace)
    return DecidingModel(trace) if run is None else DecidingPlayed(run, checking=False)


def two_kernel_checks(budget: str, progress: Progress | None, loaded: list,
                      only: set[int] | None = None) -> list[Check]:
    """Every trace by two kernels on one database in turn, in lockstep with the model
    (``only``: the positions in ``loaded`` of the traces this call runs)."""
    flag_of(budget, "two-kernels", BUDGETS[budget]["two-kernels"])
    meter = Meter("two-kernels", len(loaded), progress)
    world = f"{database_world()}, two connections, in-memory world"
    out = []
    for trace in (loaded if only is None else [t for n, t in enumerate(loaded) if n in only]):
        t0 = time.perf_counter()
        try:
            systems = [deciding_model(trace), TwoKernels(trace)]
        except StepError as e:
            out.append(Check("two-kernels", trace.id, "fail", 0.0, f"cannot set up: {e}"))
            meter.step(trace.id)
            continue
        try:
            r = replay(trace, systems)
            verdict, detail = r.verdict, first_lines(r.divergences)
        except Exception as e:         # noqa: BLE001 -- a kernel that raises fails its trace
            verdict, detail = "fail", f"raised {type(e).__name__}: {e}".splitlines()[0]
        finally:
            for system in systems:
                system.close()
        out.append(Check("two-kernels", trace.id, verdict, time.perf_counter() - t0, detail,
                         {"world": world, "trace": str(trace.path)}, group="two-kernels"))
        meter.step(trace.id)
    return out


def batch_traces(budget: str, loaded: list) -> list:
    """The traces the batches section runs: every one, or the budget's number of those where
    group commit matters most (the most effects right after another request)."""
    b = BUDGETS[budget]["batches"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: batches must map size and traces, not {b!r}")
    count_of(budget, "batches", b.get("size"), "size")
    if b.get("traces") == "all":
        return list(loaded)
    n = count_of(budget, "batches", b.get("traces"), "traces")
    return sorted(loaded, key=lambda t: (-_effects_after_requests(t), t.id))[:n]


def _effects_after_requests(trace) -> int:
    steps = trace.steps
    return sum(1 for a, b in zip(steps, steps[1:]) if "request" in a and "request" in b
               and b["request"].get("kind") in ("commit-effect", "commit-cleanup", "dispatch"))


def batch_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """Group commit: each selected trace in batches, lockstep, and every cut inside a batch."""
    chosen = batch_traces(budget, loaded)
    size = BUDGETS[budget]["batches"]["size"]
    meter = Meter("batches", len(chosen), progress)
    world = f"{database_world()}, in-memory world"
    out = []
    for trace in chosen:
        t0 = time.perf_counter()
        try:
            r = batch_replay(trace, size=size)
        except StepError as e:
            out.append(Check("batches", trace.id, "fail", 0.0, f"cannot set up: {e}", group=trace.id))
            meter.step(trace.id)
            continue
        data = {"world": world, "batches": r.batches, "size": size, "trace": str(trace.path)}
        out.append(Check("batches", f"{trace.id} lockstep", r.verdict, time.perf_counter() - t0,
                         first_lines(r.divergences), data, group=trace.id))
        out += [Check("batches", f"{trace.id} {c.name}", c.verdict, c.seconds,
                      first_lines(c.divergences), {"world": world}, group=trace.id) for c in r.cuts]
        meter.step(f"{trace.id} ({len(r.cuts)} cuts)")
    return out
