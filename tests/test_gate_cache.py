"""wgk gate --cache: each part's checks are reused exactly while nothing its key covers changed.

The sources the cache keys by are a copy (``gate_cache.SOURCES`` points at it); each test
changes one dependency in the copy (an implementation function, a rule, a property, a
lemma, a trace) and restores it, and checks that exactly the parts whose key covers it ran
again: for the traced sections, those that recorded running the changed function; for the
sections on the model, their static key. The report is the same with the cache and without.
"""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.conformance.reports import gate, gate_cache
from wgk.conformance.reports.gate_cache import GateCache

from gate_sources import cold_then_plain, copied_sources, edit_function, plain_report

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
NAMES = ["10-stale-capability-rejected.json", "16-two-dispatchers-one-attempt.json",
         "06-live-owner-missing-heartbeat-stays-running.json"]
SMALL = {"replay": True, "crash-cuts": ["in-process"]}


class Runs:
    """The gate on a small budget over copied sources and traces, with a cache, noting which
    parts ran (and what each recorded running) through ``GateCache.store``."""

    def __init__(self, tmp: Path):
        self.tmp, self.cache = tmp, tmp / "cache"
        self.sources = copied_sources(tmp)
        (tmp / "traces").mkdir()
        self.traces = [tmp / "traces" / n for n in NAMES]
        for n in NAMES:
            shutil.copy(INCIDENTS / n, tmp / "traces" / n)
        self.ran: list[tuple[str, tuple[str, ...]]] = []
        self.recorded: dict[tuple[str, tuple[str, ...]], dict[str, set[str]]] = {}
        self.via: dict[tuple[str, tuple[str, ...]], dict[str, set[str]]] = {}

    def gate(self, monkeypatch, cache: bool = True, workers: int = 1):
        monkeypatch.setitem(gate.BUDGETS, "quick", dict(SMALL))
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        gate_cache._functions.cache_clear()
        gate_cache._pieces.cache_clear()
        gate_cache.file_digest.cache_clear()
        store = GateCache.store

        def noted(cache_self, key, checks, ran, via=None, outputs=None):
            part = (checks[0].section, tuple(c.name for c in checks))
            self.ran.append(part)
            self.recorded[part] = {k: set(v) for k, v in (ran or {}).items()}
            self.via[part] = {k: set(v) for k, v in (via or {}).items()}
            return store(cache_self, key, checks, ran, via, outputs)
        monkeypatch.setattr(GateCache, "store", noted)
        self.ran = []
        return gate.run_gate("quick", traces=[str(t) for t in self.traces], workers=workers,
                             cache=str(self.cache) if cache else None)

    def keys(self, monkeypatch) -> dict[str, str]:
        """The static keys of the sections on the model (which record nothing)."""
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        gate_cache._functions.cache_clear()
        gate_cache._pieces.cache_clear()
        gate_cache.file_digest.cache_clear()
        c = GateCache(self.cache, {"budget": "quick"})
        return {s: c.key(s, {}, []) for s in ("prove", "mutants", "explore")}

    def ran_by(self, name: str, qual: str) -> set:
        return {p for p, deps in self.recorded.items() if qual in deps.get(name, set())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("gate-cache"))


@pytest.fixture(scope="module")
def cold(runs):
    return cold_then_plain(runs, lambda: set(runs.ran))


_edit = edit_function


def _choose(runs: Runs, prefix: str, strict: bool = True) -> tuple[str, str]:
    """A function of a file under ``prefix`` that some parts ran (and, with ``strict``,
    not all of them)."""
    count: dict[tuple[str, str], int] = {}
    for deps in runs.recorded.values():
        for name, quals in deps.items():
            if name.startswith(prefix):
                for q in quals:
                    if "<" not in q:
                        count[(name, q)] = count.get((name, q), 0) + 1
    chosen = sorted(k for k, n in count.items() if not strict or n < len(runs.recorded))
    assert chosen, f"no function under {prefix} ran in some parts only"
    return chosen[0]


def test_the_first_run_keeps_every_part_and_the_second_reuses_them_all(runs, cold, monkeypatch):
    first, parts, plain = cold
    assert first.verdict == "pass"
    assert first.cache["reused"] == 0 and first.cache["checks"] == len(first.checks)
    # a replay and the crash cuts of each trace, and the restarts on the cuts' held connection
    assert len(parts) == 2 * len(NAMES) + 1
    again = runs.gate(monkeypatch)
    assert runs.ran == []
    assert again.cache["reused"] == again.cache["checks"] == len(first.checks)
    assert "of" in again.summary() and \
        f"{len(first.checks)} of {len(first.checks)} checks reused from the cache" in again.summary()
    assert plain_report(again.to_json()) == plain_report(first.to_json()) == plain_report(plain.to_json())


