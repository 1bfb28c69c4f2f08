"""``reopen-racing-effect``: a reopen racing its dependents' effects between instances of an
external kernel on one storage, judged from the answers alone (the protocol shows no order
of commits; the in-process ``reopen-racing-admission`` reads the ledger's order instead).

One instance sets up a graph whose every round has a dependency ``d<r>``, Done through its
whole SaveTransaction, and per other instance two dependents: ``e<r>-<i>``, taken up to its
recorded disposition (the next edge is its effect's preparation), and ``u<r>-<i>``, not
dispatched. In each round instance 0 reopens ``d<r>`` while every other instance sends the
``prepare-effect`` of its ``e<r>-<i>`` at the same moment (each a few milliseconds later,
another mix each round, so that the two overlap whatever each costs); once the reopen is answered, each
of them dispatches its ``u<r>-<i>``. The harness notes when each request was sent and
answered.

The model's judgement, from the answers (whatever the order the kernel decided them in):

- the reopen and a dependent's effect exclude each other: a reopen is refused
  (``terminal-already``) once a dependent's effect is prepared, and an effect is refused once
  its dependency is reopened (``reopen-fences-dependents``). A round where the reopen and a
  ``prepare-effect`` are both ``applied`` has no order the model allows: the kernel decided
  each on what it read of the other's row before the other committed (a row it did not
  lock);
- a reopen refused when no effect of the round was applied has no reason;
- a dispatch sent after the reopen was answered ``applied`` is never applied
  (``dependency-needs-done``);

and afterwards every applied request is journaled with the decision it was answered.
"""
from __future__ import annotations

import hashlib
import threading
import time

from wgk.conformance.oracle.dependency_races import _EDGES, _BEARERS
from wgk.conformance.oracle.external import ExternalSystem, ProtocolError
from wgk.conformance.oracle.external_runs import Kernel, Unusable
from wgk.conformance.oracle.external_several import racing, run_threads
from wgk.conformance.oracle.races import RaceResult, _owner, _token

NAME = "reopen-racing-effect"
#: The edge a dependent races the reopen with: its effect's preparation.
EFFECT = next(n for n, e in enumerate(_EDGES) if e[0] == "prepare-effect")
#: The request kinds and environment steps the race sends.
NEEDS = ({"dispatch", "reopen"} | {kind for kind, *_ in _EDGES}, {"edit"})


def missing(caps: dict) -> str | None:
    """Why the race cannot run on a kernel with these capabilities, or None."""
    from wgk.conformance.oracle.external_runs import ALL_ENV
    kinds, env = NEEDS
    gone = sorted(kinds - set(caps["kinds"])) + sorted(env - set(caps.get("env", ALL_ENV)))
    return f"sends what is not declared: {', '.join(gone)}" if gone else None


def dispatch(task: str, i: int) -> dict:
    return {"kind": "dispatch", "actor": "daemon", "task": task, "key": f"dispatch:{task}:{i}",
            "expected-attempt": 0, "owner": _owner(i),
            "mint": hashlib.sha256(_token(task, i).encode()).hexdigest()}


def reopen(task: str) -> dict:
    return {"kind": "reopen", "actor": "operator", "task": task, "key": f"reopen:{task}",
            "expected-generation": 0}


def edge(task: str, n: int) -> dict:
    """The ``n``-th edge of ``task``'s SaveTransaction, on dispatcher 99's attempt."""
    kind, actor, phase, kw = _EDGES[n]
    body = {key: (f"work-{task}" if key == "candidate" else "main-0") if value is True
            else value for key, value in kw.items()}
    if actor in _BEARERS:
        body["token"] = _token(task, 99)
    return {"kind": kind, "actor": actor, "task": task, "key": f"{kind}:{task}",
            "cap": {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1,
                    "lease-epoch": 1},
            "expected-phase": phase, "expected-revision": n, **body}


def graph(processes: int, rounds: int) -> dict:
    tasks = [{"name": f"d{r}", "deps": []} for r in range(rounds)]
    tasks += [{"name": f"{x}{r}-{i}", "deps": [f"d{r}"]}
              for r in range(rounds) for i in range(1, processes) for x in "eu"]
    return {"id": "g", "target": "main-0", "tasks": tasks}


class SetupRefused(Exception):
    """The kernel refused a step of the setup the model applies: the race's first problem."""


def _send(ext: ExternalSystem, wire: dict) -> dict:
    try:
        return ext._call({"op": "apply", "request": wire}, "decision")["decision"]
    except ProtocolError:
        raise
    except Exception as e:                      # a step error: an answer that is no decision
        return {"error": str(e)}


def _advance(ext: ExternalSystem, task: str, edges: int) -> None:
    """``task`` dispatched (dispatcher 99) and taken through its first ``edges`` edges."""
    for n, step in enumerate([dispatch(task, 99)] + [edge(task, e) for e in range(edges)]):
        if n == 1:
            ext._call({"op": "env", "step": {"env": "edit", "task": task,
                                             "content": f"work-{task}"}}, "ok")
        answer = _send(ext, step)
        if answer.get("decision") != "applied":
            raise SetupRefused(f"setting up {task}: {step['kind']}: {answer}")


