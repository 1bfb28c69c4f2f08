"""Packaged: the bundled traces and their schema ship inside the wheel (package data
``wgk.traces``), and the code finds them through the package, not through the checkout."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wgk.conformance.reports import gate
from wgk.conformance.traces import format as trace_format

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "model", "impl", "conformance", "traces")


def _offline_backend() -> bool:
    """setuptools >= 64 and wheel importable here: build without fetching a build environment."""
    if importlib.util.find_spec("wheel") is None or importlib.util.find_spec("setuptools") is None:
        return False
    import setuptools
    return int(setuptools.__version__.split(".")[0]) >= 64


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """A wheel built from a copy of the project's sources (the build writes into its source
    folder: never into the checkout)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(p, src / name)
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(out)]
    if _offline_backend():
        cmd.insert(4, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [whl] = out.glob("wgk-*.whl")
    return zipfile.ZipFile(whl)


def test_the_wheel_contains_every_bundled_trace_and_the_schema(wheel):
    names = set(wheel.namelist())
    traces = trace_format.trace_files([ROOT / "traces"])
    assert len(traces) >= 58
    missing = [str(p) for p in traces
               if "wgk/traces/" + p.relative_to(ROOT / "traces").as_posix() not in names]
    assert missing == []
    assert "wgk/traces/schema/wgk-trace-1.schema.json" in names
    assert "wgk/traces/itf/quint-mbt-lifecycle.itf.json" in names
    assert "wgk/traces/__init__.py" in names
    assert not [n for n in names if n.startswith("traces/")]      # no top-level package `traces`


def test_the_wheel_registers_the_command_and_the_pytest_plugin(wheel):
    [entry_points] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "wgk = wgk.conformance.cli.main:main" in text
    assert "wgk = wgk.conformance.pytest_plugin" in text
    assert "wgk/conformance/reports/gate.py" in wheel.namelist()


def test_the_corpus_and_schema_are_found_through_the_package():
    spec = importlib.util.find_spec("wgk.traces")
    if spec is None:
        pytest.skip("an editable install made before wgk.traces was packaged: reinstall it")
    here = Path(spec.origin).parent
    assert gate.bundled_traces() == here
    assert trace_format.SCHEMA_PATH == here / "schema" / "wgk-trace-1.schema.json"
    assert trace_format.SCHEMA_PATH.is_file()
    assert len(trace_format.trace_files([gate.bundled_traces()])) >= 58
