"""The gate's sections on the model: proofs, the mutant catalogue, exploration, the matrix."""
from __future__ import annotations

import time
from dataclasses import dataclass

from wgk.model.invariants import REGISTRY

from wgk.conformance.check.explore import Instance, explore
from wgk.conformance.reports import gate_cache, tracematrix
from wgk.conformance.reports.gate_frames import prove_kept, witnesses_kept
from wgk.conformance.reports.gate_budget import (
    BUDGETS, Meter, Progress, count_of, flag_of, instances_of, prove_tasks,
)
from wgk.conformance.reports.gate_report import Check
from wgk.conformance.reports.trace_support import passed_cuts
from wgk.conformance.z3 import mutants as mutants_mod
from wgk.conformance.oracle.mutant_traces import trace_verdicts
from wgk.conformance.z3.prove import prove
from wgk.conformance.z3.unbounded import model_report
from wgk.conformance.z3.witnesses import witness_reports


def instance_name(inst: Instance) -> str:
    d = inst.describe()
    name = f"tasks={d['tasks']} attempts={d['attempts']} groups={'+'.join(d['groups'])}"
    return name + (" review" if d["review"] else "")


def explore_checks(budget: str, progress: Progress | None, only: set[int] | None = None
                   ) -> list[Check]:
    """Every instance the budget lists explored (``only``: those at these positions)."""
    instances = [inst for n, inst in enumerate(instances_of(budget, BUDGETS[budget]["explore"]))
                 if only is None or n in only]
    meter = Meter("explore", len(instances), progress)
    out = []
    for inst in instances:
        name = instance_name(inst)
        r = explore(inst, progress=lambda states, queue: meter.note(f"{name}: {states} states"))
        detail = (f"{r.distinct_states} states" if not r.violations else
                  "; ".join(f"{v.invariant} after {len(v.path)} steps" for v in r.violations))
        out.append(Check("explore", name, "pass" if not r.violations else "fail", r.seconds,
                         detail, {"distinct_states": r.distinct_states}))
        meter.step(name)
    return out



#: The prove section's two halves: the proofs on the budget's chain with the witnesses, and
#: (where the budget says ``unbounded``) the cutoff theorem's, each a part of its own.
PROVE_PARTS = ("bounded", "unbounded")


def prove_checks(budget: str, progress: Progress | None, only: set[str] | None = None
                 ) -> list[Check]:
    """Every (invariant x transition) proof frame, and a witness for every sometimes property
    (``only``: these of ``PROVE_PARTS``)."""
    tasks = count_of(budget, "prove", BUDGETS[budget]["prove"])
    out = [] if only is not None and "bounded" not in only else _bounded_checks(budget, tasks,
                                                                              progress)
    if BUDGETS[budget].get("unbounded") and (only is None or "unbounded" in only):
        out += unbounded_checks(budget, progress)
    return out


def _bounded_checks(budget: str, tasks: int, progress: Progress | None) -> list[Check]:
    goals = [p.id for p in REGISTRY.values() if p.kind == "sometimes"]
    meter = Meter("prove", None, progress)
    step = lambda m: meter.step(f"{tasks} tasks: {m}")   # noqa: E731
    if gate_cache.ACTIVE is not None:       # each frame and each witness kept in the gate's cache
        report, store = prove_kept(Instance.proof(tasks=tasks), gate_cache.ACTIVE, step)
        found = witnesses_kept(goals, gate_cache.ACTIVE, store)
        store.done()
    else:
        report = prove(Instance.proof(tasks=tasks), progress=step)
        found = None
    out = frame_checks(report, tasks)
    out += [Check("prove", name, "pass" if ok else "fail", secs, hint, group="base case")
            for name, ok, secs, hint in report.base_checks()]
    for n, goal in enumerate(goals):
        [w] = witness_reports([goal], recorded=True) if found is None else [found[n]]
        ok = w["status"] == "reached"
        how = f"at depth {w['found_at']} by {w['found_by']}"
        if w["found_by"] != "recorded path":
            how += " (wgk prove --write-witness-paths records it)"
        out.append(Check("prove", f"witness {w['goal']}", "pass" if ok else "fail", w.get("seconds", 0.0),
                         how if ok else f"{w['status']}: wgk prove --invariant {w['goal']}",
                         {"found_by": w["found_by"], "path": w.get("path")}, group="witnesses"))
        meter.step(f"witness {goal}")
    return out


def frame_checks(report, tasks: int) -> list[Check]:
    """One check per proof frame of ``report`` (proved on a chain of ``tasks``)."""
    return [Check("prove", f"{r.invariant} after {r.transition}",
                  "pass" if r.status == "proved" else "fail", r.seconds,
                  "" if r.status == "proved" else f"{r.status}: wgk prove --invariant {r.invariant}",
                  {"solved": r.solved, "status": r.status, "transition": r.transition,
                   "tasks": tasks}, group=r.invariant) for r in report.results]


