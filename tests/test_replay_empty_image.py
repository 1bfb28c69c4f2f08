"""A kernel database of the replays starts as the empty database's image, made by the
implementation's own migrations: the same schema, rows and settings as a database created and
migrated statement by statement, and a migration patched after the image was made is seen."""
from __future__ import annotations

import os
import sqlite3

from wgk.conformance.oracle import impl_system
from wgk.conformance.oracle.impl_system import ImplSystem, empty_image
from wgk.conformance.oracle.systems import StepError
from wgk.impl import Kernel, MemoryWorld
from wgk.impl.contract.errors import GraphError
from wgk.impl.storage import store as st

GRAPH = {"tasks": [{"name": "a"}, {"name": "b", "deps": ["a"]}], "target": "main-0"}


def _contents(path: str) -> dict:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {"schema": sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
                "rows": {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables},
                "settings": [conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("journal_mode", "page_size", "auto_vacuum", "user_version",
                                       "encoding", "application_id")]}
    finally:
        conn.close()


def test_the_image_equals_a_database_migrated_on_disk(tmp_path):
    migrated = str(tmp_path / "migrated.db")
    Kernel(migrated, MemoryWorld.create(target="main-0").environment()).close()
    imaged = str(tmp_path / "imaged.db")
    Kernel(imaged, MemoryWorld.create(target="main-0").environment(), image=empty_image()).close()
    assert _contents(imaged) == _contents(migrated)
    assert _contents(imaged)["rows"]["meta"]


def test_a_replay_s_kernel_starts_from_the_image_with_its_own_mode(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(impl_system, "empty_image", lambda: made.append(1) or empty_image())
    old = os.umask(0o022)
    try:
        system = ImplSystem(GRAPH, workdir=str(tmp_path))
    finally:
        os.umask(old)
    try:
        assert made == [1]
        assert os.stat(system.path).st_mode & 0o777 == 0o600
        migrated = str(tmp_path / "migrated.db")
        Kernel(migrated, MemoryWorld.create(target="main-0").environment()).close()
        assert _contents(system.path)["schema"] == _contents(migrated)["schema"]
    finally:
        system.close()


def test_an_existing_database_is_opened_not_overwritten(tmp_path):
    ImplSystem(GRAPH, workdir=str(tmp_path)).close()
    path = os.path.join(str(tmp_path), "kernel.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO meta VALUES ('kept', 'yes')")
    conn.close()
    try:
        ImplSystem(GRAPH, workdir=str(tmp_path)).close()
    except (StepError, GraphError):     # its graph exists already: refused, nothing written
        pass
    assert "('kept', 'yes')" in _contents(path)["rows"]["meta"]


def test_a_patched_migration_gets_an_image_of_its_own(monkeypatch, tmp_path):
    empty_image()
    last = max(st.MIGRATIONS)
    monkeypatch.setitem(st.MIGRATIONS, last,
                        st.MIGRATIONS[last] + ";\nCREATE TABLE planted (x INTEGER)")
    system = ImplSystem(GRAPH, workdir=str(tmp_path))
    try:
        assert "planted" in _contents(system.path)["rows"]
    finally:
        system.close()
