"""Races over the rows a decision reads but does not change, on one database (real
processes, each with its own connection; SQLite or PostgreSQL).

- ``reopen-racing-admission``: in every round one worker reopens a Done dependency while
  the others each dispatch a task that depends on it, at once. Every answer is a decision
  (applied, or the hold dependency-not-done), and in the ledger's order no dispatch of a
  dependent is applied after the reopen of its dependency: an admission that read the
  dependency Done must commit before the reopen does (on PostgreSQL the dependency rows
  are locked, shared, for the admission's duration; SQLite's writer lock serialises).
- ``crossed-batches``: in every round each worker sends one batch dispatching the same
  two tasks, half of them in one order and half in the other, so that on PostgreSQL two
  transactions each hold one task's row and wait for the other's: a deadlock the server
  breaks by aborting one of them. Every answer is still a decision (the aborted
  transaction is run again with the same keys), each task has exactly one winner.

Afterwards the ledger verifies, the audit and the rebuild are clean.
"""
from __future__ import annotations

import json
import time

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.protocol.world_steps import apply_env

from wgk.conformance.oracle.races import (
    RaceResult, _owner, _slow_effects, _token, audit_and_rebuild, fresh_database, run_rounds,
)

DEPENDENCY_RACES = ("reopen-racing-admission", "crossed-batches")
_BEARERS = ("worker", "wrapper", "broker")
_EDGES = (("submit", "worker", "absent", {}), ("quiesce", "wrapper", "prepared", {}),
          ("save-work", "wrapper", "quiescing", {"candidate": True, "base": True}),
          ("seal-candidate", "daemon", "work-saved", {"candidate": True}),
          ("validate", "validator", "candidate-sealed", {"candidate": True, "verdict": "pass"}),
          ("accept", "daemon", "validated", {"candidate": True, "verdict": "not-required"}),
          ("record-disposition", "wrapper", "accepted", {"disposition": "report"}),
          ("prepare-effect", "promoter", "disposition-recorded", {}),
          ("commit-effect", "promoter", "effect-prepared", {"candidate": True, "base": True}),
          ("prepare-cleanup", "cleanup", "effect-committed", {}),
          ("commit-cleanup", "cleanup", "cleanup-prepared", {}),
          ("save-graph", "daemon", "cleanup-committed", {}))


def _dispatch(task: str, i: int) -> dict:
    import hashlib
    return {"kind": "dispatch", "actor": "daemon", "task": task, "key": f"dispatch:{task}:{i}",
            "expected-attempt": 0, "owner": _owner(i),
            "mint": hashlib.sha256(_token(task, i).encode()).hexdigest()}


def _complete(k: Kernel, world: MemoryWorld, task: str) -> None:
    """``task`` Done through its whole SaveTransaction (dispatcher 99's attempt)."""
    base = world.repository.target()
    work = f"work-{task}"
    steps = [_dispatch(task, 99)]
    for n, (kind, actor, phase, kw) in enumerate(_EDGES):
        body = {key: (work if key == "candidate" else base) if value is True else value
                for key, value in kw.items()}
        if actor in _BEARERS:
            body["token"] = _token(task, 99)
        steps.append({"kind": kind, "actor": actor, "task": task, "key": f"{kind}:{task}",
                      "cap": {"graph": "g", "task": task, "generation": 0, "attempt": 1,
                              "fence": 1, "lease-epoch": 1},
                      "expected-phase": phase, "expected-revision": n, **body})
    for n, step in enumerate(steps):
        if n == 1:
            apply_env(k, {"env": "edit", "task": task, "content": work})
        answer = k.handle(step)
        if answer.get("decision") != "applied":
            raise SetupRefused(f"setting up {task}: {step['kind']}: {answer}")


def _prepare(k: Kernel, world: MemoryWorld, name: str, processes: int, rounds: int) -> None:
    if name == "crossed-batches":
        k.create_graph("g", [TaskPolicy(f"{x}{r}") for r in range(rounds) for x in "ab"])
        return
    k.create_graph("g", [TaskPolicy(f"d{r}") for r in range(rounds)] +
                   [TaskPolicy(f"t{r}-{i}", deps=(f"d{r}",))
                    for r in range(rounds) for i in range(1, processes)])
    for r in range(rounds):
        _complete(k, world, f"d{r}")


def _send(k: Kernel, name: str, r: int, i: int):
    """Worker ``i``'s request (or batch) of round ``r``."""
    if name == "crossed-batches":
        pair = [_dispatch(f"a{r}", i), _dispatch(f"b{r}", i)]
        return k.handle_batch(pair if i % 2 == 0 else pair[::-1])
    if i == 0:
        return k.handle({"kind": "reopen", "actor": "operator", "task": f"d{r}",
                         "key": f"reopen:d{r}", "expected-generation": 0})
    return k.handle(_dispatch(f"t{r}-{i}", i))


