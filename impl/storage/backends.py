"""The storage backends a kernel's database can live in, each one object.

A ``Backend`` knows a location of its kind (``accepts``), opens its store, says whether the
database is a file on this machine, and shows a location without its password. Everything
that depends on where the database lives asks the backend of its location
(``backend_of``) instead of testing the location's text: the request path asks the store,
whose dialect it is (``lock_request``: PostgreSQL locks the task rows a decision reads,
SQLite's one writer covers them; ``read_ahead``: PostgreSQL sends the first reads with the
credential check's round trip). A third backend is one more ``Backend`` in ``BACKENDS``, its store beside
``store.py`` (SQLite) and ``pg*.py`` (PostgreSQL).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .dsn import is_dsn, redact
from .store import Store


@dataclass(frozen=True)
class Backend:
    """One kind of database: its name, the locations it takes, how its store opens."""

    name: str
    accepts: Callable[[str], bool]
    store: Callable[..., Store]
    #: the database is a file here (the command line creates it owner-only, checks it exists)
    file: bool
    shown: Callable[[str], str] = str

    def open(self, path: str, **kw) -> Store:
        return self.store(path, **kw)


def _pg_store(path: str, **kw) -> Store:
    """The PostgreSQL store of a DSN (``pg``, and psycopg with it, imported only now)."""
    from .pg import PgStore
    return PgStore(path, **kw)


POSTGRES = Backend("postgresql", is_dsn, _pg_store, file=False, shown=redact)
SQLITE = Backend("sqlite", lambda path: True, Store, file=True)
#: In the order they are asked; the last takes every location.
BACKENDS = (POSTGRES, SQLITE)


def backend_of(path: str) -> Backend:
    """The backend of a database location (a ``postgresql://`` URL, else a SQLite file)."""
    return next(b for b in BACKENDS if b.accepts(path))


def open_store(path: str, **kw) -> Store:
    """The store of ``path``: a SQLite file, or PostgreSQL for a ``postgresql://`` DSN."""
    return backend_of(path).open(path, **kw)