def reopen_race_external(kernel: Kernel, *, processes: int, rounds: int) -> RaceResult:
    """The race between ``processes`` instances (2 at least) of the kernel on one storage."""
    processes = max(processes, 2)
    result = RaceResult(NAME, processes, rounds)
    first = kernel.system(graph(processes, rounds), where=f"race {NAME}")
    others: list[ExternalSystem] = []
    with racing(NAME, first, others):
        try:
            for r in range(rounds):
                _advance(first, f"d{r}", len(_EDGES))
                for i in range(1, processes):
                    _advance(first, f"e{r}-{i}", EFFECT)
        except SetupRefused as e:
            result.problems.append(str(e))
            return result
        others.extend(ExternalSystem(kernel.command, graph(processes, rounds), join=first,
                                     timeout=kernel.timeout) for _ in range(processes - 1))
        t0 = time.perf_counter()
        answers = _run([first] + others, rounds)
        result.seconds = time.perf_counter() - t0
        judge(result, answers)
        _check_journal(result, first.project(), answers)
    return result


def _timed(ext: ExternalSystem, wire: dict) -> dict:
    sent = time.monotonic()
    answer = _send(ext, wire)
    return {"request": wire, "answer": answer, "sent": sent, "answered": time.monotonic()}


def stagger(r: int, i: int) -> float:
    """How long instance ``i`` waits in round ``r`` before it sends (0 to 8 ms, another mix
    every round): whichever request a kernel decides faster, some round overlaps them."""
    return ((r * (i + 1) * 7 + i) % 9) / 1000


def _run(instances: list[ExternalSystem], rounds: int) -> dict:
    """(round, instance, what) -> the request, its answer, when it was sent and answered."""
    n = len(instances)
    barrier = threading.Barrier(n)
    answered = [threading.Event() for _ in range(rounds)]
    answers: dict[tuple[int, int, str], dict] = {}
    broken: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait(timeout=120)
                time.sleep(stagger(r, i))
                if i == 0:
                    answers[(r, 0, "reopen")] = _timed(instances[0], reopen(f"d{r}"))
                    answered[r].set()
                    continue
                answers[(r, i, "effect")] = _timed(instances[i], edge(f"e{r}-{i}", EFFECT))
                if not answered[r].wait(timeout=120):
                    raise TimeoutError(f"round {r}: the reopen was not answered")
                answers[(r, i, "dispatch")] = _timed(instances[i], dispatch(f"u{r}-{i}", i))
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:              # reported below, never swallowed
            broken.append(e)
            barrier.abort()
            for event in answered:
                event.set()
    run_threads(n, worker, broken)
    return answers


def _label(a: dict) -> str:
    return a.get("decision", "error") + (f":{a['code']}" if a.get("code") else "")


def judge(result: RaceResult, answers: dict) -> None:
    """The model's judgement of the answers (see the module's doc)."""
    for (r, i, what), got in sorted(answers.items()):
        label = _label(got["answer"])
        result.codes[label] = result.codes.get(label, 0) + 1
        if "error" in got["answer"]:
            result.problems.append(f"round {r}, instance {i}: {got['request']['task']}: "
                                   f"{got['answer']['error']}")
    for r in range(result.rounds):
        got = answers.get((r, 0, "reopen"))
        if got is None:
            continue
        reopened = got["answer"].get("decision") == "applied"
        effects = [(i, answers[(r, i, "effect")]) for i in range(1, result.processes)
                   if (r, i, "effect") in answers]
        won = [i for i, e in effects if e["answer"].get("decision") == "applied"]
        if reopened and won:
            result.problems.append(
                f"round {r}: the reopen of d{r} and the prepare-effect of e{r}-{won[0]} "
                f"(instance {won[0]}) were both answered applied: the model refuses whichever "
                f"comes second (reopen-fences-dependents)")
        elif not reopened and not won:
            result.problems.append(f"round {r}: the reopen of d{r} answered {_label(got['answer'])} "
                                   f"with no effect of a dependent prepared")
        for i in range(1, result.processes):
            late = answers.get((r, i, "dispatch"))
            if reopened and late and late["answer"].get("decision") == "applied" and \
                    late["sent"] > got["answered"]:
                result.problems.append(
                    f"round {r}: u{r}-{i} admitted, sent after the reopen of its dependency "
                    f"d{r} was answered applied (dependency-needs-done)")


def _check_journal(result: RaceResult, projection: dict, answers: dict) -> None:
    """Every applied request journaled with the decision it was answered (a refusal may be a
    hold, which is not journaled)."""
    journal = projection.get("journal") or {}
    for got in answers.values():
        key = got["request"]["key"]
        if got["answer"].get("decision") == "applied" and journal.get(key) != got["answer"]:
            result.problems.append(f"journal[{key}]: {journal.get(key)!r}, answered "
                                   f"{got['answer']!r}")
            return


__all__ = ["EFFECT", "NAME", "NEEDS", "dispatch", "edge", "graph", "judge", "missing",
           "reopen", "reopen_race_external", "stagger"]
