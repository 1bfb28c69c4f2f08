"""The error classes of the implementation (and ``one_line``, an error shown on one line),
in one module that imports nothing.

Every layer raises these; keeping them here lets the kernel, the store, the
audit, the legacy import and the CLI share them without importing each other.
"""
from __future__ import annotations


class BadRequest(ValueError):
    """A request that cannot be parsed: it gets no decision and changes nothing."""


class EnvError(RuntimeError):
    """An environment operation that cannot be performed."""


class GraphError(ValueError):
    """A graph edit that cannot be made (unknown task, duplicate, cycle, fixed dependencies)."""


class SeedError(ValueError):
    """Initial facts that cannot be seeded (task already has an attempt, malformed)."""


class EffectError(RuntimeError):
    """An external effect did not do what it must (e.g. a removed worktree is still there)."""


class StoreError(RuntimeError):
    """The database cannot be used (not a kernel database, too new, corrupt)."""


class LegacyError(ValueError):
    """A legacy file that cannot be imported (the message names path and line)."""


class Tampered(StoreError):
    """A table that grants authority or answers for the past differs from the ledger that
    wrote it (a principal deleted, a role added, a revocation undone, ...): the kernel
    refuses every request until it is repaired from the ledger (``rebuild --apply``)."""


def one_line(e: BaseException, limit: int = 160) -> str:
    """An error as one line of at most ``limit`` characters (its class and its text)."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= limit else text[:limit] + "…"
