"""The implementation-mutant catalogue: anchors that cannot rot, and a machinery that can
say both "killed" and "survived".

The whole catalogue is not run here (``wgk mutants --impl`` does that, and the deep
gate); two cheap mutants run end to end on one trace, and the mutant that changes
nothing is reported as survived.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.conformance.oracle.impl_mutants import (
    AREAS, CATEGORIES, IDENTITY, PER_CATEGORY, AnchorError, ImplMutant, Patch, check_anchors,
    impl_root, materialize,
)
from wgk.conformance.oracle.impl_mutants_catalogue import (
    GATE_BLIND_SEVEN, IMPL_MUTANTS, ISSUE_33, MUTANTS_BY_NAME, by_category,
)
from wgk.conformance.reports.impl_mutants import impl_sections, run_mutant

ROOT = Path(__file__).resolve().parents[1]
TRACE = str(ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json")


def test_every_anchor_matches_exactly_once_and_the_patched_files_compile():
    assert check_anchors(IMPL_MUTANTS) == []


def test_the_catalogue_covers_every_category_with_at_least_28_named_mutants():
    assert len(IMPL_MUTANTS) >= 28
    assert len(MUTANTS_BY_NAME) == len(IMPL_MUTANTS), "names are unique"
    for m in IMPL_MUTANTS:
        assert m.category in CATEGORIES and m.area in AREAS and m.doc and m.breaks and m.patches, m.name
    assert set(GATE_BLIND_SEVEN) <= set(MUTANTS_BY_NAME)


def test_every_category_holds_at_least_three_mutants_and_issue_33s_thirteen_are_filed():
    filed = by_category()
    assert list(filed) == list(CATEGORIES)
    for c, ms in filed.items():
        assert len(ms) >= PER_CATEGORY, (c, [m.name for m in ms])
    assert len(ISSUE_33) == 13 and set(ISSUE_33) <= set(MUTANTS_BY_NAME)
    assert sum(len(ms) for ms in filed.values()) == len(IMPL_MUTANTS)


def test_the_report_gives_the_kill_rate_per_category_and_the_check_that_killed_each():
    from wgk.conformance.cli.impl_mutants_view import summary
    from wgk.conformance.reports.impl_mutants import CatalogueRun, MutantRun
    a, b, c = (MUTANTS_BY_NAME[n] for n in ("token-not-checked", "role-label-trusted",
                                            "land-without-cas"))
    run = CatalogueRun("quick", None, [MutantRun(a, "killed", 1.0, "probes", "t1", "x"),
                                       MutantRun(b, "survived", 1.0),
                                       MutantRun(c, "killed", 1.0, "replay", "t2", "y")], 3.0)
    cats = run.to_json()["categories"]
    assert list(cats) == ["authority", "git-effects"]
    assert cats["authority"]["killed"] == 1 and cats["authority"]["total"] == 2
    assert cats["authority"]["rate"] == 0.5
    assert cats["authority"]["mutants"] == {a.name: "probes: t1", b.name: "survived"}
    text = summary(run)
    assert "authority: 1 of 2 killed (50%)" in text and "effects on git: 1 of 1 killed (100%)" in text
    assert f"killed   {a.name} [{a.area}] by probes: t1" in text


def test_a_drifted_anchor_fails_loudly_naming_the_mutant_and_the_file():
    gone = ImplMutant("drifted", "storage", "x", "y", (Patch("storage/store.py", "BEGIN NEVER-THERE", "x"),))
    twice = ImplMutant("twice", "storage", "x", "y", (Patch("storage/store.py", "self.conn", "self.c"),))
    [p1], [p2] = check_anchors([gone]), check_anchors([twice])
    assert "drifted: impl/storage/store.py" in p1 and "occurs 0 times" in p1
    assert "twice: impl/storage/store.py" in p2 and "must occur exactly once" in p2
    with pytest.raises(AnchorError):
        materialize(gone.patches, Path("/nonexistent-never-written"), gone.name)


def test_a_mutant_is_planted_in_a_copy_never_in_the_installed_source(tmp_path):
    m = MUTANTS_BY_NAME["begin-deferred"]
    before = (impl_root() / "storage" / "store.py").read_text()
    copy = materialize(m.patches, tmp_path, m.name)
    assert "BEGIN DEFERRED" in (copy / "wgk" / "impl" / "storage" / "store.py").read_text()
    assert (impl_root() / "storage" / "store.py").read_text() == before
    # a child process with the copy first on PYTHONPATH imports the copy as wgk.impl
    from wgk.conformance.oracle.impl_mutants import child_env
    out = subprocess.run([sys.executable, "-c", "import wgk.impl, wgk.model; "
                          "print(wgk.impl.__file__); print(wgk.model.__file__)"],
                         env=child_env(copy), capture_output=True, text=True, check=True).stdout
    impl_file, model_file = out.split()
    assert Path(impl_file).resolve().is_relative_to(tmp_path.resolve())
    assert not Path(model_file).resolve().is_relative_to(tmp_path.resolve())


def test_the_model_only_sections_are_not_run_for_an_implementation_mutant():
    assert impl_sections(["prove", "mutants", "explore", "contract", "replay", "crash-cuts", "races",
                          "fuzz", "trace-matrix", "new-section"]) == \
        ["replay", "contract", "races", "fuzz", "new-section", "crash-cuts"]


def test_the_mutant_that_changes_nothing_survives():
    r = run_mutant(IDENTITY, "quick", ["replay", "crash-cuts"], traces=[TRACE], timeout=300)
    assert r.verdict == "survived", r.to_json()
    assert [s["verdict"] for s in r.sections] == ["pass", "pass"]


def test_a_planted_bug_is_killed_by_the_section_that_sees_it():
    m = MUTANTS_BY_NAME["conflict-answered-as-duplicate"]
    r = run_mutant(m, "quick", ["replay", "crash-cuts"], timeout=300,
                   traces=[str(ROOT / "traces" / "incidents" / "acceptance-lost-response.json")])
    assert r.verdict == "killed", r.to_json()
    assert r.section == "replay" and r.check and r.detail
    assert [s["name"] for s in r.sections] == ["replay"], "stops at the first section that fails"


def test_the_command_lists_the_catalogue_as_json():
    p = subprocess.run([sys.executable, "-m", "wgk.conformance", "mutants", "--impl", "--list",
                        "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    names = [m["name"] for m in json.loads(p.stdout)["mutants"]]
    assert names == [m.name for m in IMPL_MUTANTS]


# --- a guard marker counts only if disabling it makes a check fail ---------------------------


def _marker(path: str, statement: str):
    from wgk.conformance.reports.tracematrix import guards
    found, _ = guards()
    for g in found:
        if g.path == path and (ROOT / path).read_text().splitlines()[g.line - 1].strip() == statement:
            return g
    raise AssertionError(f"no marker above {statement!r} in {path}")


def test_every_marker_can_be_disabled_by_an_exact_patch_or_says_why():
    from wgk.conformance.reports.guard_verify import disabling_patch
    from wgk.conformance.reports.tracematrix import guards
    found, _ = guards()
    cannot = []
    for g in found:
        patch, head, why = disabling_patch(g)
        if patch is None:
            cannot.append((g.path, head, why))
            continue
        assert check_anchors([ImplMutant("disabled", "rules", "d", "b", (patch,))]) == [], g
    assert len(cannot) <= 2, cannot
    g = _marker("impl/world/proc.py", 'if state in (b"Z", b"X"):')
    patch, _, _ = disabling_patch(g)
    assert patch.new.endswith("if False:") and "# guards: liveness-needs-exact-birth" in patch.old


def test_a_disabled_guard_that_a_check_sees_guards_and_one_it_cannot_guards_nothing():
    from wgk.conformance.reports.guard_verify import verify_guards
    fence = _marker("impl/decisions/rules.py", "if (c.generation, c.attempt, c.fence, c.lease_epoch) != \\")
    # the stale-capability trace never acknowledges a continuation, so replaying
    # it alone cannot see the acknowledgement's guard disabled
    unseen = _marker("impl/decisions/evidence.py", 'return ctx.seen("continuation", ctx.request.evidence)')
    verdicts = verify_guards("quick", ["replay"], traces=[TRACE], timeout=300,
                             only=lambda g: g in (fence, unseen))
    by = {v.guard: v for v in verdicts}
    assert by[fence].verdict == "guards" and by[fence].by.startswith("replay"), by[fence].to_json()
    assert by[unseen].verdict == "guards-nothing", by[unseen].to_json()


def test_the_deep_gate_section_passes_kills_fails_unexplained_survivors_and_a_low_rate():
    from wgk.conformance.reports.impl_mutants import CatalogueRun, MutantRun, catalogue_checks
    from wgk.conformance.reports.gate import BUDGETS, SECTIONS
    assert BUDGETS["deep"]["impl-mutants"] in ("quick", "default")
    assert all(not BUDGETS[b].get("impl-mutants") for b in ("quick", "default"))
    assert "impl-mutants" in dict(SECTIONS)
    explained = MUTANTS_BY_NAME["planner-first-of-several"]
    unexplained = MUTANTS_BY_NAME["pid-only-liveness"]
    killed = MUTANTS_BY_NAME["fence-ignores-lease-epoch"]
    base = MutantRun(IDENTITY, "survived", 1.0)
    run = CatalogueRun("quick", base, [MutantRun(killed, "killed", 1.0, "replay", "t", "d"),
                                       MutantRun(explained, "survived", 1.0),
                                       MutantRun(unexplained, "survived", 1.0)], 3.0)
    checks = {c.name: c for c in catalogue_checks(run)}
    assert checks["baseline: the unmutated copy passes"].verdict == "pass"
    assert checks[killed.name].verdict == "pass" and "replay" in checks[killed.name].detail
    assert explained.name not in checks, "an explained survivor is listed under the kill rate"
    assert checks[unexplained.name].verdict == "fail"
    assert checks["kill rate"].verdict == "fail" and explained.name in checks["kill rate"].detail
    broken = CatalogueRun("quick", MutantRun(IDENTITY, "killed", 1.0, "replay", "t", "d"), [], 1.0)
    [only] = catalogue_checks(broken)
    assert only.verdict == "error", "no kill means anything when the unmutated copy fails"


def test_a_guard_only_a_real_repository_shows_is_verified_by_its_named_test():
    """The named test runs in the child on the mutated copy, in one process and without the
    project's pytest options: the disabled guard fails it."""
    from wgk.conformance.reports.guard_verify import GUARD_TESTS, verify_guards
    g = _marker("impl/world/git.py", "if not self.ignored_files(wt):")
    assert GUARD_TESTS[("world/git.py", "if not self.ignored_files(wt):")]
    (v,) = verify_guards("quick", [], timeout=300, only=lambda m: m == g)
    assert v.verdict == "guards" and v.by.startswith("tests: tests/"), v.to_json()


