"""The order in which the test files are handed to the processes (tests/slow_first.py)."""
from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import slow_first

TESTS = Path(__file__).resolve().parent


def test_every_file_listed_first_is_a_test_file():
    assert len(set(slow_first.SLOW)) == len(slow_first.SLOW)
    for name in slow_first.SLOW:
        assert (TESTS / name).is_file(), f"tests/slow_first.py lists {name}, which is no test file"


def test_listed_files_go_first_in_their_order_then_the_most_tests_first():
    first, second = slow_first.SLOW[:2]
    nodeids = ["tests/test_a.py::x", f"tests/{second}::y", "tests/test_b.py::p",
               "tests/test_b.py::q", f"tests/{first}::z", "tests/test_a.py::w", "tests/test_c.py::c",
               "tests/test_b.py::r", f"tests/{second}::v"]
    items = [SimpleNamespace(nodeid=n) for n in nodeids]
    slow_first.order(items)
    assert [i.nodeid for i in items] == [
        f"tests/{first}::z", f"tests/{second}::y", f"tests/{second}::v",
        "tests/test_b.py::p", "tests/test_b.py::q", "tests/test_b.py::r",
        "tests/test_a.py::x", "tests/test_a.py::w", "tests/test_c.py::c"]


def test_the_suite_keeps_the_order_it_is_given():
    """xdist reorders the files by their number of tests unless told not to."""
    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())
    addopts = project["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "--dist" in addopts and addopts[addopts.index("--dist") + 1] == "loadfile"
    assert "--no-loadscope-reorder" in addopts


def test_this_run_collected_its_files_in_that_order(request):
    """conftest's hook gave this session its order (with several files collected, as in the
    suite's run, the order differs from the files' names')."""
    items = list(request.session.items)
    slow_first.order(items)
    assert [i.nodeid for i in items] == [i.nodeid for i in request.session.items]
