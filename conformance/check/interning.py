"""Interned task states and journals, shared by the explorer and the simulator.

A global state is the small tuple ``key = (task ids..., target, now, journal
id)``. A rule for task ``i`` reads only task ``i``, its dependencies'
Done/abandoned flags and generations, whether a dependent is committed (the
reopen), the target, the clock and the journal, so a task's *local context*
(``Interner.context``) determines its successors.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

from wgk.conformance.check.compiled import _make_task, task_values
from wgk.model.actions import Instance, Step, global_steps, label
from wgk.model.env import EnvStep, guard_and_update
from wgk.model.kernel import Decision, Rules, decide
from wgk.model.requests import Request
from wgk.model.predicates import committed
from wgk.model.rules import graph_saved
from wgk.model.state import State


def successor(inst: Instance, s: State, step: Step, rules: Rules, keyed: int = 0,
              compiled=None) -> tuple[Decision | None, State | None, Request | None]:
    """Apply one step. Env steps that are not enabled give ``(None, None, None)``. With
    ``compiled`` (``wgk.conformance.check.compiled.Compiled``) a request is decided by the
    compiled model, else by the interpreter."""
    if isinstance(step, EnvStep):
        ok, update = guard_and_update(s, step)
        return (None, update(), None) if ok is True else (None, None, None)
    r = step
    if inst.keys:
        r = replace(r, key=label(replace(r, principal=None)))   # the intruder reuses keys
    if compiled is None or decide is not KERNEL_DECIDE:     # (a mutant's reducer is interpreted)
        d, s2 = decide(s, r, rules)
    else:
        d, s2 = compiled.decide(s, r)
    return d, s2, r


#: the kernel's reducer (a mutant replacing ``decide`` here is explored by the interpreter)
KERNEL_DECIDE = decide


class Interner:
    """Interned task states and journals: a global state is the small tuple
    ``key = (task ids..., target, now, journal id)`` (shared by the explorer and
    the simulator)."""

    def __init__(self, inst: Instance, rules: Rules, compiled=None):
        s0 = inst.initial()
        self.compiled = compiled
        self.inst = inst
        self.rules = rules
        self.global_cache: dict = {}
        self._dependents: list | None = None
        self.graph = s0.graph
        self.n = len(s0.tasks)
        self.task_of: list = []
        #: per interned task state (by identity: each is held in ``task_of``), its id
        self.tid: dict = {}
        #: per task state's values (``values``), the one task state of those values held
        self.canon: dict = {}
        #: the receipts tuples met, each once: by value, and by identity for the one held
        self.receipts_of: list = []
        self.rid: dict = {}
        self.rid_by_value: dict = {}
        # per task id: (Done by GraphSave, abandoned, generation, committed)
        self.flags: list = []
        self.journal_of: list = []
        self.jid: dict = {}
        self.key0 = tuple(self.intern(t) for t in s0.tasks) + (s0.target, s0.now,
                                                                 self.intern_journal(s0.journal))

    def receipts_id(self, r: tuple) -> int:
        """The number of the receipts ``r``: equal receipts, the same number (found by
        identity for the tuple held, by value, hashing each binding, for any other)."""
        k = self.rid.get(id(r))
        if k is None:
            k = self.rid_by_value.get(r)
            if k is None:
                k = self.rid_by_value[r] = len(self.receipts_of)
                self.receipts_of.append(r)
                self.rid[id(r)] = k
        return k

    def values(self, t) -> tuple:
        """What tells task states apart, as one plain tuple: every field's value but the
        receipts, and the receipts' number; equal task states have equal values, hashed
        without a Python-level hash of a dataclass or of a binding."""
        return task_values(t), self.receipts_id(t.receipts)

    def build(self, w: tuple, r: tuple):
        """``_make_task(w, r)`` interned: the task state of these values held already, else a
        new one (with the receipts held, so that the task states built from it find them by
        identity), held from now on. The compiled code builds with it while exploring."""
        k = self.rid.get(id(r))
        if k is None:
            k = self.receipts_id(r)
        key = (w, k)
        t = self.canon.get(key)
        if t is None:
            t = self.canon[key] = _make_task(w, self.receipts_of[k])
        return t

    def building(self):
        """Inside, the compiled model (if any) builds its task states with ``build``."""
        return self.compiled.building(self.build) if self.compiled is not None else nullcontext()

    def intern(self, t) -> int:
        n = self.tid.get(id(t))
        if n is not None:
            return n
        key = self.values(t)
        c = self.canon.get(key)
        if c is None:
            c = self.canon[key] = t
        n = self.tid.get(id(c))
        if n is None:
            n = self.tid[id(c)] = len(self.task_of)
            self.task_of.append(c)
            self.flags.append((graph_saved(c) is True, c.abandoned is True, c.generation,
                               committed(c) is True))
            self.interned(c)
        return n

    def interned(self, t) -> None:
        """Called once for every new task state."""

    def intern_journal(self, j) -> int:
        n = self.jid.get(j)
        if n is None:
            n = self.jid[j] = len(self.journal_of)
            self.journal_of.append(j)
        return n

    def state(self, key: tuple) -> State:
        n = self.n
        return State(graph=self.graph, tasks=tuple(self.task_of[k] for k in key[:n]),
                     target=key[n], now=key[n + 1], journal=self.journal_of[key[n + 2]])

    def global_successors(self, key: tuple) -> list:
        """Environment steps that change no task depend on the target and clock only."""
        n = self.n
        ctx = (key[n], key[n + 1])
        out = self.global_cache.get(ctx)
        if out is None:
            s = self.state(key)
            out = []
            for step in global_steps(self.inst, s):
                _, s2, _ = successor(self.inst, s, step, self.rules)
                if s2 is not None:
                    out.append((s2.target, s2.now, label(step), step))
            self.global_cache[ctx] = out
        return out

    def context(self, key: tuple, i: int) -> tuple:
        """Task ``i``'s local context: its state, its dependencies' and dependents' flags and
        the globals."""
        n = self.n
        return (i, key[i], self.neighbours(key, i),
                key[n], key[n + 1], key[n + 2])

    def neighbours(self, key: tuple, i: int) -> tuple:
        """What task ``i``'s rules read of the other tasks: its dependencies' flags and
        whether each dependent is committed."""
        if self._dependents is None:
            deps = self.graph.deps
            self._dependents = [[j for j, ds in enumerate(deps) if m in ds] for m in range(self.n)]
        flags = self.flags
        return (tuple([flags[key[d]] for d in self.graph.deps[i]]),
                tuple([flags[key[j]][3] for j in self._dependents[i]]))
