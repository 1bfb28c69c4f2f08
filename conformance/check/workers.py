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
of a level travel once, not once per step. A task state travels as its field values
(``Wire``): plain numbers as they are, any other value (an enumeration's member, the
evidence, the receipts) once per connection and by its number after that; pickling the
record itself cost more than deciding on it. A task state a worker made and sent is not sent
back to it: the calling process tells it the explorer's id of it instead. The calling
process keeps the level's bookkeeping (interning, the parents, the queue), so it takes a
smaller share of the level's jobs than each worker (``HERE_SHARE``).
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Callable

from wgk.conformance.check import interning
from wgk.conformance.check.compiled import _make_task, task_values
from wgk.conformance.check.interning import successor
from wgk.model.actions import Instance, label, task_steps
from wgk.model.kernel import Rules
from wgk.model.state import State

#: below this many jobs a level is not worth sending anywhere
SMALLEST_SHARE = 16

#: the calling process's share of a level's jobs, against a worker's share of 1: it also
#: interns and queues what every process found, while the workers wait
HERE_SHARE = 0.5

#: the values a task state's field sends as themselves (anything else goes by its number)
_PLAIN = frozenset({int, bool, str, float, type(None)})


class Wire:
    """Task states from one process to another over one connection, as their field values
    (``task_values``) with every value that is not a plain number, string or None (an
    enumeration's member, the evidence, the receipts) replaced by its number on this
    connection: ``encode`` numbers a value the first time it is met and ``taken`` hands the
    values numbered since the last message; the other end ``receive``s them in that order and
    ``decode``s. A value is numbered by its type and value (an IntEnum's member equals its
    number, and the same number of another enumeration)."""

    def __init__(self, hold: Callable | None = None):
        self.numbers: dict = {}
        #: the number of every object met, by identity (each held in ``alive``)
        self.by_id: dict = {}
        self.alive: list = []
        self.fresh: list = []
        self.values: list = []
        #: ``hold(receipts)``: the receipts equal to these that the receiving interner holds
        #: (so that it finds them by identity), per number
        self.hold = hold
        self.held: dict = {}

    def number(self, x) -> int:
        n = self.by_id.get(id(x))
        if n is not None:
            return n
        key = (x.__class__, x)
        n = self.numbers.get(key)
        if n is None:
            n = self.numbers[key] = len(self.numbers)
            self.fresh.append(x)
        self.by_id[id(x)] = n
        self.alive.append(x)
        return n

    def encode(self, t) -> tuple:
        """``(values, (position, number)..., receipts' number)`` of the task state ``t``."""
        w = task_values(t)
        plain = _PLAIN
        others = [(k, self.number(x)) for k, x in enumerate(w) if x.__class__ not in plain]
        if others:
            w = list(w)
            for k, _ in others:
                w[k] = None
            w = tuple(w)
        return w, tuple(others), self.number(t.receipts)

    def taken(self) -> list:
        out, self.fresh = self.fresh, []
        return out

    def receive(self, fresh: list) -> None:
        self.values.extend(fresh)

    def decode(self, e: tuple, make=_make_task):
        """The task state ``encode`` wrote, made by ``make(values, receipts)``."""
        w, others, r = e
        values = self.values
        if others:
            w = list(w)
            for k, n in others:
                w[k] = values[n]
            w = tuple(w)
        receipts = self.held.get(r)
        if receipts is None:
            receipts = self.held[r] = values[r] if self.hold is None else self.hold(values[r])
        return make(w, receipts)


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


def _serve(conn, work: tuple, space) -> None:
    """A worker: take shares of jobs until told to stop; answer each by reference. ``space``
    is the explorer's interner as it was when the worker was forked: the task states the
    worker makes are interned in its own copy of it."""
    graph = space.graph
    tasks: dict[int, object] = {}
    journals: dict[int, object] = {}
    sent: dict[object, int] = {}
    sent_id: dict[int, int] = {}        # the same numbers by identity (each held in ``alive``)
    alive: list = []
    fresh: list = []
    #: the task states sent, by identity (held in ``mine``), and those sent since the last answer
    sent_tasks: dict[int, int] = {}
    mine: list = []
    fresh_tasks: list = []
    here, there = Wire(), Wire(held_receipts(space))   # task states to the calling process, from it

    def ref(obj) -> int:
        n = sent_id.get(id(obj))
        if n is not None:
            return n
        n = sent.get(obj)
        if n is None:
            n = sent[obj] = len(sent)
            fresh.append(obj)
        sent_id[id(obj)] = n
        alive.append(obj)
        return n

    def task_ref(t) -> int:
        n = sent_tasks.get(id(t))
        if n is None:
            n = sent_tasks[id(t)] = len(mine)
            mine.append(t)
            fresh_tasks.append(here.encode(t))
        return n

    while True:
        message = conn.recv()
        if message is None:
            return
        values, new_tasks, known, new_journals, jobs = message
        there.receive(values)
        for tid, e in new_tasks:
            tasks[tid] = there.decode(e, space.build)
        for tid, n in known:
            tasks[tid] = mine[n]
        journals.update(new_journals)
        try:
            out = []
            for what, tids, target, now, jid, i in jobs:
                s = State(graph=graph, tasks=tuple(tasks[t] for t in tids), target=target,
                          now=now, journal=journals[jid])
                a = answer(work, what, s, i)
                if what == "moves":
                    a = [(ref(lab), ref(obj), task_ref(task), target2, now2, ref(journal), bad)
                         for lab, obj, _r, _d, task, target2, now2, journal, bad in a]
                else:
                    a = ref(a)
                out.append(a)
            conn.send(("ok", (fresh, here.taken(), fresh_tasks), out))
        except Exception as e:      # noqa: BLE001  (handed to the calling process, raised there)
            conn.send(("error", e, None))
        fresh = []
        fresh_tasks = []


