"""The gate's sections on traces and generated runs: lockstep replay, crash cuts, fuzzing."""
from __future__ import annotations

import dataclasses
import time

from hypothesis import settings

from wgk.conformance.oracle.coverage import recording
from wgk.conformance.oracle.crashcuts import crash_cuts, in_memory
from wgk.conformance.oracle.fuzz import FuzzConfig, FuzzResult, run_fuzz
from wgk.conformance.oracle.fuzz_shapes import SHAPES
from wgk.conformance.oracle.held_restarts import held_restarts
from wgk.conformance.oracle.impl_system import factory
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.real_world import WORLDS, world_for
from wgk.conformance.oracle.select import systems_for
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.reports.gate_cache_memo import kept_run, memoized
from wgk.conformance.reports.gate_budget import (
    BUDGETS, COUNTEREXAMPLES, Meter, Progress, count_of, first_lines, flag_of, modes_of,
)
from wgk.conformance.reports.gate_report import Check


def _real_score(trace) -> int:
    """How much of the real world a trace exercises: an owner's death (a real zombie), someone
    else's commit, a land, a crash, a convergence, an owner's edit."""
    envs = {s.get("env") for s in trace.steps}
    kinds = {s["request"].get("kind") for s in trace.steps if "request" in s}
    return (len(envs & {"owner-dies", "move-target", "crash", "converge", "edit"})
            + ("commit-effect" in kinds))


def real_selection(budget: str, loaded: list, key: str) -> set[str]:
    """The ids of the traces the budget runs on the real world (``real-world.<key>``: a number
    or "all"), among those whose steps can be staged for real; the most real first, shortest
    first among equals."""
    b = BUDGETS[budget].get("real-world") or {}
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: real-world must map traces and cuts, not {b!r}")
    able = [t for t in loaded if world_for(t)[0] == "real"]
    if b.get(key) == "all":
        return {t.id for t in able}
    if not b.get(key):
        return set()
    n = count_of(budget, "real-world", b[key], key)
    if key == "cuts":
        # A cut costs a restore of the real world: the shortest first, after those that land
        # (only there does a cut fall between a land's ref update and the commit of its decision).
        able = [t for t in able if _real_score(t) >= 2]
        ranked = sorted(able, key=lambda t: (not _lands(t), sum("request" in s for s in t.steps), t.id))
    else:
        ranked = sorted(able, key=lambda t: (-_real_score(t), len(t.steps), t.id))
    return {t.id for t in ranked[:n]}


def _lands(trace) -> bool:
    """Whether the trace commits an effect: only there does a cut fall between a land's ref update
    in the real repository and the commit of its decision."""
    return any(s.get("request", {}).get("kind") == "commit-effect" for s in trace.steps)


def _world(trace, selected: set[str]) -> tuple[str, str]:
    """("real" | "memory", how the result names it)."""
    if trace.id in selected:
        return "real", WORLDS["real"]
    kind, why = world_for(trace)
    return "memory", WORLDS["memory"] + (f" ({why})" if kind == "memory" else "")


def chosen(loaded: list, only) -> list:
    """The traces of ``loaded`` at the positions ``only`` lists (all of them for None)."""
    return list(loaded) if only is None else [t for n, t in enumerate(loaded) if n in only]


def replay_checks(budget: str, progress: Progress | None, loaded: list,
                  only: set[int] | None = None) -> list[Check]:
    """Every trace through the model and the implementation in lockstep, on the real world
    where the budget selects it and the trace allows (``only``: the positions in ``loaded``
    of the traces this call runs, the selection still made among all of them)."""
    flag_of(budget, "replay", BUDGETS[budget]["replay"])
    real = real_selection(budget, loaded, "traces")
    meter = Meter("replay", len(loaded), progress)
    out = []
    for trace in chosen(loaded, only):
        with recording() as sent:       # every request sent to the implementation, by cell
            out.append(_replay_check(trace, real, sent))
        meter.step(trace.id)
    return out