@pytest.mark.parametrize("what, prefix, model_keys", [
    ("an implementation function", "impl/", False),
    ("a rule", "model/rules", True),
    ("a property", "model/invariants_", True),
])
def test_a_changed_function_reruns_exactly_the_parts_that_ran_it(runs, cold, monkeypatch,
                                                                  what, prefix, model_keys):
    name, qual = _choose(runs, prefix, strict=prefix != "model/invariants_")
    expected = runs.ran_by(name, qual)
    path = runs.sources[name.split("/")[0]] / name.split("/", 1)[1]
    before_keys = runs.keys(monkeypatch)
    before = _edit(path, qual)
    try:
        after_keys = runs.keys(monkeypatch)
        result = runs.gate(monkeypatch)
        assert set(runs.ran) == expected and expected, f"{what}: {name} {qual}"
        total = result.cache["checks"]
        assert result.cache["reused"] == total - sum(len(p[1]) for p in expected)
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
        assert (before_keys != after_keys) == model_keys       # the model's sections' keys
        if model_keys:
            assert all(before_keys[s] != after_keys[s] for s in before_keys)
    finally:
        path.write_text(before)
    runs.gate(monkeypatch)
    assert runs.ran == []                            # restored: the first entries hold again


def test_a_changed_lemma_reruns_the_proofs_and_not_the_traces(runs, cold, monkeypatch):
    path = runs.sources["conformance"] / "z3" / "lemmas.py"
    lemma = "receipts_follow_phase"
    assert not runs.ran_by("conformance/z3/lemmas.py", lemma)
    before_keys = runs.keys(monkeypatch)
    before = _edit(path, lemma)
    try:
        after_keys = runs.keys(monkeypatch)
        assert all(before_keys[s] != after_keys[s] for s in before_keys)
        runs.gate(monkeypatch)
        assert runs.ran == []
    finally:
        path.write_text(before)


def test_a_changed_trace_reruns_its_parts_only(runs, cold, monkeypatch):
    trace = runs.traces[1]
    before = trace.read_text()
    doc = json.loads(before)
    doc["description"] = doc.get("description", "") + " (changed)"
    trace.write_text(json.dumps(doc, indent=2))
    try:
        runs.gate(monkeypatch)
        tid = doc["id"]
        assert runs.ran and all(any(tid in c for c in names) for _, names in runs.ran)
        assert {s for s, _ in runs.ran} == {"replay", "crash-cuts"}
    finally:
        trace.write_text(before)


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*/*/*.pickle"))


DAMAGE = ("truncated", "garbage", "format", "empty", "not checks")


def _damaged(damage: str, entry: Path, good: bytes) -> bytes:
    return {"truncated": good[:len(good) // 2], "garbage": b"\x00\xffnot a cache entry" * 9,
            "format": good.replace(gate_cache.FORMAT.encode(), b"wgk-gate-cache/0"), "empty": b"",
            "not checks": gate_cache.MAGIC + pickle.dumps({"format": gate_cache.FORMAT,
                                                           "key": entry.parent.name, "deps": {},
                                                           "checks": [Path("/")]}),
            }[damage]


def test_damaged_entries_are_ignored_with_a_warning_each_and_run_again(runs, cold, monkeypatch):
    """Every entry damaged, in turn each way: truncated, garbage, another format, empty, a
    pickle making something else than checks (refused before it is made)."""
    kept = {e: e.read_bytes() for e in _entries(runs.cache)}
    how = {}
    for n, (entry, good) in enumerate(kept.items()):
        how[entry] = DAMAGE[n % len(DAMAGE)]
        entry.write_bytes(_damaged(how[entry], entry, good))
    assert set(how.values()) == set(DAMAGE)
    try:
        result = runs.gate(monkeypatch)
        assert len(runs.ran) == len(cold[1]) and result.verdict == "pass"
        warnings = result.cache["warnings"]
        assert len(warnings) >= len(cold[1])              # one per entry read
        assert all("ignored" in w and "\n" not in w and ".pickle" in w for w in warnings)
        refused = [w for w in warnings if how[Path(w.split()[2])] == "not checks"]
        assert refused and all("pathlib" in w for w in refused)
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
        again = runs.gate(monkeypatch)        # written again, whole
        assert runs.ran == [] and not again.cache["warnings"]
    finally:
        for entry, good in kept.items():
            entry.write_bytes(good)


def test_two_workers_share_the_cache_and_report_the_same(runs, cold, monkeypatch, tmp_path):
    runs.cache, kept = tmp_path / "shared", runs.cache
    try:
        two = runs.gate(monkeypatch, workers=2)          # forked workers write at once
        assert two.cache["reused"] == 0
        stray = next(runs.cache.glob("*/*/")) / ".tmp-left-by-a-killed-gate"
        stray.write_bytes(gate_cache.MAGIC + b"\x80")   # what a kill mid-write leaves
        sent = []
        real = gate.run_parts
        monkeypatch.setattr(gate, "run_parts", lambda parts, *a: (sent.append(len(parts)),
                                                                  real(parts, *a)))
        again = runs.gate(monkeypatch, workers=2)
        assert sent == []                   # every part kept: done here, no worker started
        assert runs.ran == [] and again.cache["reused"] == again.cache["checks"]
        assert not again.cache["warnings"]
        assert list(runs.cache.rglob(".tmp-*")) == [stray]    # none but the planted one
        assert plain_report(two.to_json()) == plain_report(again.to_json()) == plain_report(cold[0].to_json())
    finally:
        runs.cache = kept


