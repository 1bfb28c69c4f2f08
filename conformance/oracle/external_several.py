"""Several instances of an external kernel on one storage (``processes`` of 2 or more).

The harness starts the first instance with ``start`` and every other one on the
same storage with ``recover`` (it opens what is there), as the protocol says:

- ``two_kernels_external``: a trace replayed in lockstep with the model by two
  instances taking its steps in turn, the state read through a third instance
  that takes no step when the kernel declares ``processes`` of 3 or more (so that
  reading refreshes neither, and the next one must find the other's commit itself),
  else through the instance that did not take the last step (so each must see what
  the other committed); a ``crash`` kills them all (``kill -9``) and starts them again;
- ``race_external``: the race incidents of ``races`` as real races between
  processes: one instance sets a graph of one task per round up, then
  ``processes`` instances each send their competing request for the round's
  task at once (a barrier between rounds). Each round must have exactly one
  ``applied`` winner and every other answer a loser's; afterwards every
  request's key must be in the journal with the decision it was answered, and
  each task must hold the winner's outcome (a dispatch's worktree too: the losers'
  answers must not undo the winner's effects).
"""
from __future__ import annotations

import threading
import time

from contextlib import contextmanager

from dataclasses import replace

from wgk.conformance.oracle.external import ExternalSystem, ProtocolError
from wgk.conformance.oracle.external_real import RealExternal
from wgk.conformance.oracle.external_runs import Kernel, Unusable
from wgk.conformance.oracle.races import RACES, RaceResult, _judge, _outcome_problem, request
from wgk.conformance.oracle.replay import TraceResult, replay
from wgk.conformance.oracle.lockstep import Divergence
from wgk.conformance.oracle.systems import ModelSystem, StepError, env_part


def _join(kernel: Kernel, source, first: ExternalSystem) -> ExternalSystem:
    """Another instance on ``first``'s storage (and its real world, when it runs on one)."""
    if isinstance(first, RealExternal):
        return RealExternal(kernel.command, source, timeout=kernel.timeout, join=first)
    return ExternalSystem(kernel.command, source, join=first, timeout=kernel.timeout)


class TwoInstances:
    """Two instances of the kernel on one storage, taking a trace's steps in turn (``real``:
    on one real world the harness makes, both watching the same owners and repository); the
    state read through a third instance when the kernel declares ``processes`` of 3 or more,
    else through the instance taking the next step."""

    name = "external"

    def __init__(self, kernel: Kernel, trace, real: bool = False):
        self.first = kernel.system(trace, where=f"trace {trace.id}", real=real)
        try:
            self.second = _join(kernel, trace, self.first)
        except BaseException:
            self.first.close()
            raise
        self.instances = [self.first, self.second]
        # a third instance reads the state when the kernel allows three, so that reading it
        # refreshes neither instance that takes the steps: the next one must find the other's
        # commit itself (a principal revoked through the other is refused)
        self.reader = None
        if kernel.capabilities.get("processes", 0) >= 3:
            try:
                self.reader = _join(kernel, trace, self.first)
            except BaseException:
                self.second.close()
                self.first.close()
                raise
        self.turn = 0
        self.steps = 0

    def apply(self, step: dict) -> dict | None:
        self.steps += 1
        wire = env_part(step) if "request" not in step else {}
        if wire.get("env") == "crash":                 # all lose everything volatile
            for ext in self.instances + ([self.reader] if self.reader is not None else []):
                ext.crash()
            return None
        ext = self.instances[self.turn % 2]
        self.turn += 1
        return ext.apply(step)

    def project(self) -> dict:
        ext = self.reader if self.reader is not None else self.instances[self.turn % 2]
        return ext.project()

    def check(self) -> list[str]:
        return []

    def close(self) -> None:
        try:
            if self.reader is not None:
                self.reader.close()
        finally:
            try:
                self.second.close()
            finally:
                self.first.close()                      # the storage's owner, last


def two_kernels_external(trace, kernel: Kernel, real: bool = False) -> TraceResult:
    """The trace through the model and two instances of the kernel in turn, in lockstep
    (``real``: on a real world, whose repository the harness reads against the model's
    final projection afterwards)."""
    model = ModelSystem(trace)
    try:
        two = TwoInstances(kernel, trace, real)
    except StepError as e:
        model.close()
        return TraceResult(trace.id, trace.path, ("model", "external"), (), (Divergence(
            trace.id, None, "external", "step-error", None, "set up the trace", str(e)),))
    except ProtocolError as e:
        model.close()
        raise Unusable(f"trace {trace.id}: second instance: {e}") from None
    try:
        result = replay(trace, [model, two])
        problem = two.first.repository_problem(model.project(), trace.graph.get(
            "target", "main-0")) if real and result.verdict == "pass" else None
        if problem:
            result = replace(result, divergences=result.divergences + (Divergence(
                trace.id, None, "external", "repository", None, "the model's projection",
                problem),))
        return result
    except ProtocolError as e:
        raise Unusable(f"trace {trace.id}: {e}") from None
    finally:
        two.close()
        model.close()


#: The request kinds and environment steps each race sends.
RACE_NEEDS = {"two-dispatchers": ({"dispatch"}, set()),
              "reset-racing-completion": ({"dispatch", "reset", "submit"}, {"edit"}),
              "two-terminal-reports": ({"dispatch", "fail"}, {"edit"})}