def _replay_check(trace, real: set[str], sent: set) -> Check:
    """One trace through the model and the implementation in lockstep."""
    t0 = time.perf_counter()
    world, described = _world(trace, real)
    flag = " --world real" if world == "real" else ""
    try:
        systems = systems_for(trace, "both", world, lockstep=True)
    except StepError as e:
        return Check("replay", trace.id, "fail", 0.0, f"cannot set up: {e}", {"world": described})
    try:
        r = replay(trace, systems)
    finally:
        for s in systems:
            s.close()
    return Check("replay", trace.id, r.verdict, time.perf_counter() - t0,
                 first_lines(r.divergences), {"steps": len(r.steps), "systems": list(r.systems),
                                               "world": described,
                                               "reproduce": f"wgk replay {trace.path} --system both{flag}",
                                               "trace": str(trace.path), "cells": sorted(sent)})


def crash_cut_checks(budget: str, progress: Progress | None, loaded: list,
                     only: set[int] | None = None, mode: str | None = None,
                     restarts: bool = False) -> list[Check]:
    """Every durable boundary of every trace: one check per crash cut, on the real world where
    the budget selects it (``real-world.cuts``) and the trace allows (``only``: the positions
    of the traces this call cuts; ``mode``: the one mode of the budget's it runs); with the
    in-process cuts, the restarts on their held connection (``held_restart_checks``: run by
    the whole section after its cuts, or alone by the call that asks for ``restarts``)."""
    modes = modes_of(budget, BUDGETS[budget]["crash-cuts"])
    if restarts:
        return held_restart_checks(loaded, Meter("crash-cuts", 1, progress))
    real = real_selection(budget, loaded, "cuts")
    whole = only is None and mode is None and "in-process" in modes
    meter = Meter("crash-cuts", len(loaded) * len(modes) + whole, progress)
    out = []
    for mode in [m for m in modes if mode in (None, m)]:
        for trace in chosen(loaded, only):
            world, described = _world(trace, real)
            try:
                result = crash_cuts(trace, mode=mode, world=world,
                                    progress=lambda m: meter.note(f"{trace.id}{m.rstrip()}"))
            except StepError as e:
                out.append(Check("crash-cuts", f"{trace.id} ({mode})", "fail", 0.0,
                                 f"cannot set up: {e}", {"world": described}, group=trace.id))
                meter.step(trace.id)
                continue
            flag = (" --kill" if mode == "kill" else "") + (" --world real" if world == "real" else "")
            for cut in result.cuts:
                data = {"world": described}
                if cut.equivalent:         # its checks after the re-send: an equivalent cut's
                    data["by-equivalence"] = True
                if cut.recovered_equivalent:   # and the whole cut from its recovered state on
                    data["from-recovered-state"] = True
                if cut.divergences:
                    data.update(reproduce=f"wgk replay {trace.path} --system impl --crash-cuts{flag}",
                                trace=str(trace.path))
                out.append(Check("crash-cuts", f"{trace.id} {cut.name} ({mode})", cut.verdict,
                                 cut.seconds, first_lines(cut.divergences), data, group=trace.id))
            meter.step(f"{trace.id} ({len(result.cuts)} cuts, {result.equivalent} of them "
                       f"decided by equivalence, {mode}, {world})")
    if whole:
        out += held_restart_checks(loaded, meter)
    return out


def held_restart_checks(loaded: list, meter: Meter) -> list[Check]:
    """The in-process cuts' restarts on their held connection, each with a state planted on
    it that a killed process cannot leave behind (``held_restarts``): one check per state, on
    the cuts of the first commit of the shortest trace that commits (a skip when none does,
    or on PostgreSQL)."""
    out = _held_restart_checks(loaded)
    meter.step("restarts on the held connection")
    return out


