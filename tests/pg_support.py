"""The PostgreSQL the tests use: ``WGK_TEST_POSTGRES`` (a postgresql:// DSN).

``pg_dsn`` yields the DSN of a fresh schema (dropped afterwards); the tests
that need it skip with a one-line reason when the variable is unset, psycopg
is missing or the server does not answer.
"""
from __future__ import annotations

import os
import uuid

import pytest

ENV = "WGK_TEST_POSTGRES"
#: PostgreSQL's migration 2 with the writes' condition (``wgk_expect``) always holding.
NO_CONDITIONS = ("CREATE OR REPLACE FUNCTION wgk_expect(held BOOLEAN) RETURNS BOOLEAN "
                 "LANGUAGE sql AS 'SELECT TRUE'")


def server() -> str:
    """The server's DSN, or a skip naming why there is none."""
    dsn = os.environ.get(ENV)
    if not dsn:
        pytest.skip(f"{ENV} is not set (a postgresql:// DSN runs the PostgreSQL tests)")
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'wgk[pg]')")
    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.Error as e:
        pytest.skip(f"{ENV}: no server answers ({str(e).strip().splitlines()[0]})")
    return dsn


@pytest.fixture
def pg_server() -> str:
    return server()


@pytest.fixture
def pg_dsn(pg_server):
    from wgk.impl.storage import pg
    schema = f"wgk_test_{uuid.uuid4().hex[:12]}"
    pg.create_schema(pg_server, schema)
    try:
        yield pg.with_schema(pg_server, schema)
    finally:
        pg.drop_schema(pg_server, schema)


@pytest.fixture
def pg_backend(pg_server):
    """Every ImplSystem of the test on PostgreSQL."""
    from wgk.conformance.oracle import impl_system
    impl_system.use_backend(pg_server)
    try:
        yield pg_server
    finally:
        impl_system.use_backend(None)