def test_through_the_protocol_a_survivor_listed_in_process_is_explained_and_kills_say_where():
    from wgk.conformance.cli.impl_mutants_view import exit_code, summary
    from wgk.conformance.oracle.impl_mutants_catalogue import IN_PROCESS_ONLY
    from wgk.conformance.reports.impl_mutants import CatalogueRun, MutantRun
    listed = MUTANTS_BY_NAME["ledger-links-genesis"]
    assert listed.in_process == IN_PROCESS_ONLY["ledger-links-genesis"] and not listed.survives
    over = MUTANTS_BY_NAME["pid-only-liveness"]
    inside = MUTANTS_BY_NAME["token-not-checked"]
    runs = [MutantRun(over, "killed", 1.0, "replay", "t", "d", external=True),
            MutantRun(inside, "killed", 1.0, "tamper", "t", "d", external=True)] + \
        [MutantRun(MUTANTS_BY_NAME["fence-ignores-lease-epoch"], "killed", 1.0, "races", "t",
                   "d", external=True)] * 8 + [MutantRun(listed, "survived", 1.0, external=True)]
    ext = CatalogueRun("quick", None, runs, 3.0, external=True)
    assert ext.surprises() == [] and exit_code(ext) == 0
    both = ext.to_json()["external"]
    assert "pid-only-liveness" in both["through-protocol"]
    assert both["inside-the-process"] == ["token-not-checked"]
    assert both["listed-in-process"] == {"ledger-links-genesis": listed.in_process}
    assert "1 survivors listed as needing access inside the process" in summary(ext)
    # in process, the same survivor is a surprise: the field explains only the protocol's runs
    inproc = CatalogueRun("quick", None, [MutantRun(r.mutant, r.verdict, 1.0, r.section)
                                          for r in runs], 3.0)
    assert [r.mutant.name for r in inproc.surprises()] == ["ledger-links-genesis"]
    assert exit_code(inproc) == 1


