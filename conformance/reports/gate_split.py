"""How the gate's sections split into parts for its workers (``gate_pool``).

A section over traces splits into one part per trace (per mode and trace for the
crash cuts; a trace's parts of the replay, the two kernels and the crash cuts are one group,
run on one worker in turn, sharing the trace's run of the model), the prove section into its bounded and unbounded halves, the mutants section
into one part per mutant, the explore section into one part per instance, the fuzz section into one part per graph shape; the others are one
part each. A part's weight is its rough cost in seconds, so the heaviest start
first. A section whose budget value is malformed stays whole, so that its error
is reported once, as when the sections run in turn.
"""
from __future__ import annotations

from typing import Callable

from wgk.conformance.reports.gate_budget import BUDGETS, count_of, flag_of, instances_of, modes_of
from wgk.conformance.reports.gate_pool import Part
from wgk.conformance.reports.gate_traces import fuzz_budget, real_selection
from wgk.conformance.z3 import mutants as mutants_mod

#: Sections run after the others, in turn, in the gate's own process: the trace matrix
#: reads the crash cuts' results, the coverage the cells replay, probes and fuzz sent; the implementation's mutants and the guards run whole
#: gates of their own.
LATE = ("trace-matrix", "coverage", "impl-mutants", "verify-guards")

#: Rough seconds of a section run whole (only the order of the parts depends on them).
WEIGHTS = {"prove": 20.0, "explore": 4.0, "fuzz": 5.0, "batches": 3.0, "races": 1.0,
           "contract": 0.5, "probes": 2.0}


def trace_group(n: int) -> str:
    """The group of the parts that put the ``n``-th loaded trace through the model (the
    replay, the two kernels, each mode of the crash cuts): placed on one worker, in order, so
    that the trace's run of the model is made once there and played to each
    (``model_runs``)."""
    return f"trace {n}"


def _requests(trace) -> int:
    return sum("request" in s for s in trace.steps)


def split(name: str, budget: str, kw: dict, call: Callable) -> list[Part]:
    """The parts of section ``name``; ``call(name, budget, progress, **kw, **part)`` runs one."""
    def part(offset=0, total=None, weight=WEIGHTS.get(name, 1.0), group=None, **only) -> Part:
        return Part(name, lambda progress: call(name, budget, progress, **kw, **only),
                    offset, total, weight, only, group)

    loaded = kw.get("loaded") or []
    try:
        if name in ("replay", "two-kernels") and loaded:
            flag_of(budget, name, BUDGETS[budget][name])
            real = real_selection(budget, loaded, "traces") if name == "replay" else set()
            return [part(n, len(loaded), _requests(t) * (0.1 if t.id in real else 0.01),
                         trace_group(n), only={n}) for n, t in enumerate(loaded)]
        if name == "crash-cuts" and loaded:
            modes = modes_of(budget, BUDGETS[budget][name])
            real = real_selection(budget, loaded, "cuts")
            held = "in-process" in modes        # the restarts on the held connection: a part
            total = len(loaded) * len(modes) + held
            return [part(m * len(loaded) + n, total,
                         _requests(t) * (0.5 if t.id in real else 0.05) * (4 if mode == "kill" else 1),
                         trace_group(n), only={n}, mode=mode)
                    for m, mode in enumerate(modes) for n, t in enumerate(loaded)] + \
                [part(total - 1, total, 0.3, restarts=True)] * held
        if name == "prove" and BUDGETS[budget].get("unbounded"):
            count_of(budget, name, BUDGETS[budget][name])
            return [part(weight=WEIGHTS["prove"], only={"bounded"}),
                    part(weight=WEIGHTS["prove"] * 2, only={"unbounded"})]
        if name == "explore":
            instances = instances_of(budget, BUDGETS[budget][name])
            return [part(n, len(instances), WEIGHTS["explore"] * inst.tasks, only={n})
                    for n, inst in enumerate(instances)]
        if name == "fuzz":
            examples, _, _, shapes = fuzz_budget(budget)
            return [part(n * examples, examples * len(shapes), WEIGHTS["fuzz"] / len(shapes),
                         only={shape}) for n, shape in enumerate(shapes)]
        if name == "mutants" and mutants_mod.MUTANTS:
            flag_of(budget, name, BUDGETS[budget][name])
            return [part(n, len(mutants_mod.MUTANTS), 1.5, only={m})
                    for n, m in enumerate(mutants_mod.MUTANTS)]
    except ValueError:
        pass
    return [part()]
