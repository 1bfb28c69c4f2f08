"""The mutants' incident traces: the corpus is listed once and again only when a folder changed."""
from __future__ import annotations

import os
import shutil

from wgk.conformance.oracle import mutant_traces
from wgk.conformance.traces.format import trace_files
from wgk.conformance.z3.mutants import MUTANTS


def _a_mutant_and_its_traces():
    for m in MUTANTS.values():
        found = mutant_traces.incident_traces(m)
        if found:
            return m, found
    raise AssertionError("no mutant has an incident trace")


def _bump(path, ns: int) -> None:
    """Set the folder's time of change apart from the one recorded (a coarse clock may not)."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + ns))


def test_the_listing_follows_files_added_and_removed_in_any_folder(tmp_path):
    m, found = _a_mutant_and_its_traces()
    root = tmp_path / "corpus"
    (root / "a").mkdir(parents=True)
    shutil.copy(found[0], root / "a" / "one.json")
    assert mutant_traces.incident_traces(m, root) == [root / "a" / "one.json"]
    assert mutant_traces.incident_traces(m, root) == [root / "a" / "one.json"]     # kept

    (root / "a" / "b").mkdir()                       # a new folder, a new trace in it
    shutil.copy(found[0], root / "a" / "b" / "two.json")
    _bump(root / "a", 1)
    assert mutant_traces.incident_traces(m, root) == [root / "a" / "b" / "two.json",
                                                      root / "a" / "one.json"]
    shutil.copy(found[0], root / "a" / "b" / "three.json")     # in a folder listed before
    _bump(root / "a" / "b", 2)
    assert mutant_traces.incident_traces(m, root) == sorted(
        [root / "a" / "one.json", root / "a" / "b" / "two.json", root / "a" / "b" / "three.json"],
        key=lambda p: trace_files([root]).index(p))
    os.remove(root / "a" / "one.json")
    _bump(root / "a", 3)
    assert root / "a" / "one.json" not in mutant_traces.incident_traces(m, root)
    assert mutant_traces.listed(root) == trace_files([root])


def test_the_bundled_corpus_lists_as_trace_files_does():
    root = mutant_traces.corpus()
    assert mutant_traces.listed(root) == trace_files([root])
    assert mutant_traces.listed(root) == trace_files([root])
