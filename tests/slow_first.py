"""The order in which the test files are handed to the processes (``-n auto --dist loadfile``).

Each process takes a whole file at a time. xdist's own order (the files with the most tests
first) hands out late the files with few tests, and a few of those run for minutes: the run
then ends on one of them while the other cores have nothing left to do. ``order`` starts the
files listed in ``SLOW`` first, the longest first, and then every other file as xdist would
(the most tests first); ``--no-loadscope-reorder`` (pyproject's ``addopts``) keeps that
order. The list changes nothing a test does; a file missing from it only starts later.
"""
from __future__ import annotations

from collections import Counter

#: The files that take the longest on one process, the longest first: their tests' seconds
#: summed, from the 30 slowest tests of a full run of 1,012 s and the files a run of
#: 2026-12-07 at load 20 timed whole (the node kernel's tests were one file then).
SLOW = (
    "test_z3_mutants.py",                 # each mutant killed by proof and by BMC
    "test_trace_matrix.py",               # the matrix at 3 tasks and the cutoff proof
    "test_compiled.py",
    "test_coverage.py",
    "test_gate_cache.py",
    "test_external_node_bugs.py",         # 22 bugs planted in the Node.js kernel, crash cuts
    "test_external_node.py",              # one test: every trace it declares, crash cuts
    "test_pg_replay.py",
    "test_impl_conditional_writes.py",
    "test_z3_cli.py",
    "test_conformance_core.py",           # a fuzzed planted bug, shrunk
    "test_gate_cache_coverage.py",
    "test_external_gate.py",
    "test_gate.py",
    "test_impl_written_decisions.py",
    "test_impl_differential.py",
    "test_gate_planted_bugs.py",
    "test_external_several.py",
    "test_impl_mutants.py",
    "test_gate_mutants.py",
    "test_design_atomic_save.py",
)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def order(items: list) -> None:
    """Sort ``items`` in place: the files of ``SLOW`` first in its order, then the others by
    their number of tests, most first; within a file the tests keep their order."""
    rank = {name: n for n, name in enumerate(SLOW)}
    count = Counter(file_of(item.nodeid) for item in items)
    first = {}
    for n, item in enumerate(items):
        first.setdefault(file_of(item.nodeid), n)

    def key(item) -> tuple:
        name = file_of(item.nodeid)
        return (rank.get(name, len(SLOW)), -count[name], first[name])
    items.sort(key=key)
