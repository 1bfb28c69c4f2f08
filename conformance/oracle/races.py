"""The race incidents as real multi-process races on one database (SQLite or PostgreSQL).

Each race prepares one task per round in a fresh database (a SQLite file in a
temporary directory, or a fresh PostgreSQL schema; dispatched, its
worktree edited, as the race needs), then forks ``processes`` worker
processes, each with its own connection and its own copy of the world. In
every round the workers meet at a barrier and send their competing requests
for that round's task at once (different keys, different senders); the
round must have exactly one ``applied`` winner and every other answer must be
a loser's (``rejected``, or ``evidence-only`` for a repeated terminal report).
Afterwards the ledger must verify with one event per decision, the audit and
the rebuild must be clean, and each task must hold the winner's outcome.

- ``two-dispatchers``: every worker dispatches the open task (incident 16);
- ``reset-racing-completion``: half submit, half reset (incident 17; the reset, over a live
  owner, persists its intent and fences the old K);
- ``two-terminal-reports``: every worker reports the attempt failed (first terminal wins).
"""
from __future__ import annotations

import hashlib

import contextlib
import multiprocessing
import os
import random
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.storage import pg

from wgk.impl.protocol.world_steps import apply_env

RACES = ("two-dispatchers", "reset-racing-completion", "two-terminal-reports")
LOSERS = {"two-dispatchers": ("rejected",), "reset-racing-completion": ("rejected",),
          "two-terminal-reports": ("evidence-only",)}


@dataclass
class RaceResult:
    race: str
    processes: int
    rounds: int
    seconds: float = 0.0
    codes: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"race": self.race, "processes": self.processes, "rounds": self.rounds,
                "ok": self.ok, "seconds": round(self.seconds, 3), "answers": self.codes,
                "problems": self.problems[:10]}


def _cap(task: str) -> dict:
    return {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1,
            "lease-epoch": 1}


def _owner(i: int) -> dict:
    return {"pid": 5000 + i, "birth": 100 + i, "session": f"s{i}", "wrapper-epoch": 1,
            "child-epoch": 1}


def _token(task: str, i: int) -> str:
    """The capability token dispatcher ``i`` mints for ``task`` (the setup's is 99's)."""
    return f"race-token-{task}-{i}"


def request(name: str, task: str, i: int) -> dict:
    """Worker ``i``'s competing request on ``task``; the workers hold the token of the
    attempt the setup opened (dispatcher 99's)."""
    if name == "two-dispatchers" or name == "setup":
        return {"kind": "dispatch", "actor": "daemon", "task": task,
                "key": f"dispatch:{task}:{i}", "expected-attempt": 0, "owner": _owner(i),
                "mint": hashlib.sha256(_token(task, i).encode()).hexdigest()}
    if name == "reset-racing-completion" and i % 2 == 1:
        return {"kind": "reset", "actor": "operator", "task": task, "key": f"reset:{task}:{i}",
                "expected-generation": 0}
    if name == "reset-racing-completion":
        return {"kind": "submit", "actor": "worker", "task": task, "key": f"submit:{task}:{i}",
                "cap": _cap(task), "token": _token(task, 99), "expected-phase": "absent",
                "expected-revision": 0}
    return {"kind": "fail", "actor": "worker" if i % 2 else "wrapper", "task": task,
            "key": f"fail:{task}:{i}", "cap": _cap(task), "token": _token(task, 99),
            "evidence": f"exit-{i}"}


def _prepare(k: Kernel, name: str, rounds: int) -> None:
    k.create_graph("g", [TaskPolicy(f"t{r}") for r in range(rounds)])
    if name == "two-dispatchers":
        return
    for r in range(rounds):
        task = f"t{r}"
        answer = k.handle(request("setup", task, 99))
        if answer.get("decision") != "applied":
            raise RuntimeError(f"setting up {task}: {answer}")
        apply_env(k, {"env": "edit", "task": task, "content": f"c-{task}"})


def _slow_effects(boundary) -> None:
    """Effects take time (git does): widen the window between a decision and its commit."""
    if boundary.when == "before" and boundary.kind != "commit":
        time.sleep(random.uniform(0.001, 0.004))


def _worker(db: str, world: MemoryWorld, name: str, i: int, rounds: int, barrier, out,
            row_locks: bool) -> None:
    k = Kernel(db, world.environment(), hook=_slow_effects)
    if not row_locks:
        k.store.row_locks = False        # no lock ahead of or in a request: the writes' conditions
    try:
        for r in range(rounds):
            barrier.wait(timeout=120)
            try:
                answer = k.handle(request(name, f"t{r}", i))
            except Exception as e:                    # reported, never swallowed
                answer = {"error": f"{type(e).__name__}: {e}"}
            out.put((r, i, answer))
    finally:
        k.close()


@contextlib.contextmanager
def fresh_database(dsn: str | None):
    """A fresh database for one race: a SQLite file (``dsn`` None) or a PostgreSQL schema."""
    if dsn is None:
        with tempfile.TemporaryDirectory(prefix="wgk-race-") as tmp:
            yield os.path.join(tmp, "kernel.db")
        return
    schema = f"wgk_race_{uuid.uuid4().hex[:12]}"
    pg.create_schema(dsn, schema)
    try:
        yield pg.with_schema(dsn, schema)
    finally:
        pg.drop_schema(dsn, schema)


