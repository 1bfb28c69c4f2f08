"""Principals: named credentials holding roles, stored hashed (BRIEF §8).

A credential is ``<principal>.<secret>``; the secret is 256 bits from
``secrets`` and the kernel stores only its sha256, compared with
``hmac.compare_digest``. A kernel whose ``principals`` table holds no live
principal is *open*: the actor label of a request is its role, as in every
kernel made before principals existed (tests, the conformance oracle's
untyped traces). Once a principal exists the kernel is *closed*: every request
must carry a credential, checked before the request itself is read.

The table is its own schema step (``CREATE TABLE IF NOT EXISTS``, made on the
first ``add``), apart from the numbered migrations and the ledger: principals
are configuration, not history, and ``rebuild`` leaves them alone.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from . import names
from .vocabulary import ACTORS

TABLE = """CREATE TABLE IF NOT EXISTS principals (
    name TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, roles TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
)"""
SECRET_BYTES = 32


class PrincipalError(ValueError):
    """A principal that cannot be added, listed or revoked (one line for the CLI)."""


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[str]
    revoked: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "roles": sorted(self.roles), "revoked": self.revoked}


#: The answer to a credential that names no live principal (or to none in a closed kernel).
DENIED = Principal("", frozenset(), True)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_name(name: str) -> str:
    bad = names.describe("principal name", name)
    if bad is not None:
        raise PrincipalError(bad)
    return name


def check_roles(roles) -> frozenset[str]:
    roles = frozenset(roles)
    unknown = sorted(roles - set(ACTORS))
    if unknown:
        raise PrincipalError(f"unknown role {unknown[0]!r} (expected some of: {', '.join(ACTORS)})")
    return roles


class Principals:
    """The principals of one kernel database (its connection)."""

    def __init__(self, conn):
        self.conn = conn
        self.pg = hasattr(conn, "raw")          # a PostgreSQL connection (impl/pg.py)
        self._closed = False                    # once closed, a kernel stays closed

    def _exists(self) -> bool:
        if self.pg:
            return self.conn.native("SELECT to_regclass('principals') IS NOT NULL").fetchone()[0]
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                 "AND name = 'principals'").fetchone() is not None

    def _unit(self):
        """One transaction for an edit of the table (PostgreSQL: autocommitted statements)."""
        return contextlib.nullcontext() if self.pg else self.conn

    def closed(self) -> bool:
        """Whether requests must authenticate (some principal was ever added)."""
        self._closed = self._closed or self._exists() and self.conn.execute(
            "SELECT 1 FROM principals LIMIT 1").fetchone() is not None
        return self._closed

    def add(self, name: str, roles, secret: str | None = None) -> str:
        """Add a principal; returns its credential (shown once, never stored)."""
        check_name(name)
        roles = check_roles(roles)
        secret = secret or secrets.token_urlsafe(SECRET_BYTES)
        with self._unit():
            self.conn.execute(TABLE)
            if self.conn.execute("SELECT 1 FROM principals WHERE name = ?", (name,)).fetchone():
                raise PrincipalError(f"principal {name!r} exists already")
            self.conn.execute("INSERT INTO principals VALUES (?, ?, ?, 0)",
                              (name, digest(secret), ",".join(sorted(roles))))
        return f"{name}.{secret}"

    def list(self) -> list[Principal]:
        if not self._exists():
            return []
        rows = self.conn.execute("SELECT name, roles, revoked FROM principals ORDER BY name")
        return [Principal(n, frozenset(r.split(",")) - {""}, bool(v)) for n, r, v in rows]

    def revoke(self, name: str) -> None:
        with self._unit():
            n = self._exists() and self.conn.execute(
                "UPDATE principals SET revoked = 1 WHERE name = ?", (name,)).rowcount
        if not n:
            raise PrincipalError(f"no principal {name!r}")

    def authenticate(self, credential: str | None) -> Principal | None:
        """``None`` for an open kernel; the principal a credential proves; else ``DENIED``."""
        if not self.closed():
            return None
        if not isinstance(credential, str) or "." not in credential:
            return DENIED
        name, _, secret = credential.partition(".")
        row = self.conn.execute("SELECT secret_sha256, roles, revoked FROM principals "
                                "WHERE name = ?", (name,)).fetchone()
        stored = row[0] if row else digest(secrets.token_hex(SECRET_BYTES))
        # guards: role-held
        if not hmac.compare_digest(stored, digest(secret)) or row is None or row[2]:
            return DENIED
        return Principal(name, frozenset(row[1].split(",")) - {""})


def scoped_key(who: Principal | None, key: str) -> str:
    """The journal key in its sender's namespace (an open kernel has one namespace)."""
    # guards: keys-per-principal
    return key if who is None else f"{who.name}/{key}"
