"""Principals: named credentials holding roles, stored hashed (BRIEF §8).

A credential is ``<principal>.<secret>``; the secret is 256 bits from
``secrets`` and the kernel stores only its sha256, compared with
``hmac.compare_digest``. A kernel that never had a principal is *open*: the
actor label of a request is its role, as in every kernel made before
principals existed (tests, the conformance oracle's untyped traces). Once a
principal exists the kernel is *closed*: every request must carry a
credential, checked before the request itself is read.

Principals are history: each is added and revoked by a ledger event
(``principal-added``, ``principal-revoked``, its body the principal as it
stands after it), so the hash chain covers every secret hash, role and
revocation, and the ``principals`` table is rebuilt from the ledger like every
projected table. Before it authenticates anyone, the kernel checks that table
against the events (``authority``): a closed kernel whose principals were
deleted, added, given roles or un-revoked behind its back is ``Tampered`` and
refuses every request, never opens; the check is kept until another connection
commits (``forget``).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

from ..contract import names
from ..storage.authority import (
    PrincipalRow, principal_body, principal_differences, principals_from_ledger,
    principals_table,
)
from ..contract.errors import Tampered
from ..contract.vocabulary import ACTORS

SECRET_BYTES = 32
#: The longest credential read at all (a name and a 43-character secret are far shorter).
MOST_CREDENTIAL = 4096


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


def sendable(text) -> bool:
    """Whether ``text`` is a string any store can hold and compare: at most
    ``MOST_CREDENTIAL`` characters, UTF-8 encodable (no lone surrogate), no NUL."""
    if not isinstance(text, str) or len(text) > MOST_CREDENTIAL or "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def well_formed(credential) -> bool:
    """Whether a credential can name a principal at all: ``sendable``, with a ``.`` between
    a name and a secret. Anything else is refused without being read further."""
    return sendable(credential) and "." in credential


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
    """The principals of one kernel database: ``store`` holds them, ``append(event, body,
    key)`` writes one ledger event and applies it (the kernel's)."""

    def __init__(self, store, append: Callable[..., object]):
        self.store = store
        self.conn = store.conn
        self.append = append
        self._closed = False                    # once closed, a kernel stays closed
        self._checked: dict[str, PrincipalRow] | None = None

    def forget(self) -> None:
        """Check the table against the ledger again before the next authentication (another
        connection committed, or the tables were replaced)."""
        self._checked = None

    def checked(self) -> dict[str, PrincipalRow]:
        """The principals, once the table is shown to hold exactly what the ledger's principal
        events say (``Tampered`` otherwise, naming the first difference)."""
        if self._checked is None:
            ledger = principals_from_ledger(self.conn)
            table = principals_table(self.conn)
            wrong = principal_differences(ledger, table)
            if wrong:
                self._closed = self._closed or bool(ledger)
                raise Tampered(f"{wrong[0]}: every request is refused until the principals are "
                               "rebuilt from the ledger (wgk kernel verify-ledger, then "
                               "rebuild --apply)")
            self._checked = table
            self._closed = self._closed or bool(table)
        return self._checked

    def closed(self) -> bool:
        """Whether requests must authenticate (some principal was ever added)."""
        return bool(self.checked()) or self._closed

    def add(self, name: str, roles, secret: str | None = None) -> str:
        """Add a principal; returns its credential (shown once, never stored)."""
        check_name(name)
        roles = check_roles(roles)
        secret = secret or secrets.token_urlsafe(SECRET_BYTES)
        with self.store.atomic():
            self.store.lock_graph()             # principals change one at a time (PostgreSQL)
            self.forget()
            if name in self.checked():
                raise PrincipalError(f"principal {name!r} exists already")
            self.append("principal-added", principal_body(name, digest(secret), roles, False),
                        key=name)
        self.forget()
        return f"{name}.{secret}"

    def list(self) -> list[Principal]:
        return [Principal(n, p.roles, p.revoked) for n, p in sorted(self.checked().items())]

    def revoke(self, name: str) -> None:
        with self.store.atomic():
            self.store.lock_graph()
            self.forget()
            p = self.checked().get(name)
            if p is None:
                raise PrincipalError(f"no principal {name!r}")
            self.append("principal-revoked", principal_body(name, p.secret_sha256, p.roles, True),
                        key=name)
        self.forget()

    def authenticate(self, credential: str | None) -> Principal | None:
        """``None`` for an open kernel; the principal a credential proves; else ``DENIED``."""
        known = self.checked()
        if not known and not self._closed:
            return None
        if not well_formed(credential):
            return DENIED
        name, _, secret = credential.partition(".")
        row = known.get(name)
        stored = row.secret_sha256 if row else digest(secrets.token_hex(SECRET_BYTES))
        # guards: role-held
        if not hmac.compare_digest(stored, digest(secret)) or row is None or row.revoked:
            return DENIED
        return Principal(name, row.roles)


def scoped_key(who: Principal | None, key: str) -> str:
    """The journal key in its sender's namespace (an open kernel has one namespace)."""
    # guards: keys-per-principal
    return key if who is None else f"{who.name}/{key}"
