"""The model's run of a trace, made once and read by every section that replays the trace.

The lockstep replay, the two kernels and the crash cuts' crash-free run each put a
trace's steps through the model from its graph and initial state, in order: the same
computation three times (the model is deterministic: the same steps from the same start
decide the same states). ``ModelRun.of(trace)`` makes it once, with the invariants
evaluated (the replay reports a broken one), and keeps, for the initial state and after
every step, what those sections read of the model: the step's decision (or the refusal
of the step, a ``StepError``), the broken invariants, the projection, the state and the
request's ``last`` (what the implementation's decision coverage reads off its lockstep
reference, ``coverage.Shadow.following``). ``Played`` presents a kept run behind the
model's system interface, step by step; each section still runs its own implementation
and holds it to those answers.

Runs are kept only inside ``shared()`` (the gate without its cache enters it: with the
cache each part records the model functions it ran itself), one per trace object and
per way of evaluating the model (compiled or interpreted), in the process that made
them; outside, ``model_system`` makes a ``ModelSystem`` of its own as before.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

from wgk.conformance.oracle.systems import COMPILED, ModelSystem, StepError

#: The runs kept while ``shared()`` is active (None: not kept), by trace object.
_KEPT: dict[str, dict | None] = {"runs": None}


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """While inside, each trace's run of the model is made once (in this process and in the
    processes forked from it, each keeping its own) and played to every section asking."""
    before = _KEPT["runs"]
    _KEPT["runs"] = {} if before is None else before
    try:
        yield
    finally:
        _KEPT["runs"] = before


def active() -> bool:
    return _KEPT["runs"] is not None


@dataclass(frozen=True)
class After:
    """The model after one step (or in the initial state): ``error`` the refusal of the step
    (None: it was taken, ``decision`` its answer), then the model's broken invariants,
    projection, state, ``last`` and whether the step counts as ``applied``."""

    decision: dict | None
    error: str | None
    violations: tuple[str, ...]
    projection: dict
    state: Any
    last: tuple | None
    applied: bool


@dataclass
class ModelRun:
    """A trace's run of the model (``of``): ``setup`` the error that stopped its set-up, else
    ``initial`` and one ``After`` per step, and ``model``, the system after the last step (its
    names project any state of the run). ``raised``: an exception other than a refusal that
    stopped the run after ``steps`` (the model's own failure), raised again to whoever plays
    that step."""

    trace: Any
    setup: BaseException | None
    initial: After | None
    steps: list[After]
    model: ModelSystem | None
    raised: BaseException | None = None

    @staticmethod
    def of(trace) -> "ModelRun":
        try:
            m = ModelSystem(trace)
        except Exception as e:         # noqa: BLE001 -- raised again to each section asking
            return ModelRun(trace, e, None, [], None)
        steps: list[After] = []
        try:
            initial = After(None, None, tuple(m.check()), m.project(), m.state, m.last, False)
        except Exception as e:         # noqa: BLE001 -- raised again to each section asking
            return ModelRun(trace, e, None, [], None)
        try:
            for step in trace.steps:
                try:
                    decision, error = m.apply(step), None
                except StepError as e:
                    decision, error = None, str(e)
                steps.append(After(decision, error, tuple(m.check()), m.project(), m.state,
                                   m.last, error is None))
        except Exception as e:         # noqa: BLE001 -- raised again at that step
            return ModelRun(trace, None, initial, steps, m, e)
        return ModelRun(trace, None, initial, steps, m)


def run_of(trace) -> ModelRun | None:
    """The kept run of ``trace`` (made now if none is), or None outside ``shared()``."""
    runs = _KEPT["runs"]
    if runs is None:
        return None
    key = (id(trace), COMPILED["default"])
    kept = runs.get(key)
    if kept is None or kept.trace is not trace:
        kept = runs[key] = ModelRun.of(trace)
    return kept


class Played:
    """A kept run of the model behind the system interface: ``apply`` takes the trace's steps
    in order (its own step objects) and answers as the model did; ``project``, ``check``,
    ``state``, ``last`` and ``applied`` are the model's after the last step taken.
    ``checking`` False: no invariant is asked for (``check`` raises, as a ``ModelSystem``
    made with ``checking=False``)."""

    name = "model"

    def __init__(self, run: ModelRun, checking: bool = True):
        if run.setup is not None:
            raise run.setup
        self.run, self.checking, self.n = run, checking, 0
        self.names = run.model.names
        self.graph = run.model.graph
        self.daemon = run.model.daemon
        self._at(run.initial)
        self.applied: dict | None = None

    def _at(self, after: After) -> None:
        self.after, self.state, self.last = after, after.state, after.last

    def apply(self, step: dict) -> dict | None:
        steps = self.run.trace.steps
        if self.n >= len(steps) or steps[self.n] is not step:
            raise RuntimeError(f"the model's kept run of {self.run.trace.id} takes its steps "
                               f"in order: step {self.n} asked for another")
        if self.n == len(self.run.steps):         # the model failed on this step
            raise self.run.raised
        after = self.run.steps[self.n]
        self.n += 1
        self.applied = None
        self._at(after)
        if after.error is not None:
            raise StepError(after.error)
        self.applied = step
        return after.decision

    def project(self) -> dict:
        return self.after.projection

    def project_state(self, state: Any) -> dict:
        """The projection of ``state``, a state of this run (``ModelSystem.project_state``)."""
        return self.run.model.project_state(state)

    def check(self) -> list[str]:
        if not self.checking:
            raise RuntimeError("this run of the model checks no invariant (checking=False)")
        return list(self.after.violations)

    def close(self) -> None:
        pass


def model_system(trace, checking: bool = True):
    """The model as a trace's reference system: its kept run played (inside ``shared()``),
    else a ``ModelSystem`` of its own. Raises ``StepError`` when the trace cannot be set up."""
    run = run_of(trace)
    return ModelSystem(trace, checking=checking) if run is None else Played(run, checking)


__all__ = ["After", "ModelRun", "Played", "active", "model_system", "run_of", "shared"]