def _worker(db: str, world: MemoryWorld, name: str, i: int, rounds: int, barrier, out) -> None:
    k = Kernel(db, world.environment(), hook=_slow_effects)
    try:
        for r in range(rounds):
            barrier.wait(timeout=120)
            try:
                answer = _send(k, name, r, i)
            except Exception as e:                    # reported, never swallowed
                answer = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            out.put((r, i, answer))
    finally:
        k.close()


class SetupRefused(Exception):
    """The kernel refused a step of the race's setup that the model applies: a failure of
    the implementation (the race's first problem), not an error of the harness."""


def dependency_race(dsn: str | None, name: str, *, processes: int = 4,
                    rounds: int = 10) -> RaceResult:
    """Run one of ``DEPENDENCY_RACES`` on SQLite (``dsn`` None) or the PostgreSQL at ``dsn``."""
    if name not in DEPENDENCY_RACES:
        raise ValueError(f"unknown race {name!r}; known: {', '.join(DEPENDENCY_RACES)}")
    processes = max(processes, 2)
    result = RaceResult(name, processes, rounds)
    with fresh_database(dsn) as db:
        world = MemoryWorld.create(target="main-0")
        k = Kernel(db, world.environment())
        try:
            _prepare(k, world, name, processes, rounds)
        except SetupRefused as e:
            result.problems.append(str(e))
            return result
        finally:
            head = k.ledger_head()
            k.close()
        t0 = time.perf_counter()
        answers = run_rounds(_worker, (db, world, name), processes, rounds)
        result.seconds = time.perf_counter() - t0
        _judge(result, answers)
        k = Kernel(db, world.environment())
        try:
            _check_ledger(result, k, head)
        finally:
            k.close()
    return result


def _label(a: dict) -> str:
    return a.get("decision", "error") + (f":{a['code']}" if a.get("code") else "")


def _judge(result: RaceResult, answers: dict) -> None:
    """Every answer a decision; crossed batches: one winner per task and round."""
    for (r, i), got in sorted(answers.items()):
        for a in (got if isinstance(got, list) else [got]):
            label = _label(a)
            result.codes[label] = result.codes.get(label, 0) + 1
            if "error" in a:
                result.problems.append(f"round {r}, worker {i}: {a['error']}")
            elif result.race == "reopen-racing-admission" and i == 0 and \
                    a.get("decision") != "applied":
                result.problems.append(f"round {r}: the reopen answered {label}")
            elif a.get("decision") not in ("applied", "rejected"):
                result.problems.append(f"round {r}, worker {i}: unexpected answer {label}")
            elif a.get("decision") == "rejected" and result.race == "reopen-racing-admission" \
                    and a.get("code") != "dependency-not-done":
                result.problems.append(f"round {r}, worker {i}: dispatch refused {label}")
    if result.race == "crossed-batches":
        for r in range(result.rounds):
            for pos, task in enumerate("ab"):
                won = [i for i in range(result.processes)
                       if isinstance(answers.get((r, i)), list)
                       and answers[(r, i)][pos if i % 2 == 0 else 1 - pos].get("decision")
                       == "applied"]
                if len(won) != 1:
                    result.problems.append(f"round {r}: {task}{r} has {len(won)} winners")


def _check_ledger(result: RaceResult, k: Kernel, head: int) -> None:
    verdict = k.verify_ledger()
    if not verdict.ok:
        result.problems.append(f"ledger: {verdict.problem}")
    audit_and_rebuild(result, k)
    if result.race != "reopen-racing-admission":
        return
    reopened: dict[str, int] = {}               # dependency -> the seq of its reopen
    for seq, key, body in k.conn.execute(
            "SELECT seq, key, body FROM ledger WHERE seq > ? AND event = 'request' ORDER BY seq",
            (head,)).fetchall():
        response = json.loads(body).get("response", {})
        if response.get("decision") != "applied":
            continue
        kind, _, task = key.partition(":")
        if kind == "reopen":
            reopened[task] = seq
        elif kind == "dispatch":
            dep = "d" + task.split(":")[0][1:].split("-")[0]
            if dep in reopened:
                result.problems.append(
                    f"{task.split(':')[0]} admitted at ledger seq {seq}, after its dependency "
                    f"{dep} was reopened at seq {reopened[dep]} (dependency-needs-done)")
    if result.rounds and len(reopened) != result.rounds:
        result.problems.append(f"{len(reopened)} reopens applied in {result.rounds} rounds")


__all__ = ["DEPENDENCY_RACES", "dependency_race"]