def test_the_sections_on_the_model_run_nothing_of_the_implementation():
    """Their keys leave the implementation's function bodies out: that holds while they
    run none of it (recorded on the smallest exploration and one model mutant)."""
    from wgk.conformance.check.explore import Instance
    from wgk.conformance.z3 import mutants
    from wgk.conformance.oracle import mutant_traces
    from wgk.conformance.traces.format import load_traces
    mutant_traces.remember(load_traces([str(INCIDENTS / NAMES[0])]))
    mp = pytest.MonkeyPatch()
    mp.setitem(gate.BUDGETS, "quick", {"explore": [Instance(tasks=1, groups=("core",))],
                                       "mutants": True})
    try:
        with gate_cache.recording() as ran:
            gate._call("explore", "quick", None)
            gate._call("mutants", "quick", None, only={next(iter(mutants.MUTANTS))})
    finally:
        mp.undo()
    assert any(n.startswith("model/") for n in ran)
    assert not [n for n in ran if n.startswith("impl/")]


def test_the_kept_text_leaves_out_only_the_bodies_not_run(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("X = 1\n\n\ndef a():\n    return X\n\n\nclass C:\n    def b(self):\n"
                 "        return 2\n\n    def c(self):\n        return 3\n")
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    kept = gate_cache.kept_text(f, frozenset({"C.b"}))
    assert "X = 1" in kept and "def a():" in kept and "return X" not in kept
    assert "return 2" in kept and "def c(self):" in kept and "return 3" not in kept
    digest = gate_cache.file_digest(f, frozenset({"C.b"}))
    f.write_text(f.read_text().replace("return 3", "return 4").replace("return X", "return 5"))
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    assert gate_cache.kept_text(f, frozenset({"C.b"})) == kept      # bodies not run: no change
    assert gate_cache.file_digest(f, frozenset({"C.b"})) == digest
    f.write_text(f.read_text().replace("return 2", "return 6"))
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    assert gate_cache.kept_text(f, frozenset({"C.b"})) != kept
    assert gate_cache.file_digest(f, frozenset({"C.b"})) != digest
    before = gate_cache.file_digest(f, frozenset())
    f.write_text(f.read_text().replace("X = 1", "X = 7"))          # outside every body
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    assert gate_cache.file_digest(f, frozenset()) != before


def test_a_function_inside_another_is_keyed_by_its_own_body(tmp_path):
    f = tmp_path / "n.py"
    f.write_text("def outer():\n    def inner():\n        return 8\n    return inner\n")
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    alone, both = frozenset({"outer"}), frozenset({"outer", "outer.<locals>.inner"})
    before = gate_cache.file_digest(f, alone), gate_cache.file_digest(f, both)
    f.write_text(f.read_text().replace("return 8", "return 9"))
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()
    assert gate_cache.file_digest(f, alone) == before[0]        # inner did not run
    assert gate_cache.file_digest(f, both) != before[1]


def test_the_command_refuses_a_cache_it_cannot_write(tmp_path, capsys):
    """By the command's ``main`` in this process: an exception escaping it fails the test as
    a traceback would."""
    from wgk.conformance.cli.main import main
    f = tmp_path / "file"
    f.write_text("x")
    for args in (["--cache", str(f)], ["--cache", str(f / "below")],
                 ["--cache", str(f), "--external", "true"]):
        code = main(["gate", "--quick", *args])
        err = capsys.readouterr().err
        assert code == 2 and "--cache" in err and err.count("\n") == 1, err


def test_the_command_refuses_a_cache_scope_without_a_cache(capsys):
    from wgk.conformance.cli.main import main
    code = main(["gate", "--quick", "--cache-scope", "model"])
    err = capsys.readouterr().err
    assert code == 2 and "--cache-scope model: only with --cache" in err and err.count("\n") == 1, err


# --- what a section's child processes run ----------------------------------------------------

CHILD = ("import sys\nfrom wgk.conformance.reports.gate_cache import _digest\n_digest('x')\n"
         "print('ran', flush=True)\nif sys.argv[1:] == ['wait']:\n    import time\n"
         "    time.sleep(60)\n")


def _python_child(*flags: str, env: dict | None = None, check: bool = True) -> None:
    subprocess.run([sys.executable, *flags, "-c", CHILD], check=check, env=env,
                   capture_output=True, timeout=120)


def _killed_child() -> None:
    p = subprocess.Popen([sys.executable, "-c", CHILD, "wait"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ran"
    p.kill()                                  # SIGKILL: no exit handler runs
    p.wait()


def _forked_child() -> None:
    import multiprocessing
    p = multiprocessing.get_context("fork").Process(target=gate_cache._digest, args=("x",))
    p.start()
    p.join()


def _forked_then_killed() -> None:
    import os
    import signal
    pid = os.fork()
    if pid == 0:
        gate_cache._digest("x")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.parametrize("start", [_python_child, _killed_child, _forked_child, _forked_then_killed])
def test_the_functions_children_run_are_recorded(start):
    """A ``python -c`` child, one killed by SIGKILL once it ran, a forked one, a forked one
    killed: each one's functions are noted, none of this process's."""
    with gate_cache.recording_children() as found:
        start()
    assert found["sure"]
    assert "_digest" in found["ran"].get("conformance/reports/gate_cache.py", set())
    assert "test_the_functions_children_run_are_recorded" not in str(found["ran"])


@pytest.mark.parametrize("flags, env", [(("-I",), None), (("-E",), None), (("-S",), None),
                                        ((), {"PATH": "/usr/bin:/bin"})])
def test_a_python_child_that_may_not_load_the_hook_makes_the_recording_unsure(flags, env):
    with gate_cache.recording_children() as found:
        _python_child(*flags, env=env, check=False)
    assert not found["sure"]


def test_a_child_that_is_not_python_and_no_child_leave_the_recording_sure():
    with gate_cache.recording_children() as found:
        subprocess.run(["git", "--version"], check=True, capture_output=True)
    assert found["sure"] and found["ran"] == {}


def test_a_section_with_children_reruns_exactly_when_a_function_its_child_ran_changed(
        tmp_path, monkeypatch):
    """Kept under what its child ran: a change to the function the child ran runs it again,
    a change to one nobody ran does not; a child that may not load the hook makes the part
    depend on every function."""
    sources = copied_sources(tmp_path)
    monkeypatch.setattr(gate_cache, "SOURCES", sources)
    path = sources["conformance"] / "reports" / "gate_cache.py"

    def fresh() -> GateCache:
        gate_cache._functions.cache_clear()
        gate_cache._pieces.cache_clear()
        gate_cache.file_digest.cache_clear()
        return GateCache(tmp_path / "cache", {"budget": "test"})

    from wgk.conformance.reports.gate_report import Check
    for spec, start in (({"child": "python"}, _python_child), ({"child": "fork"}, _forked_child),
                        ({"child": "unsure"}, lambda: _python_child("-E"))):
        c = fresh()
        assert "contract" in gate_cache.CHILDREN and c.traced("contract", spec)
        key = c.key("contract", spec, [])
        made = [Check("contract", "case", "pass", 0.0, "")]
        c.run(key, "contract", spec, lambda: (start(), made)[1])
        assert fresh().lookup(key, "contract") == made
        for qual, reruns in (("kept_text", spec["child"] == "unsure"), ("_digest", True)):
            before = _edit(path, qual)
            try:
                assert (fresh().lookup(key, "contract") is None) == reruns, (spec, qual)
            finally:
                path.write_text(before)
        assert fresh().lookup(key, "contract") == made


# --- what a warm run does not do again -------------------------------------------------------


def test_a_trace_text_the_schema_passed_is_not_checked_again_and_any_other_is(tmp_path,
                                                                             monkeypatch):
    """Kept in the cache by its text's digest: the same text skips the schema (nothing is
    validated), a changed text is validated and a bad one still refused; a damaged file of
    kept verdicts is read as none."""
    from wgk.conformance.traces import format as trace_format
    good = INCIDENTS / NAMES[0]
    bad = tmp_path / "bad.json"
    doc = json.loads(good.read_text())
    doc["steps"][0]["no-such-field"] = 1
    bad.write_text(json.dumps(doc))
    c = GateCache(tmp_path / "cache", {"budget": "test"})
    calls = []
    real = trace_format.schema_errors
    monkeypatch.setattr(trace_format, "schema_errors", lambda d: calls.append(1) or real(d))
    for expected in (1, 0):
        with c.schema_verdicts():
            trace_format.load_trace(good)
        assert len(calls) == expected
        calls.clear()
    with c.schema_verdicts():
        with pytest.raises(trace_format.TraceError):
            trace_format.load_trace(bad)
        assert calls
    assert trace_format.SCHEMA_PASSED is None            # only while inside
    assert trace_format.schema_digest(good.read_bytes()) != trace_format.schema_digest(
        good.read_bytes() + b" ")
    (tmp_path / "cache" / "schema-passed.json").write_text("{not json")
    calls.clear()
    with c.schema_verdicts():
        trace_format.load_trace(good)
    assert calls


def test_on_several_processes_a_warm_load_checks_no_unchanged_trace_and_a_changed_one_again(
        tmp_path, monkeypatch):
    """The gate loads its traces on several processes (``load_traces`` with workers, the
    schema checked ahead on forked ones): the verdicts checked there are kept too, so the
    second load checks no trace's schema, while a trace whose bytes changed is checked again
    and its error is the one given without the cache."""
    from wgk.conformance.traces import format as trace_format
    folder = tmp_path / "traces"
    folder.mkdir()
    for n in NAMES:
        shutil.copy(INCIDENTS / n, folder / n)
    monkeypatch.setattr(trace_format, "AHEAD_FROM", 2)          # ahead on a fork for so few
    counted = tmp_path / "checked"
    real = trace_format.schema_errors

    def counting(doc):                 # counted in a file: the forked processes count too
        with counted.open("a") as out:
            out.write("x")
        return real(doc)
    monkeypatch.setattr(trace_format, "schema_errors", counting)

    def checks(c: GateCache) -> int:
        counted.write_text("")
        with c.schema_verdicts():
            trace_format.load_traces([folder], workers=2)
        return len(counted.read_text())
    c = GateCache(tmp_path / "cache", {"budget": "test"})
    assert checks(c) == len(NAMES)
    assert checks(c) == 0
    assert checks(GateCache(tmp_path / "cache", {"budget": "test"})) == 0    # a later run
    changed = folder / NAMES[-1]
    doc = json.loads(changed.read_text())
    doc["steps"][0]["no-such-field"] = 1
    changed.write_text(json.dumps(doc))
    with pytest.raises(trace_format.TraceError) as plain:
        trace_format.load_traces([folder], workers=2)
    counted.write_text("")
    with c.schema_verdicts(), pytest.raises(trace_format.TraceError) as warm:
        trace_format.load_traces([folder], workers=2)
    assert len(counted.read_text()) == 1                         # that trace alone, again
    assert str(warm.value) == str(plain.value) and "no-such-field" in str(warm.value)


def test_the_set_up_by_kind_is_kept_kind_by_kind_and_found_again(tmp_path, monkeypatch):
    """``Context.kind_setup`` is ``kind_setup``'s value, read back from the cache in a later
    run without running a rule; a damaged file is found again, with a one-line warning (a
    changed kind: ``test_gate_mutants_walk``)."""
    from wgk.conformance.reports import gate_mutants
    from wgk.conformance.z3 import transition as tr
    monkeypatch.setattr(tr, "_CACHE", {})
    first = gate_mutants.Context(tmp_path).kind_setup(1)
    assert first == json.loads(json.dumps(gate_mutants.kind_setup(1)))
    found = []
    real = tr._logs_by_kind
    monkeypatch.setattr(tr, "_logs_by_kind", lambda graph, ids, sem, kinds=None, around=None:
                        found.append(kinds) or real(graph, ids, sem, kinds, around))
    monkeypatch.setattr(tr, "_CACHE", {})
    assert gate_mutants.Context(tmp_path).kind_setup(1) == first and found == []
    kept = next((tmp_path / "mutants").glob("model-set-up-*.json"))
    kept.write_text("[damaged")
    monkeypatch.setattr(tr, "_CACHE", {})
    ctx = gate_mutants.Context(tmp_path)
    assert ctx.kind_setup(1) == first and len(found) == 1
    assert len(ctx.warnings) == 1 and "ignored" in ctx.warnings[0] and "\n" not in ctx.warnings[0]


def test_a_replay_is_kept_under_the_model_run_and_reruns_only_when_that_run_changes(
        runs, cold, monkeypatch):
    """A replay reads the rules only through the model's run of its trace: a rule edited
    without changing any decision, projection or verdict along the trace leaves it reused
    (the crash cuts, keyed by the rule's text, run again); an edit that changes the run
    re-runs exactly the replays whose run changed, and the planted bug is reported."""
    from wgk.model import rules_attempt
    path = runs.sources["model"] / "rules_attempt.py"
    replays = {p for p in cold[1] if p[0] == "replay"}
    assert replays and all({"dispatch", "after_failure"} <= runs.via[p]["model/rules_attempt.py"]
                           for p in replays)
    assert not any("dispatch" in runs.recorded[p].get("model/rules_attempt.py", ())
                   for p in replays)
    cuts = runs.ran_by("model/rules_attempt.py", "dispatch")
    assert cuts and {s for s, _ in cuts} == {"crash-cuts"}
    before = _edit(path, "dispatch")                 # the same behaviour
    try:
        result = runs.gate(monkeypatch)
        assert set(runs.ran) == cuts
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
    finally:
        path.write_text(before)
    loaded = gate.load_traces([str(t) for t in runs.traces])
    unplanted = {t.id: gate_cache.model_run(t) for t in loaded}
    # the bug planted in the code that runs (the keys read the copy: its text edited too):
    # a dispatch after a failed or lost attempt is not counted as a retry
    head = "def after_failure(t) -> Any:\n"
    assert head in before
    path.write_text(before.replace(head, head + "    _planted = 1\n", 1))
    monkeypatch.setattr(rules_attempt, "after_failure", lambda t: False)
    try:
        changed = {t.id for t in loaded if gate_cache.model_run(t) != unplanted[t.id]}
        assert changed and len(changed) < len(runs.traces)
        result = runs.gate(monkeypatch)
        assert {p for p in runs.ran if p[0] == "replay"} == \
            {p for p in replays if p[1][0] in changed}
        failed = {c.name for c in result.checks if c.section == "replay" and c.verdict == "fail"}
        assert failed == changed
    finally:
        path.write_text(before)
        monkeypatch.undo()
    runs.gate(monkeypatch)
    assert runs.ran == []                  # restored: the first entries hold again


def test_a_rule_run_outside_the_model_run_stays_a_dependency():
    """``recording_model_run`` parts the rule-file functions: one run under the model's run of
    a trace (a method of ``ModelSystem`` below it) is checked through that run's digest; the
    same function called by other code, here or in another thread, stays a dependency."""
    import threading
    from wgk.conformance.oracle.systems import ModelSystem
    from wgk.model import rules_attempt
    trace = gate.load_traces([str(INCIDENTS / NAMES[1])])[0]     # two dispatches
    with gate_cache.recording_model_run() as (ran, via):
        m = ModelSystem(trace)
        for step in trace.steps:
            m.apply(step)
    assert "dispatch" in via["model/rules_attempt.py"]
    assert "dispatch" not in ran.get("model/rules_attempt.py", set())
    assert any(n.startswith("conformance/oracle/") for n in ran)
    t = m.state.tasks[0]
    with gate_cache.recording_model_run() as (ran, via):
        m = ModelSystem(trace)
        rules_attempt.after_failure(t)                            # not under the model's run
        m.apply(trace.steps[0])
    assert "after_failure" in ran["model/rules_attempt.py"]
    assert "dispatch" in via["model/rules_attempt.py"]
    with gate_cache.recording_model_run() as (ran, via):
        worker = threading.Thread(target=lambda: ModelSystem(trace).apply(trace.steps[0]))
        worker.start()
        worker.join()
    assert "dispatch" in ran["model/rules_attempt.py"] and not via
    with gate_cache.recording_model_run() as (ran, via):
        ModelSystem(trace).possible(trace.steps[0])             # tried off the trace, undone
    assert "dispatch" in ran["model/rules_attempt.py"]
    assert "dispatch" not in via.get("model/rules_attempt.py", set())