def race(dsn: str | None, name: str, *, processes: int = 8, rounds: int = 100,
         row_locks: bool = True) -> RaceResult:
    """Run one race (``RACES``) on SQLite (``dsn`` None: a fresh file) or on the PostgreSQL
    at ``dsn`` (in a schema dropped afterwards); ``row_locks=False`` (PostgreSQL): the
    workers take no row lock, and only the conditions of their writes keep one winner."""
    if name not in RACES:
        raise ValueError(f"unknown race {name!r}; known: {', '.join(RACES)}")
    if dsn is None and not row_locks:
        raise ValueError("SQLite has no row locks to take away (its writer lock serialises)")
    result = RaceResult(name, processes, rounds)
    with fresh_database(dsn) as db:
        world = MemoryWorld.create(target="main-0")
        k = Kernel(db, world.environment())
        _prepare(k, name, rounds)
        head = k.ledger_head()
        k.close()
        t0 = time.perf_counter()
        answers = run_rounds(_worker, (db, world, name), processes, rounds, (row_locks,))
        result.seconds = time.perf_counter() - t0
        winners = _judge(result, answers)
        k = Kernel(db, world.environment())
        try:
            _check_after(result, k, head, winners)
        finally:
            k.close()
    return result


def run_rounds(worker, head: tuple, processes: int, rounds: int, tail: tuple = ()) -> dict:
    """Fork ``processes`` workers, each called ``worker(*head, i, rounds, barrier, out, *tail)``
    and putting ``(round, i, answer)`` on ``out``; every answer by (round, worker)."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(*head, i, rounds, barrier, out, *tail))
             for i in range(processes)]
    for p in procs:
        p.start()
    answers: dict[tuple[int, int], dict] = {}
    try:
        while len(answers) < processes * rounds:
            r, i, answer = out.get(timeout=180)
            answers[(r, i)] = answer
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return answers


def _judge(result: RaceResult, answers: dict) -> dict[int, int]:
    """Exactly one applied answer a round; the round -> its winner."""
    winners: dict[int, int] = {}
    for r in range(result.rounds):
        got = [answers[(r, i)] for i in range(result.processes)]
        for a in got:
            label = a.get("decision", "error") + (f":{a['code']}" if a.get("code") else "")
            result.codes[label] = result.codes.get(label, 0) + 1
        won = [i for i, a in enumerate(got) if a.get("decision") == "applied"]
        lost = [a for a in got if a.get("decision") != "applied"]
        bad = [a for a in lost if a.get("decision") not in LOSERS[result.race]]
        if len(won) != 1:
            result.problems.append(f"round {r}: {len(won)} winners")
        if bad:
            result.problems.append(f"round {r}: unexpected answer {bad[0]}")
        if len(won) == 1:
            winners[r] = won[0]
    return winners


def audit_and_rebuild(result: RaceResult, k: Kernel) -> None:
    """After a race: the audit finds nothing and the tables rebuild from the ledger."""
    audit = k.audit()
    if not audit.ok:
        result.problems.append(f"audit: {audit.findings[0].to_json()}")
    rebuilt = k.rebuild()
    if not rebuilt.ok:
        result.problems.append(f"rebuild: {rebuilt.differences[:1]}")


def _check_after(result: RaceResult, k: Kernel, head: int, winners: dict[int, int]) -> None:
    verdict = k.verify_ledger()
    decided = result.processes * result.rounds
    if not verdict.ok:
        result.problems.append(f"ledger: {verdict.problem}")
    else:
        events = k.conn.execute("SELECT count(*) FROM ledger WHERE seq > ? AND event = 'request'",
                                (head,)).fetchone()[0]
        if events != decided:               # (a number a rolled-back try took is 'skipped')
            result.problems.append(f"ledger: {events} events for {decided} decisions")
    audit_and_rebuild(result, k)
    tasks = k.project_tasks([f"t{r}" for r in winners])
    for r, i in winners.items():
        problem = _outcome_problem(result.race, tasks[f"t{r}"], i)
        if problem:
            result.problems.append(f"t{r} (winner {i}): {problem}")


def _outcome_problem(name: str, t: dict, i: int) -> str | None:
    if name == "two-dispatchers":
        ok = t["attempt"] == 1 and t["fence"] == 1 and (t["owner"] or {}).get("pid") == 5000 + i
        return None if ok else f"attempt {t['attempt']}, owner {t['owner']}"
    if name == "reset-racing-completion":
        if i % 2 == 0:                               # the submit won: the attempt completes
            ok = t["generation"] == 0 and t["phase"] == "prepared" and t["status"] == "completing"
        else:                  # the reset won: over a live owner only its intent (the old K fenced)
            ok = t["generation"] == 0 and t["reopening"] and t["phase"] == "absent"
        return None if ok else f"generation {t['generation']}, phase {t['phase']}, {t['status']}"
    ok = t["attempt-state"] == "failed" and len(t["evidence"]) >= 1
    return None if ok else f"attempt-state {t['attempt-state']}"
