"""``wgk gate --external CMD --cache DIR``: the checks that do not run the kernel under test
(the sections on the model) are kept and reused under the keys the gate in process gives
them, so one cache serves both gates; a check over the protocol is never kept nor reused
(a planted fault of the kernel is caught with a warm cache); several gates and writers may
share one DIR at once.
"""
from __future__ import annotations

import json
import multiprocessing
import shutil
import sys
from pathlib import Path

import pytest

from wgk.conformance.check.explore import Instance
from wgk.conformance.oracle.external_runs import Kernel
from wgk.conformance.reports import gate, gate_cache
from wgk.conformance.reports.gate_cache import GateCache
from wgk.conformance.reports.gate_report import Check
from wgk.conformance.z3 import mutants as mutants_mod

from gate_sources import plain_report, trace_with_rejected_dispatch

ROOT = Path(__file__).resolve().parents[1]
LOST = ROOT / "traces" / "incidents" / "05-lost-response-retried.json"
FAKE = Path(__file__).resolve().parent / "data" / "fake_kernel.py"
SERVED = f"{sys.executable} -m wgk.impl.serve"
#: The sections on the model in the small budget below (the others run the kernel).
MODEL = {"explore", "mutants"}


def fake(mode: str) -> str:
    return f"{sys.executable} {FAKE} {mode}"


def small(monkeypatch, mutant: bool = False) -> None:
    """The quick budget cut to one small exploration, the replay and (``mutant``) the
    model's mutants cut to one."""
    budget = {"explore": [Instance(tasks=1, groups=("core",))], "replay": True}
    if mutant:
        name = "broker-drops-worktree-context"
        monkeypatch.setattr(mutants_mod, "MUTANTS", {name: mutants_mod.MUTANTS[name]})
        budget["mutants"] = True
    monkeypatch.setitem(gate.BUDGETS, "quick", budget)


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Path:
    """A cache folder holding only what a cache finds once about wgk's sources (the functions
    that run at import, each file's functions): copied into each new cache of these tests,
    which then start cold of every check without finding those again (a fresh interpreter
    importing every module, traced)."""
    where = tmp_path_factory.mktemp("found")
    GateCache(where, {})
    return where


def new_cache(found: Path, where: Path) -> Path:
    where.mkdir()
    for name in ("imports.json", "functions.json"):
        if (found / name).exists():
            shutil.copy(found / name, where / name)
    return where


def run(traces: list[Path], cache: Path | None = None, command: str | None = None,
        workers: int = 1, scope: str = "all"):
    return gate.run_gate("quick", traces=[str(t) for t in traces], workers=workers,
                         external=Kernel(command) if command else None,
                         cache=str(cache) if cache else None, cache_scope=scope)


def checks_of(result, sections: set[str]) -> int:
    return sum(len(s.checks) for s in result.sections_run if s.name in sections)


def kept_sections(cache: Path) -> dict[Path, set[str]]:
    """Each entry of the cache and the sections of the checks it holds."""
    return {p: {c.section for c in gate_cache._entry(p.read_bytes(), p.parent.name)[0]}
            for p in cache.glob("*/*/*.pickle")}


def test_one_cache_serves_both_gates_for_exactly_the_checks_on_the_model(monkeypatch, tmp_path,
                                                                          found):
    small(monkeypatch, mutant=True)
    warm = new_cache(found, tmp_path / "warm")
    # the gate in process keeping only the sections on the model (as CI runs it)
    inside = run([LOST], warm, scope="model")
    assert inside.verdict == "pass" and inside.cache["reused"] == 0
    assert set().union(*kept_sections(warm).values()) == MODEL
    assert plain_report(inside.to_json()) == plain_report(run([LOST]).to_json())
    plain = run([LOST], command=SERVED)
    assert plain.verdict == "pass" and plain.cache is None
    over = run([LOST], warm, SERVED, workers=2)
    model = checks_of(over, MODEL)
    assert model and over.cache["reused"] == model
    assert over.cache["sections"] == {s.name: len(s.checks) for s in over.sections_run
                                      if s.name in MODEL}
    assert checks_of(over, {"replay"}) and not over.cache["warnings"]
    assert "checks reused from the cache" in over.summary()
    assert plain_report(over.to_json()) == plain_report(plain.to_json())
    # the other way round: a cache the gate over the protocol wrote serves the gate in process
    cold = new_cache(found, tmp_path / "cold")
    first = run([LOST], cold, SERVED)
    assert first.cache["reused"] == 0
    assert plain_report(first.to_json()) == plain_report(plain.to_json())
    assert set().union(*kept_sections(cold).values()) == MODEL
    again = run([LOST], cold)                   # every section kept: the replay now too
    assert again.cache["sections"] == over.cache["sections"]
    assert plain_report(again.to_json()) == plain_report(inside.to_json())


