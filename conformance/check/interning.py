"""Interned task states and journals, shared by the explorer and the simulator.

A global state is the small tuple ``key = (task ids..., target, now, journal
id)``. A rule for task ``i`` reads only task ``i``, its dependencies'
Done/abandoned flags and generations, whether a dependent is committed (the
reopen), the target, the clock and the journal, so a task's *local context*
(``Interner.context``) determines its successors.
"""
from __future__ import annotations

from dataclasses import replace

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
        self.tid: dict = {}
        # per task id: (Done by GraphSave, abandoned, generation, committed)
        self.flags: list = []
        self.journal_of: list = []
        self.jid: dict = {}
        self.key0 = tuple(self.intern(t) for t in s0.tasks) + (s0.target, s0.now,
                                                                 self.intern_journal(s0.journal))

    def intern(self, t) -> int:
        n = self.tid.get(t)
        if n is None:
            n = self.tid[t] = len(self.task_of)
            self.task_of.append(t)
            self.flags.append((graph_saved(t) is True, t.abandoned is True, t.generation,
                               committed(t) is True))
            self.interned(t)
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
