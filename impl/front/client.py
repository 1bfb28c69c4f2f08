"""The embedding API: ``Client(kernel, credential)`` sends requests as one principal.

The client attaches its credential to every request and does the bookkeeping
callers otherwise copy by hand: a fresh idempotency key (or the caller's, for
a retry after a lost response), the current capability K for kinds that carry
one, the expected phase and revision for SaveTransaction edges, the expected
attempt for ``dispatch``/``retry`` and the expected generation for ``reset``.
It never chooses the role: each call names the actor it claims, and the
kernel refuses a role the credential does not hold (``role-not-held``).

Capability tokens: a request that opens an attempt or a continuation
(``dispatch``, ``retry``, ``resume``) gets a fresh 256-bit secret from
``secrets``; the client sends only its sha256 (``mint``), keeps the secret by
the request's key (a re-send after a lost response mints nothing new) and, once
the kernel applied it, holds it as the task's token: ``token(task)`` is what the
opener hands to the process it spawned, and that process's client is given it
with ``hold(task, token)``. Every request of the attempt's own process (worker,
wrapper, broker) and every continuation then presents it.

    op = Client(kernel, secretfile.read("k.db.credential"))
    op.send("dispatch", "schema", "daemon", owner={"pid": pid, "birth": birth})
    w = Client(kernel, worker_credential).hold("schema", op.token("schema"))
    w.send("submit", "schema", "worker")
"""
from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Any

from .converge import capability
from ..contract.vocabulary import MINTING_KINDS, NEEDS_CAPABILITY, TOKEN_BEARERS, TRANSACTION_KINDS


#: How many of its latest requests a client can re-send exactly (by key).
REMEMBERED = 4096


class Client:
    """One principal's view of a kernel (see the module docstring)."""

    def __init__(self, kernel, credential: str | None):
        self.kernel = kernel
        self.credential = credential.strip() if isinstance(credential, str) else credential
        self._tokens: dict[str, str] = {}       # task -> the token this client presents
        self._minted: dict[str, str] = {}       # key of an opener -> the secret it minted
        self._sent: dict[str, dict] = {}        # key -> the request sent under it

    def hold(self, task: str, token: str) -> "Client":
        """Present ``token`` (handed over by the opener) for ``task`` from now on."""
        self._tokens[task] = token
        return self

    def token(self, task: str) -> str | None:
        """The token this client holds for ``task`` (after an opener it sent was applied)."""
        return self._tokens.get(task)

    def request(self, kind: str, task: str, actor: str, *, key: str | None = None,
                **fields: Any) -> dict:
        """The wire request ``send`` would send (K, CAS and key filled in, fields kebab-cased)."""
        t = self.kernel.record(task)
        r: dict[str, Any] = {"kind": kind, "actor": actor, "task": task,
                             "key": key or f"{kind}:{task}:{uuid.uuid4().hex}"}
        if kind in NEEDS_CAPABILITY:
            r["cap"] = capability(self.kernel, task, t)
        if kind in TRANSACTION_KINDS:
            r["expected-phase"] = t.visible_phase
            r["expected-revision"] = t.revision
        if kind in ("dispatch", "retry"):
            r["expected-attempt"] = t.attempt
        if kind == "reset":
            r["expected-generation"] = t.generation
        if kind == "resume" or (kind in NEEDS_CAPABILITY and actor in TOKEN_BEARERS):
            if task in self._tokens:
                r["token"] = self._tokens[task]
        if kind in MINTING_KINDS:
            secret = self._minted.setdefault(r["key"], secrets.token_hex(32))
            r["mint"] = hashlib.sha256(secret.encode()).hexdigest()
        r.update({name.replace("_", "-"): v for name, v in fields.items() if v is not None})
        return r

    def send(self, kind: str, task: str, actor: str, *, key: str | None = None,
             **fields: Any) -> dict:
        """Build the request and decide it; returns the kernel's answer (an applied opener's
        token is then ``token(task)``). A key this client sent before re-sends exactly the
        request it sent then (a lost response: the same bytes, answered from the journal)."""
        r = self._sent.get(key) if key is not None else None
        if r is None:
            r = self.request(kind, task, actor, key=key, **fields)
            self._sent[r["key"]] = r
            if len(self._sent) > REMEMBERED:          # a re-send follows its loss closely
                oldest = next(iter(self._sent))
                del self._sent[oldest]
                self._minted.pop(oldest, None)
        answer = self.kernel.handle(r, self.credential)
        applied = answer.get("decision") == "applied" or \
            answer.get("original", {}).get("decision") == "applied"
        if kind in MINTING_KINDS and applied and r["key"] in self._minted:
            self._tokens[task] = self._minted[r["key"]]
        return answer

    def converge(self, *, max_rounds: int = 64):
        """Daemon convergence sent with this client's (daemon) credential."""
        return self.kernel.converge(max_rounds=max_rounds, credential=self.credential)