def unbounded_checks(budget: str, progress: Progress | None) -> list[Check]:
    """For every graph (part of the prove section where the budget says ``unbounded``): the
    cutoff theorem's conditions hold and each always property is proved at the cutoff graph."""
    flag_of(budget, "unbounded", BUDGETS[budget]["unbounded"])
    meter = Meter("prove", None, progress)
    rep = model_report(progress=lambda m: meter.note(f"unbounded: {m}"))
    bad = rep.refused()
    out = [Check("prove", "cutoff conditions", "fail" if bad else "pass", 0.0,
                 f"{bad[0].subject}: {bad[0].detail}: wgk prove --unbounded" if bad else
                 f"{len(rep.conditions)} locality conditions hold")]
    out += [Check("prove", f"{c.property} for every graph",
                  "pass" if c.graphs == "every graph" else "fail", 0.0,
                  "" if c.graphs == "every graph" else f"{c.reasons[0]}: wgk prove --unbounded",
                  c.to_json(), group="unbounded") for c in rep.claims]
    return out


def mutant_checks(budget: str, progress: Progress | None,
                  only: set[str] | None = None) -> list[Check]:
    """Every known-bad variant of the model must be killed: the proof of the property it names
    fails, and one of its incident traces or exploration detects it (each mutant stops at
    its first kill: ``first_kill``; ``only``: the names of
    the mutants this call runs)."""
    flag_of(budget, "mutants", BUDGETS[budget]["mutants"])
    catalogue = mutants_mod.MUTANTS
    meter = Meter("mutants", len(catalogue), progress)
    out = []
    for m in [m for m in catalogue.values() if only is None or m.name in only]:
        k = mutants_mod.first_kill(m, traces=trace_verdicts)
        out.append(Check("mutants", m.name, "pass" if k.killed else "fail", k.seconds,
                         k.summary() if k.killed else
                         f"{k.summary()}: wgk mutants --name {m.name}",
                         {"by": k.by, "means": k.means(), "incidents": list(m.incidents)}))
        meter.step(m.name)
    return out


@dataclass(frozen=True)
class Earlier:
    """What the gate's earlier sections found that the trace matrix would otherwise compute
    again: the passed in-process crash cuts per trace, the proof frames at the budget's tasks
    ``(invariant, transition, status, solved)`` in the order proved, the cutoff theorem's
    claims by property (each None when its section did not run or broke)."""

    cuts: dict[str, int] | None = None
    frames: list[tuple[str, str, str, bool]] | None = None
    claims: dict[str, dict] | None = None
    tasks: int | None = None         # the tasks of the chain the frames were proved on
    cells: frozenset | None = None   # the decision cells replay, probes and fuzz sent


def earlier_results(sections: list) -> Earlier:
    """``Earlier`` from the sections run so far (``Section`` objects)."""
    done = {s.name: s.checks for s in sections if not s.skipped}
    prove = done.get("prove", [])
    frames = [(c.group, c.data["transition"], c.data["status"], c.data["solved"])
              for c in prove if "transition" in c.data]
    claims = {c.data["property"]: c.data for c in prove
              if c.group == "unbounded" and "graphs" in c.data}
    tasks = {c.data["tasks"] for c in prove if "transition" in c.data}
    from wgk.conformance.reports.gate_coverage import sent_cells
    sent = sent_cells(done)
    return Earlier(passed_cuts(done["crash-cuts"]) if "crash-cuts" in done else None,
                   frames or None, claims or None, tasks.pop() if len(tasks) == 1 else None,
                   frozenset(sent) if sent is not None else None)


def trace_matrix_checks(budget: str, progress: Progress | None,
                        earlier: Earlier | None = None) -> list[Check]:
    """Every invariant traced: model rule, z3 proof, traces, crash cuts, runtime guard
    (``earlier``: what the crash-cuts and prove sections found, not computed again)."""
    flag_of(budget, "trace-matrix", BUDGETS[budget]["trace-matrix"])
    tasks = prove_tasks(budget)
    earlier = earlier or Earlier()
    meter = Meter("trace-matrix", None, progress)
    t0 = time.perf_counter()
    m = tracematrix.build(tasks=tasks, progress=lambda msg: meter.note(msg.strip()),
                          passed_cuts=earlier.cuts,
                          frames=earlier.frames if earlier.tasks == tasks else None,
                          claims=earlier.claims)
    each = (time.perf_counter() - t0) / max(1, len(m.rows))
    out = [Check("trace-matrix", r.invariant, "fail" if r.missing() else "pass", each,
                 f"no {', '.join(r.missing())}: wgk trace-matrix" if r.missing() else "")
           for r in m.rows]
    out += [Check("trace-matrix", f"obligation {o.number}", "fail" if o.missing() else "pass", 0.0,
                  f"{o.missing()[0]}: wgk trace-matrix" if o.missing() else "", group="obligations")
            for o in m.obligations]
    if m.findings:
        out.append(Check("trace-matrix", "guard markers", "fail", 0.0,
                         f"{m.findings[0]} ({len(m.findings)} problems): wgk trace-matrix"))
    block = tracematrix.document_block()
    if block is not None and tasks == 3:        # the document's table is generated at 3 tasks
        current = block == tracematrix.markdown(m)
        out.append(Check("trace-matrix", "design document current", "pass" if current else "fail",
                         0.0, "" if current else
                         f"{tracematrix.DOCUMENT.name} differs: wgk trace-matrix --write-docs"))
    return out

