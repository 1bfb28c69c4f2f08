"""The gate's budgets and how a section reads its value, progress ticks, the bundled corpus.

A budget maps each section to a value that says how much of it runs (a number of
tasks, a list of instances or modes, a flag); a false value (``0``, ``False``, an
empty list) or a missing entry means the section is not run. Each section reads
its value here, by value: a value of the wrong shape is an error naming it.
"""
from __future__ import annotations

import importlib.resources
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from wgk.conformance.check.explore import Instance

BUDGETS = {
    "quick": {"prove": 2, "mutants": True, "replay": True, "trace-matrix": False, "contract": True,
              "coverage": True,
              "races": {"processes": 3, "rounds": 20, "deadlocks": 3}, "two-kernels": True,
              "batches": {"size": 3, "traces": 3}, "probes": {"traces": 3}, "tamper": {"traces": 1, "umasks": [0o022]}, "real-world": {"traces": 6, "cuts": 1},
              "explore": [Instance(tasks=1), Instance(tasks=2)],
              "crash-cuts": ["in-process"],
              "fuzz": {"examples": 30, "steps": 25, "tasks": 2,
                       "shapes": ["chain", "fan-in", "diamond"]}},
    "default": {"prove": 3, "unbounded": True, "mutants": True, "replay": True, "trace-matrix": True,
                "coverage": True,
                "contract": True, "races": {"processes": 8, "rounds": 100, "deadlocks": 5, "lands": 2}, "two-kernels": True,
                "batches": {"size": 3, "traces": "all"}, "probes": {"traces": 4, "thorough": True}, "tamper": {"traces": 3}, "real-world": {"traces": "all", "cuts": 4},
                "explore": [Instance(tasks=3)],
                "crash-cuts": ["in-process"],
                "fuzz": {"examples": 150, "steps": 40, "tasks": 3,
                         "shapes": ["chain", "fan-in", "diamond"]}},
    "deep": {"prove": 4, "unbounded": True, "mutants": True, "replay": True, "trace-matrix": True,
             "coverage": True,
             "contract": True, "races": {"processes": 8, "rounds": 300, "deadlocks": 10, "lands": 4}, "two-kernels": True,
             "batches": {"size": 4, "traces": "all"}, "probes": {"traces": "all", "thorough": True}, "tamper": {"traces": "all"}, "real-world": {"traces": "all", "cuts": 8},
             "explore": [Instance(tasks=3),
                         Instance(tasks=1, attempts=2, groups=("core", "env", "evidence", "operator",
                                                               "legacy")),
                         Instance(tasks=2, groups=("core", "env", "operator", "legacy"),
                                  review=True)],
             "crash-cuts": ["in-process", "kill"],
             "fuzz": {"examples": 2000, "steps": 60, "tasks": 3,
                      "shapes": ["chain", "fan-in", "diamond"]},
             # every planted bug of wgk.impl, each through the default budget's sections
             "impl-mutants": "default",
             # every '# guards:' marker disabled in turn, through the quick budget's sections
             "verify-guards": "quick"},
}

CRASH_MODES = ("in-process", "kill")
COUNTEREXAMPLES = "traces/counterexamples"


def bundled_traces() -> Path:
    """The trace corpus shipped with wgk: the package data ``wgk.traces`` (in an editable
    install, the checkout's ``traces/``)."""
    try:
        return Path(str(importlib.resources.files("wgk.traces")))
    except ModuleNotFoundError:     # an editable install made before wgk.traces was packaged
        return Path(__file__).resolve().parents[2] / "traces"


#: The bundled traces (the gate's default corpus).
BUNDLED_TRACES = bundled_traces()


# --- progress -------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Where a section is: ``done`` of ``total`` (None: not known in advance) after
    ``seconds``; ``final`` once the section is over (``label`` is then its verdict)."""

    section: str
    done: int
    total: int | None
    seconds: float
    label: str = ""
    final: bool = False

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[Tick], None]


class Meter:
    """Counts a section's work and reports it to an optional ``Progress`` callback."""

    def __init__(self, section: str, total: int | None, progress: Progress | None):
        self.section, self.total, self.progress = section, total, progress
        self.done, self.t0 = 0, time.perf_counter()
        self.note("")

    def step(self, label: str = "") -> None:
        self.done += 1
        self.note(label)

    def note(self, label: str) -> None:
        if self.progress:
            done = self.done if self.total is None else min(self.done, self.total)
            self.progress(Tick(self.section, done, self.total, time.perf_counter() - self.t0, label))


# --- reading a budget by value ---------------------------------------------------


def count_of(budget: str, section: str, value, key: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        what = f"{section}.{key}" if key else section
        raise ValueError(f"budget {budget}: {what} must be a positive number, not {value!r}")
    return value


def flag_of(budget: str, section: str, value) -> None:
    if value is not True:
        raise ValueError(f"budget {budget}: {section} must be true or false, not {value!r}")


def modes_of(budget: str, value) -> list[str]:
    if not isinstance(value, (list, tuple)) or not set(value) <= set(CRASH_MODES):
        raise ValueError(f"budget {budget}: crash-cuts must list modes of {', '.join(CRASH_MODES)}, "
                         f"not {value!r}")
    return list(value)


def instances_of(budget: str, value) -> list[Instance]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, Instance) for i in value):
        raise ValueError(f"budget {budget}: explore must list instances, not {value!r}")
    return list(value)


def prove_tasks(budget: str) -> int:
    """The tasks of the proofs: the budget's ``prove`` value, 3 when proofs are not run."""
    value = BUDGETS[budget].get("prove")
    return count_of(budget, "prove", value) if value else 3



def first_lines(divergences, n: int = 3) -> str:
    """The first line of each of the first ``n`` divergences, joined."""
    return "; ".join(d.describe().splitlines()[0] for d in divergences[:n])


class Nothing(Exception):
    """A section with nothing to check."""
