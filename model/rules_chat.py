"""The rules of an attempt's chat: one creation request under the attempt-opening key, then
its reconciliation.

The daemon's request to create the running attempt's chat is recorded under the attempt's
opening key (its fence) with the request itself (``request-chat``); its answer may be lost.
Whatever became of the answer, the daemon then reconciles the request it made
(``reconcile-chat``): the chat that request created is looked up by that key and recorded,
and nothing is created again (WG's ``obsolete_daemon_chat_creation_lost_response``: the old
daemon took an unanswered creation for one never made and created again). The invariant
``one-chat-request-per-opening-key`` states it. Each rule is declared with ``@rule``.
"""
from __future__ import annotations

from .logic import ite
from .predicates import running
from .ruleset import guarded, rule
from .state import replace_task as replace
from .vocab import Code, DecisionKind as D, Kind as K


@rule(K.REQUEST_CHAT, touches={"chat_request", "chat_requests"}, reads={"self"})
def request_chat(s, i, t, r):
    """The daemon requests the running attempt's chat under its attempt-opening key, at most once per key: the request is recorded with it."""
    return guarded(
        [(running(t), Code.TERMINAL_ALREADY), (t.chat_request != t.fence, Code.CHAT_REQUESTED)],
        lambda: s.put(i, replace(t, chat_request=t.fence, chat_requests=ite(
            t.chat_request == t.fence, t.chat_requests + 1, 1))),
    )


@rule(K.RECONCILE_CHAT, touches={"chat_reconciled"}, reads={"self"})
def reconcile_chat(s, i, t, r):
    """The daemon reconciles the chat creation request it made under the running attempt's key: the chat it created is recorded, nothing is created."""
    return guarded(
        [(running(t), Code.TERMINAL_ALREADY), (t.chat_request == t.fence, Code.CHAT_UNREQUESTED)],
        lambda: s.put(i, replace(t, chat_reconciled=t.fence)),
        kind=ite(t.chat_reconciled == t.fence, D.EVIDENCE_ONLY, D.APPLIED),
    )
