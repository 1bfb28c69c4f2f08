"""The embedding API: ``Client(kernel, credential)`` sends requests as one principal.

The client attaches its credential to every request and does the bookkeeping
callers otherwise copy by hand: a fresh idempotency key (or the caller's, for
a retry after a lost response), the current capability K for kinds that carry
one, the expected phase and revision for SaveTransaction edges, the expected
attempt for ``dispatch``/``retry`` and the expected generation for ``reset``.
It never chooses the role: each call names the actor it claims, and the
kernel refuses a role the credential does not hold (``role-not-held``).

    op = Client(kernel, open("k.db.credential").read())
    op.send("dispatch", "schema", "daemon", owner={"pid": pid, "birth": birth})
    w = Client(kernel, worker_credential)
    w.send("submit", "schema", "worker")
"""
from __future__ import annotations

import uuid
from typing import Any

from .converge import capability
from .vocabulary import NEEDS_CAPABILITY, TRANSACTION_KINDS


class Client:
    """One principal's view of a kernel (see the module docstring)."""

    def __init__(self, kernel, credential: str | None):
        self.kernel = kernel
        self.credential = credential.strip() if isinstance(credential, str) else credential

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
        r.update({name.replace("_", "-"): v for name, v in fields.items() if v is not None})
        return r

    def send(self, kind: str, task: str, actor: str, *, key: str | None = None,
             **fields: Any) -> dict:
        """Build the request and decide it; returns the kernel's answer."""
        return self.kernel.handle(self.request(kind, task, actor, key=key, **fields),
                                  self.credential)

    def converge(self, *, max_rounds: int = 64):
        """Daemon convergence sent with this client's (daemon) credential."""
        return self.kernel.converge(max_rounds=max_rounds, credential=self.credential)