def _held_restart_checks(loaded: list) -> list[Check]:
    if not in_memory("in-process", "memory"):
        return [Check("crash-cuts", "restarts on the held connection", "skip", 0.0,
                      "the cuts on PostgreSQL hold no connection: each opens a new one")]
    ranked = sorted(loaded, key=lambda t: (sum("request" in s for s in t.steps), len(t.steps), t.id))
    why = "no trace"
    for trace in ranked:
        try:
            results = held_restarts(trace)
        except StepError as e:                  # no request of it commits, or no setup
            why = str(e)
            continue
        return [Check("crash-cuts", f"{trace.id} restart on the held connection after {r.plant}",
                      r.verdict, r.seconds, "; ".join(r.problems),
                      {"planted": r.plant, "cuts": r.cuts, "trace": str(trace.path)}, group=trace.id)
                for r in results]
    return [Check("crash-cuts", "restarts on the held connection", "skip", 0.0,
                  f"no trace to restart on: {why}")]


def fuzz_shapes(budget: str, b: dict) -> list[str]:
    """The graph shapes the fuzz section runs (a chain when the budget names none)."""
    shapes = b.get("shapes", ["chain"])
    if not isinstance(shapes, (list, tuple)) or not shapes or not set(shapes) <= set(SHAPES):
        raise ValueError(f"budget {budget}: fuzz.shapes must list shapes of {', '.join(SHAPES)}, "
                         f"not {shapes!r}")
    return list(shapes)


def fuzz_budget(budget: str) -> tuple[int, int, int, list[str]]:
    """The fuzz section's examples, steps, tasks and graph shapes."""
    b = BUDGETS[budget]["fuzz"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: fuzz must map examples, steps and tasks, not {b!r}")
    examples, steps, tasks = (count_of(budget, "fuzz", b.get(k), k) for k in ("examples", "steps", "tasks"))
    return examples, steps, tasks, fuzz_shapes(budget, b)


def fuzz_checks(budget: str, progress: Progress | None,
                out_dir: str = COUNTEREXAMPLES, only: set[str] | None = None) -> list[Check]:
    """Generated request sequences through the model and the implementation in lockstep, on
    every graph shape the budget lists (one check each; ``only``: these shapes)."""
    examples, steps, tasks, shapes = fuzz_budget(budget)
    shapes = [s for s in shapes if only is None or s in only]
    meter = Meter("fuzz", examples * len(shapes), progress)
    make = memoized(factory())        # answered call by call from the gate's cache, if any
    out = []
    for shape in shapes:
        def counted(graph, making, shape=shape):     # one system per generated run
            meter.step(f"{shape}: {examples}x{steps}, {tasks} tasks")
            return making(graph)
        t0 = time.perf_counter()

        def fuzzed(making, shape=shape, counted=counted) -> dict:
            r = run_fuzz(FuzzConfig(tasks=tasks, shape=shape, system=lambda g: counted(g, making)),
                         examples=examples, steps=steps, seed=0, out_dir=out_dir)
            return dataclasses.asdict(r)
        with recording() as sent:
            # a passing run kept by the gate's cache while the model's side is unchanged and
            # every example's system answers each call as before (``gate_cache_memo.kept_run``)
            # (with the settings the run takes from Hypothesis's profile, not named by it)
            inherited = [repr(getattr(settings.default, k, None))
                         for k in ("backend", "derandomize", "verbosity")]
            r = FuzzResult(**kept_run("fuzz", [shape, tasks, examples, steps, 0, out_dir,
                                               inherited], None, make, fuzzed,
                                      keep=lambda r: r["verdict"] == "pass"))
        name = f"lockstep {examples}x{steps}" + ("" if shape == "chain" else f" {shape}")
        out.append(Check("fuzz", name, r.verdict, time.perf_counter() - t0,
                         (r.failure or "").splitlines()[0] if r.failure else "",
                         dict(r.to_json(), shape=shape, cells=sorted(sent))))
    return out
