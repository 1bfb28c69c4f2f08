"""Capability tokens in traces: symbolic names, filled in where a trace leaves them out.

A trace names tokens symbolically (``"mint": "tok-a-1"`` on the request that opens
an attempt or a continuation, ``"token": "tok-a-1"`` on each request its process
sends); a replay binds every name to a fresh secret (``oracle.systems.bind_tokens``).
``with_tokens`` gives a trace written before tokens existed the tokens its honest
senders held, so it keeps its meaning:

- each opener mints a new name; a re-sent opener (the same sender and key) the same
  name, so that it stays the same bytes;
- an opener the trace expects ``applied`` opens the task's next fence (dispatch,
  retry) or continues the current one (resume), whose token is then the minted one;
- each request of an attempt's own process (worker, wrapper, broker) or continuation
  that names a K presents the token of the attempt at that K's fence, as its process
  would: an old worker its old attempt's token, a request naming a fence that never
  opened none.

Fields a trace already has are kept as written.
"""
from __future__ import annotations

import copy
from typing import Any

from wgk.model.vocab import MINTING_KINDS, NEEDS_CAPABILITY, TOKEN_BEARERS

#: Labels of the kinds that mint, and of the kinds and actors that present a token.
MINTS = frozenset(k.label for k in MINTING_KINDS)
K_KINDS = frozenset(k.label for k in NEEDS_CAPABILITY)
BEARERS = frozenset(a.label for a in TOKEN_BEARERS)


def presents_token(request: dict) -> bool:
    """A continuation, or a K-request of the attempt's own process (``Request.needs_token``)."""
    kind, actor = request.get("kind"), request.get("actor")
    return kind == "resume" or (kind in K_KINDS and actor in BEARERS)


class _Tokens:
    """What the honest senders of one trace hold, step by step."""

    def __init__(self) -> None:
        self.fence: dict[str, int] = {}          # task -> its current fence
        self.held: dict[tuple, str] = {}         # (task, fence) -> the token of that attempt
        self.sent: dict[tuple, str] = {}         # (principal, key) -> the name its opener minted
        self.count: dict[str, int] = {}

    def seed(self, task: str, attempt: dict) -> None:
        self.fence[task] = attempt.get("fence", 0)
        if attempt.get("state", "running") != "none":
            attempt.setdefault("token", f"tok-{task}-0")
            self.held[(task, self.fence[task])] = attempt["token"]

    def fill(self, r: dict) -> None:
        task = r.get("task", "")
        if r.get("kind") in MINTS and "mint" not in r:
            sent = (r.get("principal"), r.get("key"))
            if sent not in self.sent or r.get("key") is None:
                self.count[task] = self.count.get(task, 0) + 1
                self.sent[sent] = f"tok-{task}-{self.count[task]}"
            r["mint"] = self.sent[sent]
        cap = r.get("cap")
        if presents_token(r) and "token" not in r and isinstance(cap, dict):
            name = self.held.get((cap.get("task"), cap.get("fence")))
            if name is not None:
                r["token"] = name

    def decided(self, r: dict, expect: Any) -> None:
        if r.get("kind") not in MINTS or not isinstance(expect, dict) \
                or expect.get("decision") != "applied":
            return
        task = r.get("task", "")
        if r["kind"] != "resume":
            self.fence[task] = self.fence.get(task, 0) + 1
        self.held[(task, self.fence.get(task, 0))] = r["mint"]


def with_tokens(doc: dict) -> dict:
    """The trace document with every missing ``mint``, ``token`` and seeded token filled in."""
    out = copy.deepcopy(doc)
    tokens = _Tokens()
    for task, seed in (out.get("initial") or {}).items():
        if isinstance(seed, dict) and isinstance(seed.get("attempt"), dict):
            tokens.seed(task, seed["attempt"])
    for step in out.get("steps", []):
        r = step.get("request")
        if isinstance(r, dict):
            tokens.fill(r)
            tokens.decided(r, step.get("expect"))
    return out
