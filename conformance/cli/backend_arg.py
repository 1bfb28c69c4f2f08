"""The ``--backend`` option of the commands that run the implementation (replay, gate)."""
from __future__ import annotations

import argparse

from wgk.conformance.cli.errors import UsageError


def add_backend_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="sqlite", metavar="sqlite|DSN",
                   help="the implementation's database: sqlite (default, a file per run) or a "
                        "postgresql://... DSN (a fresh schema per run, dropped afterwards)")


def backend_dsn(args: argparse.Namespace) -> str | None:
    """None for SQLite, or the PostgreSQL DSN (checked reachable: one line, exit 2 if not)."""
    value = getattr(args, "backend", "sqlite") or "sqlite"
    if value == "sqlite":
        return None
    from wgk.impl import StoreError
    from wgk.impl.storage import pg
    if not pg.is_dsn(value):
        raise UsageError(f"--backend {value}: expected sqlite or a postgresql:// DSN")
    try:
        psycopg = pg.driver()
        psycopg.connect(value, connect_timeout=5).close()
    except StoreError as e:
        raise UsageError(f"--backend: {e}") from None
    except psycopg.Error as e:
        raise UsageError(f"--backend {pg.redact(value)}: cannot connect "
                         f"({pg.first_line(e)})") from None
    return value
