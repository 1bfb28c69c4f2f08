"""Two Land workers racing one target (WG's exit canary) on real git and real processes.

Trace 42 (``traces/incidents/42-two-lands-race-one-target.json``) brings two tasks to a
prepared land on the same base in lockstep with the model, on a fresh git repository with
real owner processes (``real_world.RealWorld``). Then two worker processes, each with its own
kernel connection to the one SQLite database, meet at a barrier and send their
``commit-effect`` at once: a real ``update-ref`` compare-and-swap each. Whichever wins:

- exactly one is ``applied``, the other ``rejected`` ``cas-moved``, and the model decides the
  two in the winner's order alike (projection compared);
- the loser is marked for repair in its own attempt, revises onto the winner's land, is
  validated and accepted again (its review evidence re-recorded for the new candidate) and
  lands later — the rest of the trace, with the two tasks' names swapped when the second
  one won, in lockstep with the model;
- afterwards: still one attempt each (no replacement attempt), the loser's candidate is
  version 2 and its validation receipt names it, and the real target's history holds both
  lands, the loser's on top of the winner's.
"""
from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from wgk.impl import Kernel

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.lockstep import Observed, Oracle, decision_matches
from wgk.conformance.oracle.systems import ModelSystem, split_principal
from wgk.conformance.traces.format import load_trace

TRACE = Path(__file__).resolve().parents[2] / "traces" / "incidents" / "42-two-lands-race-one-target.json"
NAME = "two-lands-race-one-target"


@dataclass
class LandRaceResult:
    rounds: int
    seconds: float = 0.0
    winners: dict[str, int] = field(default_factory=dict)      # task -> rounds it won
    answers: dict[str, int] = field(default_factory=dict)      # decision label -> count
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"race": NAME, "rounds": self.rounds, "ok": self.ok,
                "seconds": round(self.seconds, 3), "winners": self.winners,
                "answers": self.answers, "problems": self.problems[:10]}


_SWAP = re.compile(r'"(a|b)"|\b(c|tok|s)-(a|b)(?![a-z])|:(a|b):')


def swapped(step: dict) -> dict:
    """The step with tasks ``a`` and ``b`` exchanged (names, keys, tokens, contents)."""
    other = {"a": "b", "b": "a"}

    def one(m: re.Match) -> str:
        if m.group(1):
            return f'"{other[m.group(1)]}"'
        if m.group(2):
            return f"{m.group(2)}-{other[m.group(3)]}"
        return f":{other[m.group(4)]}:"
    return json.loads(_SWAP.sub(one, json.dumps(step)))


def _commit(path: str, world, request: dict, barrier, out, i: int) -> None:
    """One Land worker: its own kernel connection, the shared repository, then the land."""
    k = Kernel(path, world.environment())
    try:
        body, credential = split_principal(request)
        barrier.wait(timeout=120)
        try:
            answer = k.handle(body, credential)
        except Exception as e:                        # reported, never swallowed
            answer = {"error": f"{type(e).__name__}: {e}"}
        out.put((i, answer))
    finally:
        k.close()


def _race(impl: ImplSystem, requests: list[dict]) -> list[dict]:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(len(requests)), ctx.Queue()
    procs = [ctx.Process(target=_commit, args=(impl.path, impl.world, r, barrier, out, i))
             for i, r in enumerate(requests)]
    for p in procs:
        p.start()
    answers: dict[int, dict] = {}
    try:
        while len(answers) < len(requests):
            i, answer = out.get(timeout=180)
            answers[i] = answer
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [answers[i] for i in range(len(requests))]


def _label(d: dict) -> str:
    return d.get("decision", "error") + (f":{d['code']}" if d.get("code") else "")


def _lockstep(impl: ImplSystem, oracle: Oracle, steps: list[dict], problems: list[str]) -> bool:
    for step in steps:
        verdict = oracle.is_valid_step(step, Observed(impl.apply(step), impl.project()))
        if not verdict.valid:
            problems.extend(d.describe() for d in verdict.divergences)
            return False
    return True


def _is_ancestor(impl: ImplSystem, older: str, newer: str) -> bool:
    git = impl.world.repository
    return subprocess.run(["git", "-C", git.git.repo, "merge-base", "--is-ancestor",
                           git.oids[older], git.oids[newer]]).returncode == 0


def _round(result: LandRaceResult, trace) -> None:
    steps = trace.steps
    split = next(n for n, s in enumerate(steps) if s.get("request", {}).get("kind") == "commit-effect")
    impl = ImplSystem(trace, world="real")
    try:
        oracle = Oracle(ModelSystem(trace), trace=trace.id)
        if not _lockstep(impl, oracle, steps[:split], result.problems):
            return
        race = [steps[split], steps[split + 1]]       # a's land, then b's, as the trace has it
        answers = _race(impl, [s["request"] for s in race])
        for a in answers:
            result.answers[_label(a)] = result.answers.get(_label(a), 0) + 1
        applied = [i for i, a in enumerate(answers) if a.get("decision") == "applied"]
        if len(applied) != 1:
            result.problems.append(f"{len(applied)} winners: {[_label(a) for a in answers]}")
            return
        won = applied[0]
        lost = answers[1 - won]
        if _label(lost) != "rejected:cas-moved":
            result.problems.append(f"the loser was answered {_label(lost)}, not rejected:cas-moved")
            return
        winner = race[won]["request"]["task"]
        result.winners[winner] = result.winners.get(winner, 0) + 1
        turn = (lambda s: s) if won == 0 else swapped
        for n in (won, 1 - won):                      # the model decides them in that order
            decided = oracle.advance(race[n])
            if not decision_matches(decided, answers[n]):
                result.problems.append(f"the model answered {_label(decided or {})} for "
                                       f"{race[n]['request']['key']}, the race {_label(answers[n])}")
                return
        bad = oracle.compare(race[1 - won], decided, Observed(lost, impl.project()))
        if bad:
            result.problems.extend(d.describe() for d in bad)
            return
        if not _lockstep(impl, oracle, [turn(s) for s in steps[split + 2:]], result.problems):
            return
        loser = "b" if winner == "a" else "a"
        seen = impl.project()["tasks"]
        again = f"c-{loser}2"
        checks = [
            (all(seen[t]["attempt"] == 1 for t in ("a", "b")), "a replacement attempt opened"),
            (seen[loser]["version"] == 2, f"the loser's candidate is version {seen[loser]['version']}"),
            (seen[loser]["receipts"].get("validation", {}).get("candidate") == again,
             "the loser's validation was not re-recorded for its new candidate"),
            (impl.project()["target"] == again, "the loser did not land last"),
            (_is_ancestor(impl, f"c-{winner}1", again),
             "the real target's history lost the winner's land"),
        ]
        result.problems.extend(why for ok, why in checks if not ok)
    finally:
        impl.close()


def land_race(rounds: int = 1, trace_path: Path = TRACE) -> LandRaceResult:
    """Run the race ``rounds`` times, each on a fresh repository and database."""
    trace = load_trace(trace_path)
    result = LandRaceResult(rounds)
    t0 = time.perf_counter()
    for _ in range(rounds):
        _round(result, trace)
        if result.problems:
            break
    result.seconds = time.perf_counter() - t0
    return result
