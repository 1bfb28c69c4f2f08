"""Choosing the store of a database: a SQLite file, or PostgreSQL for a DSN."""
from __future__ import annotations

from .pg import PgStore, is_dsn           # psycopg itself is imported only for a DSN
from .store import Store


def open_store(path: str, **kw) -> Store:
    """The store of ``path``: a SQLite file, or PostgreSQL for a ``postgresql://`` DSN."""
    return PgStore(path, **kw) if is_dsn(path) else Store(path, **kw)