def race_missing(name: str, caps: dict) -> str | None:
    """Why race ``name`` cannot run on a kernel with these capabilities, or None."""
    from wgk.conformance.oracle.external_runs import ALL_ENV
    kinds, env = RACE_NEEDS[name]
    missing = sorted(kinds - set(caps["kinds"])) + sorted(env - set(caps.get("env", ALL_ENV)))
    return f"sends what is not declared: {', '.join(missing)}" if missing else None


def _raw(ext: ExternalSystem, wire: dict) -> dict:
    """Send a request as written (its token a real secret, its mint that secret's sha256; on
    a real world its owner a real child of the harness)."""
    if isinstance(ext, RealExternal):
        wire = ext.real_request(wire)
    try:
        return ext._call({"op": "apply", "request": wire}, "decision")["decision"]
    except StepError as e:
        return {"error": str(e)}


def _prepare(ext: ExternalSystem, name: str, rounds: int) -> None:
    if name == "two-dispatchers":
        return
    for r in range(rounds):
        task = f"t{r}"
        answer = _raw(ext, request("setup", task, 99))
        if answer.get("decision") != "applied":
            raise Unusable(f"race {name}: setting {task} up: {answer}")
        ext._call({"op": "env", "step": {"env": "edit", "task": task, "content": f"c-{task}"}},
                  "ok")


def race_external(kernel: Kernel, name: str, *, processes: int, rounds: int,
                  real: bool = False) -> RaceResult:
    """One race (``races.RACES``) between ``processes`` instances of the kernel on one storage
    (``real``: on one real world the harness makes, every owner a real child of the harness;
    afterwards the harness reads the repository: one worktree for each task the projection
    holds one for, and none a loser made)."""
    if name not in RACES:
        raise ValueError(f"unknown race {name!r}; known: {', '.join(RACES)}")
    graph = {"id": "g", "target": "main-0",
             "tasks": [{"name": f"t{r}", "deps": []} for r in range(rounds)]}
    result = RaceResult(name, processes, rounds)
    first = kernel.system(graph, where=f"race {name}", real=real)
    others: list[ExternalSystem] = []
    with racing(name, first, others):
        _prepare(first, name, rounds)
        others.extend(_join(kernel, graph, first) for _ in range(processes - 1))
        instances = [first] + others
        if real:                       # every owner started before the race, not in it
            for r in range(rounds):
                for i in range(processes):
                    first.real_request(request(name, f"t{r}", i))
        t0 = time.perf_counter()
        answers = _run(instances, name, rounds)
        result.seconds = time.perf_counter() - t0
        winners = _judge(result, answers)
        projection = first.project()
        _check_after(result, projection, answers, winners)
        if real and not result.problems:
            _check_repository(result, first, projection)
    return result


@contextmanager
def racing(name: str, first: ExternalSystem, others: list[ExternalSystem]):
    """The life of a race's instances: a protocol error in it makes the race unusable,
    and every instance (``others`` as it stands at the end) is closed, the first last."""
    try:
        yield
    except ProtocolError as e:
        raise Unusable(f"race {name}: {e}") from None
    finally:
        for ext in others:
            ext.close()
        first.close()


def _run(instances: list[ExternalSystem], name: str, rounds: int) -> dict:
    """Every instance sends its request of each round at once (a thread each, a barrier a
    round); (round, instance) -> the answer."""
    n = len(instances)
    barrier = threading.Barrier(n)
    answers: dict[tuple[int, int], dict] = {}
    broken: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait(timeout=120)
                answers[(r, i)] = _raw(instances[i], request(name, f"t{r}", i))
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:                 # reported below, never swallowed
            broken.append(e)
            barrier.abort()
    run_threads(n, worker, broken)
    return answers


def run_threads(n: int, worker, broken: list[BaseException]) -> None:
    """``worker(i)`` for each of ``n`` instances on a thread of its own, all waited for; the
    first exception a worker recorded in ``broken`` is raised."""
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if broken:
        raise broken[0]


def _check_after(result: RaceResult, projection: dict, answers: dict,
                 winners: dict[int, int]) -> None:
    """Every request journaled with the decision it was answered; each task the winner's."""
    journal = projection.get("journal") or {}
    for (r, i), answer in sorted(answers.items()):
        key = request(result.race, f"t{r}", i)["key"]
        if journal.get(key) != answer:
            result.problems.append(f"journal[{key}]: {journal.get(key)!r}, answered {answer!r}")
            break
    tasks = projection.get("tasks") or {}
    for r, i in winners.items():
        task = tasks.get(f"t{r}") or {}
        problem = _outcome_problem(result.race, task, i)
        if not problem and result.race == "two-dispatchers" and \
                not (task.get("worktree") or {}).get("present"):
            problem = "the winner's worktree is gone (a loser wrote the world back over it)"
        if problem:
            result.problems.append(f"t{r} (winner {i}): {problem}")


def _check_repository(result: RaceResult, first: RealExternal, projection: dict) -> None:
    """The real repository after a race: main untouched, exactly one worktree for each task
    whose worktree the projection holds (a loser's worktree would be one too many)."""
    problem = first.repository_problem(projection, "main-0")
    if problem is None:
        want = sum(bool((t.get("worktree") or {}).get("present"))
                   for t in (projection.get("tasks") or {}).values())
        listed = first.worktrees()
        if listed != want:
            problem = f"the repository lists {listed} worktrees, the projection holds {want}"
    if problem:
        result.problems.append(f"repository: {problem}")
