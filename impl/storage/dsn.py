"""What a PostgreSQL location looks like, without the PostgreSQL store: whether a location
is a DSN, and a DSN shown without its password. Choosing a backend asks these for every
location, so they live apart from ``pg`` (which is imported only when a DSN is opened)."""
from __future__ import annotations

import urllib.parse

DSN_PREFIXES = ("postgresql://", "postgres://")


def is_dsn(path) -> bool:
    return isinstance(path, str) and path.startswith(DSN_PREFIXES)


def redact(dsn: str) -> str:
    """A DSN without its password (for messages)."""
    parts = urllib.parse.urlsplit(dsn)
    if parts.password is None:
        return dsn
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))
