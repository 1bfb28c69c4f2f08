"""The rules of the operator's pause: no attempt opens on a paused task, nor before its
not-before time.

``pause`` holds a task's admission (an attempt already running runs on; a dispatch or a
retry is refused ``paused``); ``unpause`` lifts it, with an optional not-before time (the
request's deadline) before which a dispatch or a retry is refused ``not-due``. Each rule is
declared with ``@rule``.
"""
from __future__ import annotations

from .logic import all_of, ite, not_
from .predicates import graph_saved
from .ruleset import guarded, rule
from .state import replace_task as replace
from .vocab import Code, DecisionKind as D, Kind as K


@rule(K.PAUSE, touches={"paused"}, reads={"self"})
def pause(s, i, t, r):
    """The operator pauses an unfinished task: nothing opens an attempt on it until it is
    unpaused (a paused task paused again changes nothing)."""
    return guarded(
        [(not_(graph_saved(t)), Code.TERMINAL_ALREADY), (not_(t.abandoned), Code.TERMINAL_ALREADY)],
        lambda: s.put(i, replace(t, paused=True)),
        kind=ite(t.paused, D.EVIDENCE_ONLY, D.APPLIED),
    )


@rule(K.UNPAUSE, touches={"paused", "not_before"}, reads={"self"})
def unpause(s, i, t, r):
    """The operator lifts a task's pause, and sets the time before which no attempt opens on
    it (the request's deadline; 0: none)."""
    same = all_of(not_(t.paused), t.not_before == r.deadline)
    return guarded(
        [(not_(graph_saved(t)), Code.TERMINAL_ALREADY), (not_(t.abandoned), Code.TERMINAL_ALREADY)],
        lambda: s.put(i, replace(t, paused=False, not_before=r.deadline)),
        kind=ite(same, D.EVIDENCE_ONLY, D.APPLIED),
    )
