"""wgk gate --cache, inside a part: the probes' and the fuzzer's systems answered call by call
(``gate_cache_memo``). A changed implementation function makes run again exactly the systems
(a probed trace, a fuzz example) whose calls ran it, from the first such call; the others are
answered from the record; the report is the same as without the cache; a damaged record is
ignored with a one-line warning."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wgk.conformance.reports import gate, gate_cache, gate_cache_memo

from gate_sources import cold_then_plain, copied_sources, edit_function, plain_report

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
NAMES = ["10-stale-capability-rejected.json", "16-two-dispatchers-one-attempt.json"]
BUDGET = {"probes": {"traces": 2}, "fuzz": {"examples": 6, "steps": 8, "tasks": 2,
                                            "shapes": ["chain"]}}


class Runs:
    def __init__(self, tmp: Path):
        self.tmp, self.cache = tmp, tmp / "cache"
        self.sources = copied_sources(tmp)
        (tmp / "traces").mkdir()
        self.traces = [tmp / "traces" / n for n in NAMES]
        for n in NAMES:
            shutil.copy(INCIDENTS / n, tmp / "traces" / n)
        self.systems: list = []

    def gate(self, monkeypatch, cache: bool = True):
        monkeypatch.setitem(gate.BUDGETS, "quick", dict(BUDGET))
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        gate_cache._functions.cache_clear()
        gate_cache._pieces.cache_clear()
        gate_cache.file_digest.cache_clear()
        self.systems = []
        monkeypatch.setattr(gate_cache_memo, "SEEN", self.systems)
        return gate.run_gate("quick", traces=[str(t) for t in self.traces], workers=1,
                             cache=str(self.cache) if cache else None,
                             counterexamples=str(self.tmp / "counterexamples"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("gate-memo"))


@pytest.fixture(scope="module")
def cold(runs):
    return cold_then_plain(runs, lambda: [(s.real_from, s.functions()) for s in runs.systems])


_edit = edit_function


def _impl_counts(made) -> dict[tuple[str, str], int]:
    """How many of the systems ``made`` ran each implementation function (by file and name)."""
    count: dict[tuple[str, str], int] = {}
    for _, functions in made:
        for name, quals in functions.items():
            if name.startswith("impl/"):
                for q in quals:
                    if "<" not in q:
                        count[(name, q)] = count.get((name, q), 0) + 1
    return count


def test_without_a_record_every_system_runs_and_the_report_is_the_plain_one(runs, cold):
    first, made, plain = cold
    assert first.verdict == "pass", first.summary()
    assert len(made) == 2 + 6                  # one per probed trace, one per fuzz example
    # each ran for real from its first call not made before (its graph, a prefix of steps
    # another example sent first, are answered from the record being made)
    assert all(real_from is not None for real_from, _ in made)
    assert plain_report(first.to_json()) == plain_report(plain.to_json())


def test_nothing_changed_every_system_is_answered_from_the_record(runs, cold, monkeypatch):
    first, made, _ = cold
    # the parts themselves kept: nothing runs, no system is made
    again = runs.gate(monkeypatch)
    assert runs.systems == [] and again.cache["reused"] == again.cache["checks"]
    # the parts' own entries gone: the parts run, their systems answered from the record
    for entry in runs.cache.rglob("*.pickle"):
        if "memo" not in entry.parts:
            entry.unlink()
    again = runs.gate(monkeypatch)
    assert len(runs.systems) == len(made)
    assert all(s.real_from is None for s in runs.systems)
    assert plain_report(again.to_json()) == plain_report(first.to_json())


def test_a_changed_module_reruns_exactly_the_systems_that_ran_it(runs, cold, monkeypatch):
    first, made, _ = cold
    count = _impl_counts(made)
    # a function some systems ran and others did not, of both sections if there is one
    some = sorted((k for k, n in count.items() if 1 < n < len(made)), key=lambda k: -count[k])
    assert some, "no implementation function ran in some systems only"
    name, qual = some[0]
    expected = [n for n, (_, functions) in enumerate(made) if qual in functions.get(name, ())]
    path = runs.sources["impl"] / name.split("/", 1)[1]
    before = _edit(path, qual)
    fuzzed: list = []
    from wgk.conformance.reports import gate_traces
    real_fuzz = gate_traces.run_fuzz
    monkeypatch.setattr(gate_traces, "run_fuzz", lambda *a, **kw: fuzzed.append(1) or
                        real_fuzz(*a, **kw))
    try:
        result = runs.gate(monkeypatch)
        assert len(runs.systems) == len(made)
        rerun = [n for n, s in enumerate(runs.systems) if s.real_from is not None]
        assert rerun == expected and 0 < len(rerun) < len(made), (name, qual)
        assert plain_report(result.to_json()) == plain_report(first.to_json())
        # each system run again ran the changed function after the calls answered before it
        for n in rerun:
            assert qual in runs.systems[n].functions().get(name, set())
        # the fuzzer's model side (its generation, the model's steps, the oracle) did not run:
        # every example's system answered its calls as kept (``kept_run``)
        assert fuzzed == []
    finally:
        path.write_text(before)


def test_a_result_given_again_keeps_its_part_depending_on_what_its_run_read(runs, cold,
                                                                           monkeypatch):
    """A part run again after an implementation function changed gives its kept results
    (``kept_run``: the model's side not run) and is kept with what ran: with the functions of
    the model's side each kept result's run ran too. So a rule that side ran, changed next
    (the implementation still changed), runs the part again: kept with only what ran to give
    the results again, the part would be given again with the verdicts of the rule before."""
    first, made, _ = cold
    kept = [t for path in sorted((runs.cache / "memo").rglob("*"))
            if path.is_file() and not path.name.startswith(".")
            for t in gate_cache_memo.Memo(path, lambda *a: True, []).transcripts.values()]
    rules = sorted((name, q) for t in kept for name, quals in t[3].items()
                   if gate_cache.RULE_FILES.fullmatch(name) for q in quals if "<" not in q)
    assert kept and rules
    count = _impl_counts(made)
    name, qual = max(count, key=lambda k: (count[k], k))
    path = runs.sources["impl"] / name.split("/", 1)[1]
    rule = runs.sources["model"] / rules[0][0].split("/", 1)[1]
    before, before_rule = _edit(path, qual), None
    try:
        runs.gate(monkeypatch)                    # the implementation changed: parts run again
        before_rule = _edit(rule, rules[0][1])
        result = runs.gate(monkeypatch)
        assert result.cache["reused"] < result.cache["checks"], rules[0]
        assert plain_report(result.to_json()) == plain_report(first.to_json())
    finally:
        path.write_text(before)
        if before_rule is not None:
            rule.write_text(before_rule)


def test_a_damaged_record_is_ignored_with_a_one_line_warning(runs, cold, monkeypatch):
    first, made, _ = cold
    records = sorted((runs.cache / "memo").rglob("*"))
    records = [p for p in records if p.is_file()]
    assert records
    for p in records:
        p.write_bytes(b"garbage")
    for entry in runs.cache.rglob("*.pickle"):
        if "memo" not in entry.parts:
            entry.unlink()
    result = runs.gate(monkeypatch)
    assert [s.real_from for s in runs.systems] == [r for r, _ in made]
    warned = [w for w in result.cache["warnings"] if "cache record" in w]
    assert len(warned) == len(records) and all("\n" not in w and "ignored" in w for w in warned)
    assert plain_report(result.to_json()) == plain_report(first.to_json())


def test_a_record_keeps_only_the_calls_still_reached_and_reads_back(tmp_path):
    path = tmp_path / "record"
    memo = gate_cache_memo.Memo(path, lambda name, quals, digest: True, [])
    a, b = memo.intern({"impl/x.py": (["f"], "1")}), memo.intern({"impl/x.py": (["g"], "2")})
    memo.nodes = [{"new": [None, a, 1]}, {"apply 1": [{"d": 1}, b, 2]}, {}, {"orphan": [0, b, 2]}]
    memo.changed = True
    memo.save()
    again = gate_cache_memo.Memo(path, lambda name, quals, digest: digest == "1", [])
    assert again.nodes == [{"new": [None, 0, 1]}, {"apply 1": [{"d": 1}, 1, 2]}, {}]
    assert again.valid(0) and not again.valid(1)
    warnings: list[str] = []
    path.write_bytes(b"\x80\x04garbage")
    assert gate_cache_memo.Memo(path, lambda *a: True, warnings).nodes == [{}]
    assert len(warnings) == 1 and "ignored" in warnings[0] and "\n" not in warnings[0]


class _Fake:
    """A system under test answering each request with its key (what the record keeps)."""

    def __init__(self, source):
        self.sent = 0

    def apply(self, step):
        self.sent += 1
        return {"decision": "rejected", "key": step["request"]["key"]}

    def project(self):
        return {"sent": self.sent}

    def close(self):
        pass


def test_a_kept_run_is_given_only_while_the_system_answers_its_calls_as_before(tmp_path,
                                                                               monkeypatch):
    from wgk.conformance.oracle import coverage
    monkeypatch.setattr(coverage.Shadow, "of", staticmethod(lambda source, initial: None))
    path, runs = tmp_path / "record", []

    def run(make):
        system = make({"tasks": []})
        answers = [system.apply({"request": {"key": k}}) for k in ("a", "b")]
        runs.append(1)
        return {"answers": answers, "after": system.project()}

    def once(model: str = "m"):
        with gate_cache_memo.active(path, lambda *a: True, [], model) as memo:
            got = gate_cache_memo.kept_run("fake", ["inputs"], {"tasks": []},
                                           gate_cache_memo.memoized(_Fake), run)
        return got, memo
    first, _ = once()
    assert len(runs) == 1 and first["after"] == {"sent": 2}
    again, memo = once()
    assert again == first and len(runs) == 1 and memo.transcripts_used == 1
    # the model's side changed (another digest): it runs
    once("other")
    assert len(runs) == 2
    # an answer not the one kept (here the kept one is changed): it runs again
    memo = gate_cache_memo.Memo(path, lambda *a: True, [])
    for systems, *_ in memo.transcripts.values():
        systems[0][1][1][2] = {"decision": "applied"}
    memo.changed = True
    memo.save()
    third, memo = once()
    assert third == first and len(runs) == 3 and memo.transcripts_used == 0


class _Keeping(_Fake):
    """A system that changes the answers it gave once it answers the next call (as one
    handing out its own cached objects would)."""

    def __init__(self, source):
        super().__init__(source)
        self.given: list[dict] = []

    def apply(self, step):
        for earlier in self.given:
            earlier["changed-after"] = True
        self.given.append(super().apply(step))
        return self.given[-1]


def test_answers_changed_after_they_were_given_leave_the_record_as_it_was(tmp_path, monkeypatch):
    from wgk.conformance.oracle import coverage
    monkeypatch.setattr(coverage.Shadow, "of", staticmethod(lambda source, initial: None))
    path = tmp_path / "record"
    expected = [{"decision": "rejected", "key": k} for k in "abc"]

    def run(make):
        system, out = make({"tasks": []}), []
        for k in "abc":
            got = system.apply({"request": {"key": k}})
            out.append(dict(got))
            got["changed-by-the-caller"] = True
        return {"answers": out}

    def once():
        with gate_cache_memo.active(path, lambda *a: True, [], "m") as memo:
            got = gate_cache_memo.kept_run("fake", ["inputs"], {"tasks": []},
                                           gate_cache_memo.memoized(_Keeping), run)
        return got, memo
    first, _ = once()
    assert first == {"answers": expected}
    memo = gate_cache_memo.Memo(path, lambda *a: True, [])
    [(systems, *_)] = memo.transcripts.values()
    assert [answer for _, _, answer in systems[0][1]] == expected
    node, along = 0, []
    while memo.nodes[node]:
        [(answer, _, node)] = memo.nodes[node].values()
        along.append(answer)
    assert along == [None] + expected
    again, memo = once()
    assert again == first and memo.transcripts_used == 1


def test_a_kept_run_of_several_systems_makes_each_again_from_its_own_source(tmp_path,
                                                                           monkeypatch):
    from wgk.conformance.oracle import coverage
    monkeypatch.setattr(coverage.Shadow, "of", staticmethod(lambda source, initial: None))
    path, runs, sources = tmp_path / "record", [], []

    class Seen(_Fake):
        def __init__(self, source):
            super().__init__(source)
            sources.append(source)

    def run(make):                      # two examples, each on a graph of its own
        answers = []
        for n in (1, 2):
            system = make({"tasks": [n]})
            answers.append(system.apply({"request": {"key": f"k{n}"}}))
        runs.append(1)
        return answers

    def once():
        with gate_cache_memo.active(path, lambda *a: True, [], "m") as memo:
            got = gate_cache_memo.kept_run("fuzz", ["seed 0"], None,
                                           gate_cache_memo.memoized(Seen), run)
        return got, memo
    first, _ = once()
    sources.clear()
    again, memo = once()
    assert again == first and len(runs) == 1 and memo.transcripts_used == 1
    # made again from the record alone (each answered without a real system)
    assert sources == []
    memo = gate_cache_memo.Memo(path, lambda *a: True, [])
    for systems, *_ in memo.transcripts.values():
        assert [src for src, _ in systems] == [{"tasks": [1]}, {"tasks": [2]}]
        systems[1][1][0][2] = {"decision": "applied"}     # the second example's answer
    memo.changed = True
    memo.save()
    third, memo = once()
    assert third == first and len(runs) == 2 and memo.transcripts_used == 0


def test_a_failing_run_is_not_kept(tmp_path, monkeypatch):
    from wgk.conformance.oracle import coverage
    monkeypatch.setattr(coverage.Shadow, "of", staticmethod(lambda source, initial: None))
    path, runs = tmp_path / "record", []

    def run(make):
        make({"tasks": []}).apply({"request": {"key": "a"}})
        runs.append(1)
        return {"verdict": "fail"}
    for _ in range(2):
        with gate_cache_memo.active(path, lambda *a: True, [], "m"):
            gate_cache_memo.kept_run("fuzz", [], None, gate_cache_memo.memoized(_Fake), run,
                                     keep=lambda r: r["verdict"] == "pass")
    assert len(runs) == 2