def held_receipts(space) -> Callable:
    """The receipts equal to ``r`` that the interner ``space`` holds (taken in if new)."""
    return lambda r: space.receipts_of[space.receipts_id(r)]


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
        #: per worker: its task states (decoded and held here, by its number), the explorer's
        #: ids of those it made, to tell it with the next message, and the two directions' wires
        self._made: list[list] = []
        self._known: list[list] = []
        self._wires: list[tuple] = []
        for _ in range(workers - 1):
            ours, theirs = fork.Pipe()
            p = fork.Process(target=_serve, args=(theirs, self.work, space), daemon=True)
            p.start()
            theirs.close()
            self._conns.append(ours)
            self._procs.append(p)
            self._tasks_sent.append(set())
            self._journals_sent.append(set())
            self._received.append([])
            self._made.append([])
            self._known.append([])
            self._wires.append((Wire(), Wire(held_receipts(space))))    # (to it, from it)
        self._pending: list = []

    def map(self, jobs: list) -> list:
        """The answer of every job ``(what, key, task index)``, in order; a step's request and
        decision are not kept (the explorer reads the step, its label and its new task)."""
        space = self.space
        n = space.n
        if not self._conns or len(jobs) < SMALLEST_SHARE:
            return [self._here(j) for j in jobs]
        shares = self.shares(jobs)
        for w, share in enumerate(shares[1:]):
            sent_t, sent_j = self._tasks_sent[w], self._journals_sent[w]
            out_wire = self._wires[w][0]
            new_tasks, new_journals, flat = [], [], []
            for what, key, i in share:
                for t in key[:n]:
                    if t not in sent_t:
                        sent_t.add(t)
                        new_tasks.append((t, out_wire.encode(space.task_of[t])))
                jid = key[n + 2]
                if jid not in sent_j:
                    sent_j.add(jid)
                    new_journals.append((jid, space.journal_of[jid]))
                flat.append((what, key[:n], key[n], key[n + 1], jid, i))
            known, self._known[w] = self._known[w], []
            self._conns[w].send((out_wire.taken(), new_tasks, known, new_journals, flat))
        out = [self._here(j) for j in shares[0]]
        for w, share in enumerate(shares[1:]):
            status, fresh, answers = self._conns[w].recv()
            if status == "error":
                raise fresh
            fresh, values, fresh_tasks = fresh
            got = self._received[w]
            got.extend(fresh)
            in_wire = self._wires[w][1]
            in_wire.receive(values)
            made = self._made[w]
            first = len(made)
            made.extend(in_wire.decode(e, space.build) for e in fresh_tasks)
            for (what, _key, _i), a in zip(share, answers):
                if what == "moves":
                    out.append([(got[lab], got[obj], None, None, made[task], target, now,
                                 got[journal], bad)
                                for lab, obj, task, target, now, journal, bad in a])
                else:
                    out.append(got[a])
            self._newly_made(w, first)
        return out

    def shares(self, jobs: list) -> list:
        """``jobs`` cut in contiguous shares, this process's first: ``HERE_SHARE`` of a
        worker's (at least one job each while there are enough)."""
        workers = self.workers - 1
        here = int(len(jobs) * HERE_SHARE / (HERE_SHARE + workers))
        size = -(-(len(jobs) - here) // workers)
        return [jobs[:here]] + [jobs[k:k + size] for k in range(here, len(jobs), size)]

    def _newly_made(self, w: int, first: int) -> None:
        """The task states worker ``w`` made from ``first`` on are the explorer's once settled:
        the ids they will have are found then (``told``)."""
        self._pending.append((w, first))

    def told(self) -> None:
        """After the explorer interned a level's answers: tell each worker the ids of the task
        states it made (it holds them, so they are not sent back to it)."""
        space = self.space
        for w, first in self._pending:
            made, sent_t, known = self._made[w], self._tasks_sent[w], self._known[w]
            for k in range(first, len(made)):
                tid = space.tid.get(id(made[k]))
                if tid is not None and tid not in sent_t:
                    sent_t.add(tid)
                    known.append((tid, k))
        self._pending = []

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
