"""Worker processes for the explorer: the model's work of a breadth-first level, shared out.

The explorer's own bookkeeping (interning, the parents, the queue) stays in one
process; what costs is the model's: the steps of a local context met for the first
time and the verdicts of the invariants on it. ``Pool.map`` shares a level's worth
of those among the workers and the calling process (each takes one contiguous
share) and answers in the order asked.

The workers are forked when the pool is made, so they hold the instance, the rules
(a mutant's too) and the properties without their being sent. What travels is kept
small, because pickling the model's records costs as much as deciding on them: a
task state or journal goes to a worker once, under the explorer's own id; a worker
sends each object it answers with (a new task state, a request, a label, a
verdict) once, and after that its position in what it has sent, which the calling
process keeps per worker. Between them the few distinct requests and task states
of a level travel once, not once per step.
"""
from __future__ import annotations

import multiprocessing
import os

from wgk.conformance.check import interning
from wgk.conformance.check.interning import successor
from wgk.model.actions import Instance, label, task_steps
from wgk.model.kernel import Rules
from wgk.model.state import State

#: below this many jobs a level is not worth sending anywhere
SMALLEST_SHARE = 16


def every_core() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:      # not on Linux
        return max(1, os.cpu_count() or 1)


def task_moves(inst: Instance, rules: Rules, step_props: list, s: State, i: int,
               compiled=None) -> list:
    """The steps of task ``i`` from ``s`` that change something or break a step invariant,
    each as ``(label, step, request, decision, new task, target, now, journal, violated
    step props)``: nothing interned, so a worker process can compute them."""
    if compiled is not None and not inst.keys and interning.decide is interning.KERNEL_DECIDE:
        return compiled.task_moves(inst, step_props, s, i, task_steps, label)
    out = []
    for step in task_steps(inst, s, i):
        d, s2, r = successor(inst, s, step, rules, compiled=compiled)
        if s2 is None:
            continue
        for j in range(len(s.tasks)):
            if j != i and s2.tasks[j] is not s.tasks[j]:
                raise AssertionError(f"{label(step)} changed task {s.graph.tasks[j]}: "
                                     "rules must be local to their task")
        bad = ()
        if d is not None and (s2 is not s or inst.keys):
            bad = tuple(p.id for p in step_props if p.pred(s, r, d, s2) is not True) \
                if compiled is None else compiled.step_verdict(s, r, d, s2)
        if s2 is s and not bad:
            continue
        lab = label(step) if d is None else f"{label(step)} -> {d.label}"
        out.append((lab, step if r is None else r, r, d, s2.tasks[i], s2.target, s2.now,
                    s2.journal, bad))
    return out


def task_verdict(state_props: list, goals: list, s: State, i: int, compiled=None) -> tuple:
    """(the state invariants task ``i`` of ``s`` breaks, the sometimes-properties it reaches)."""
    if compiled is not None:
        return compiled.verdict(s, i)
    t = s.tasks[i]
    return (tuple(p.id for p in state_props if p.pred(s, i, t) is not True),
            tuple(p.id for p in goals if p.pred(s, i, t) is True))


def answer(work: tuple, what: str, s: State, i: int):
    """One job: the steps of task ``i`` from ``s``, or its verdict."""
    inst, rules, step_props, state_props, goals, compiled = work
    if what == "moves":
        return task_moves(inst, rules, step_props, s, i, compiled)
    return task_verdict(state_props, goals, s, i, compiled)


def _serve(conn, work: tuple, graph) -> None:
    """A worker: take shares of jobs until told to stop; answer each by reference."""
    tasks: dict[int, object] = {}
    journals: dict[int, object] = {}
    sent: dict[object, int] = {}
    fresh: list = []

    def ref(obj) -> int:
        n = sent.get(obj)
        if n is None:
            n = sent[obj] = len(sent)
            fresh.append(obj)
        return n

    while True:
        message = conn.recv()
        if message is None:
            return
        new_tasks, new_journals, jobs = message
        tasks.update(new_tasks)
        journals.update(new_journals)
        try:
            out = []
            for what, tids, target, now, jid, i in jobs:
                s = State(graph=graph, tasks=tuple(tasks[t] for t in tids), target=target,
                          now=now, journal=journals[jid])
                a = answer(work, what, s, i)
                if what == "moves":
                    a = [(ref(lab), ref(obj), ref(task), target2, now2, ref(journal), bad)
                         for lab, obj, _r, _d, task, target2, now2, journal, bad in a]
                else:
                    a = ref(a)
                out.append(a)
            conn.send(("ok", fresh, out))
        except Exception as e:      # noqa: BLE001  (handed to the calling process, raised there)
            conn.send(("error", e, None))
        fresh = []


class Pool:
    """``workers`` processes in all: this one and ``workers - 1`` forked ones.

    ``space`` is the explorer's interner: a job names its state by the interned ids."""

    def __init__(self, workers: int, inst, rules, step_props: list, state_props: list,
                 goals: list, space, compiled=None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.space = space
        self.work = (inst, rules, step_props, state_props, goals, compiled)
        fork = multiprocessing.get_context("fork")
        self._conns, self._procs = [], []
        self._tasks_sent: list[set] = []
        self._journals_sent: list[set] = []
        self._received: list[list] = []
        for _ in range(workers - 1):
            ours, theirs = fork.Pipe()
            p = fork.Process(target=_serve, args=(theirs, self.work, space.graph), daemon=True)
            p.start()
            theirs.close()
            self._conns.append(ours)
            self._procs.append(p)
            self._tasks_sent.append(set())
            self._journals_sent.append(set())
            self._received.append([])

    def map(self, jobs: list) -> list:
        """The answer of every job ``(what, key, task index)``, in order; a step's request and
        decision are not kept (the explorer reads the step, its label and its new task)."""
        space = self.space
        n = space.n
        if not self._conns or len(jobs) < SMALLEST_SHARE:
            return [self._here(j) for j in jobs]
        size = -(-len(jobs) // self.workers)
        shares = [jobs[k:k + size] for k in range(0, len(jobs), size)]
        for w, share in enumerate(shares[1:]):
            sent_t, sent_j = self._tasks_sent[w], self._journals_sent[w]
            new_tasks, new_journals, flat = [], [], []
            for what, key, i in share:
                for t in key[:n]:
                    if t not in sent_t:
                        sent_t.add(t)
                        new_tasks.append((t, space.task_of[t]))
                jid = key[n + 2]
                if jid not in sent_j:
                    sent_j.add(jid)
                    new_journals.append((jid, space.journal_of[jid]))
                flat.append((what, key[:n], key[n], key[n + 1], jid, i))
            self._conns[w].send((new_tasks, new_journals, flat))
        out = [self._here(j) for j in shares[0]]
        for w, share in enumerate(shares[1:]):
            status, fresh, answers = self._conns[w].recv()
            if status == "error":
                raise fresh
            got = self._received[w]
            got.extend(fresh)
            for (what, _key, _i), a in zip(share, answers):
                if what == "moves":
                    out.append([(got[lab], got[obj], None, None, got[task], target, now,
                                 got[journal], bad)
                                for lab, obj, task, target, now, journal, bad in a])
                else:
                    out.append(got[a])
        return out

    def _here(self, job: tuple):
        what, key, i = job
        return answer(self.work, what, self.space.state(key), i)

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self._conns, self._procs = [], []