def test_a_planted_fault_of_the_kernel_is_caught_with_a_warm_cache(monkeypatch, tmp_path, found):
    """The cache warmed by the gate in process and by the honest kernel's gate (whose
    replay passes) holds no check over the protocol: the kernel that answers wrongly fails."""
    small(monkeypatch)
    planted = trace_with_rejected_dispatch(tmp_path)
    cache = new_cache(found, tmp_path / "cache")
    assert run([planted], cache).verdict == "pass"
    before = kept_sections(cache)
    honest = run([planted], cache, fake("honest"))
    assert honest.verdict == "pass" and honest.cache["sections"] == {"explore": 1}
    written = {p: s for p, s in kept_sections(cache).items() if p not in before}
    assert all(s <= MODEL for s in written.values()), written
    wrong = run([planted], cache, fake("diverge"))
    assert wrong.verdict == "fail" and wrong.cache["sections"] == {"explore": 1}
    [replay] = [s for s in wrong.sections_run if s.name == "replay"]
    assert replay.verdict == "fail" and "decision on dispatch b" in replay.checks[0].detail


def _gate_to(path: str, cache: str) -> None:
    result = run([LOST], Path(cache), SERVED)
    Path(path).write_text(json.dumps(result.to_json()))


def test_two_gates_over_the_protocol_share_one_cache_at_once(monkeypatch, tmp_path, found):
    small(monkeypatch)
    cache = new_cache(found, tmp_path / "cache")
    ctx = multiprocessing.get_context("fork")
    outs = [tmp_path / f"{n}.json" for n in range(2)]
    procs = [ctx.Process(target=_gate_to, args=(str(o), str(cache))) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0, 0]
    one, two = (json.loads(o.read_text()) for o in outs)
    assert one["verdict"] == two["verdict"] == "pass"
    assert not one["cache"]["warnings"] and not two["cache"]["warnings"]
    assert plain_report(one) == plain_report(two)
    assert not list(cache.rglob(".tmp-*"))          # every write renamed into place
    after = run([LOST], cache, SERVED)
    assert after.cache["sections"] == {"explore": 1} and not after.cache["warnings"]
    assert plain_report(after.to_json()) == plain_report(one)


#: Checks big enough that a write takes many system calls (a torn one would be seen).
BIG = [Check("explore", f"check {n}", "pass", 0.0, "x" * 400) for n in range(1500)]


def _writer(store: GateCache, key: str, rounds: int) -> None:
    for n in range(rounds):
        store.store(key, BIG[:len(BIG) - n % 7], None)     # one entry file, rewritten


def _reader(store: GateCache, key: str, rounds: int, out: str) -> None:
    seen = []
    for _ in range(rounds):
        found = store.lookup(key, "explore")
        seen.append(None if found is None else len(found))
    Path(out).write_text(json.dumps({"seen": seen, "warnings": store.warnings}))


def test_writers_and_readers_at_once_never_see_a_torn_entry(tmp_path, found):
    """Four processes rewrite one entry while two read it: every read is a whole entry
    (one of those written) or none yet, never a damaged one."""
    store = GateCache(new_cache(found, tmp_path / "cache"), {"budget": "concurrent"})
    key = store.key("explore", {"only": {0}}, [])
    ctx = multiprocessing.get_context("fork")
    outs = [str(tmp_path / f"read-{n}.json") for n in range(2)]
    procs = [ctx.Process(target=_writer, args=(store, key, 20)) for _ in range(4)] + \
        [ctx.Process(target=_reader, args=(store, key, 60, o)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    whole = {len(BIG) - n for n in range(7)}
    reads = [json.loads(Path(o).read_text()) for o in outs]
    assert all(not r["warnings"] for r in reads), [r["warnings"][:2] for r in reads]
    seen = [n for r in reads for n in r["seen"]]
    assert set(seen) <= whole | {None} and set(seen) & whole
    assert not list((tmp_path / "cache").rglob(".tmp-*"))
    entries = list((tmp_path / "cache").glob("*/*/*.pickle"))
    assert len(entries) == 1
    assert len(gate_cache._entry(entries[0].read_bytes(), key)[0]) in whole