def test_the_deadlock_mutant_is_first_killed_where_its_record_says():
    """The races section on PostgreSQL, on the mutated copy: the first check that fails is the
    one recorded (``impl_mutants_kills``); the dispatch races before it pass (a losing dispatch
    is answered by its conditional write, never run again)."""
    from pg_support import server
    from wgk.conformance.oracle.impl_mutants_kills import KILLED_IN_PROCESS
    dsn = server()
    m = MUTANTS_BY_NAME["pg-deadlock-not-retried"]
    r = run_mutant(m, "quick", ["races"], timeout=600, backend=dsn)
    assert r.verdict == "killed", r.to_json()
    assert (r.section, r.check) == KILLED_IN_PROCESS[m.name] == m.killed_in_process, r.to_json()
    assert "a row changed under the decision" in r.detail


def test_a_principal_revoked_through_the_other_instance_is_killed_over_the_protocol():
    """Over the protocol the two instances' state is read through a third one (the served
    kernel declares 8 processes), so reading it refreshes neither: the planted bug that keeps
    a sender admitted on caches another connection's commit made stale is killed by the two
    kernels' section, at the trace its record names (read through the next instance, as
    before, it survived the whole quick gate over the protocol)."""
    from wgk.conformance.oracle.impl_mutants_kills import KILLED_OVER_PROTOCOL
    m = MUTANTS_BY_NAME["revoked-elsewhere-still-authenticates"]
    r = run_mutant(m, "quick", ["two-kernels"], timeout=600,
                   external={"command": "python -m wgk.impl.serve", "timeout": 30.0})
    assert r.verdict == "killed", r.to_json()
    assert r.section == KILLED_OVER_PROTOCOL[m.name] == "two-kernels", r.to_json()
    assert r.check == m.killed_in_process[1] == "incident-revoked-credential-refused"
