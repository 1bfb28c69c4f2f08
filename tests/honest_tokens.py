"""Tests that call the kernel's raw API play an honest opener and its process.

``wgk.impl.Client`` does a caller's token bookkeeping; most tests send raw wire
dicts through ``Kernel.handle`` / ``handle_batch`` instead, to pin the API's
exact shape. For those, this fixture (autouse, see ``conftest``) plays what an
honest opener and process do: a request that opens an attempt or a continuation
and names no ``mint`` gets the sha256 of a secret of its own (one per task and
key: the same when it is re-sent, and the same request sent to two databases
mints the same), and once the kernel applied it the secret belongs to
that attempt's fence; a request of the attempt's own process (worker, wrapper,
broker) or a continuation that names a K and no ``token`` presents the secret of
the attempt at that K's fence, if it ever opened. A test about tokens themselves
is marked ``raw_tokens`` and sends exactly what it writes.
"""
from __future__ import annotations

import hashlib
from typing import Any

import pytest

from wgk.impl.front.kernel import Kernel
from wgk.impl.contract.vocabulary import MINTING_KINDS, NEEDS_CAPABILITY, TOKEN_BEARERS


def _db(k: Kernel) -> Any:
    """The database a kernel opened: two kernels on one database share its attempts."""
    return getattr(k.store, "path", None) or id(k)


def _label(wire: dict, name: str) -> str:
    v = wire.get(name)
    return v if isinstance(v, str) else ""


def _presents(wire: dict) -> bool:
    return _label(wire, "kind") == "resume" or (
        _label(wire, "kind") in NEEDS_CAPABILITY and _label(wire, "actor") in TOKEN_BEARERS)


def honest_secret(task: str, key: str) -> str:
    """The secret an honest opener of ``task`` mints under ``key`` (what this fixture sends
    when a test leaves ``mint`` out): what a child process of a test presents as ``token``."""
    # a hostile task or key (a lone surrogate) still names one secret: the kernel, not this
    # fixture, refuses it
    return hashlib.sha256(f"honest:{task}:{key}".encode("utf-8", "surrogatepass")).hexdigest()


def honest_mint(task: str, key: str) -> str:
    return hashlib.sha256(honest_secret(task, key).encode()).hexdigest()


class HonestTokens:
    """The secrets one test's honest openers handed out, by kernel database and fence."""

    def __init__(self) -> None:
        self.by_fence: dict[tuple, str] = {}

    def fill(self, k: Kernel, wire: Any) -> tuple[Any, str | None]:
        if not isinstance(wire, dict):
            return wire, None
        out, secret = dict(wire), None
        if _label(out, "kind") in MINTING_KINDS and "mint" not in out:
            # one secret per (task, key): the same request to two databases mints the same
            secret = honest_secret(_label(out, "task"), _label(out, "key"))
            out["mint"] = hashlib.sha256(secret.encode()).hexdigest()
        cap = out.get("cap")
        if _presents(out) and "token" not in out and isinstance(cap, dict):
            try:
                held = self.by_fence.get((_db(k), cap.get("task"), cap.get("fence")))
            except TypeError:                   # an unhashable task or fence: sent as written
                held = None
            if held is not None:
                out["token"] = held
        return out, secret

    def opened(self, k: Kernel, wire: dict, secret: str | None, answer: Any) -> None:
        if secret is None or not isinstance(answer, dict):
            return
        if answer.get("decision") == "applied" or answer.get("original", {}).get("decision") == "applied":
            self.by_fence[(_db(k), wire["task"], k.record(wire["task"]).fence)] = secret


@pytest.fixture(autouse=True)
def honest_tokens(request, monkeypatch):
    if request.node.get_closest_marker("raw_tokens"):
        yield None
        return
    tokens = HonestTokens()
    handle, handle_batch = Kernel.handle, Kernel.handle_batch

    def honest_handle(self, wire, credential=None, *a, **kw):
        body, secret = tokens.fill(self, wire)
        answer = handle(self, body, credential, *a, **kw)
        tokens.opened(self, body if isinstance(body, dict) else {}, secret, answer)
        return answer

    def honest_batch(self, wires, credential=None, *a, **kw):
        filled = [tokens.fill(self, w) for w in wires]
        answers = handle_batch(self, [b for b, _ in filled], credential, *a, **kw)
        for (body, secret), answer in zip(filled, answers):
            tokens.opened(self, body if isinstance(body, dict) else {}, secret, answer)
        return answers

    monkeypatch.setattr(Kernel, "handle", honest_handle)
    monkeypatch.setattr(Kernel, "handle_batch", honest_batch)
    yield tokens
