"""The cutoff theorem: its locality conditions are checked and refused when broken."""
from __future__ import annotations

from wgk.model import invariants
from wgk.model.invariants import Property
from wgk.model.ruleset import READS, RULES
from wgk.model.state import replace_task
from wgk.model.vocab import Kind as K

from wgk.conformance.cli.main import main
from wgk.conformance.z3.cutoff import Twin, check_state_properties, check_steps
from wgk.conformance.z3.mutants import LOCALITY_MUTANTS, with_update
from wgk.conformance.z3.transition import Semantics
from wgk.conformance.z3.unbounded import check_padding

KINDS = [K.DISPATCH, K.COMMIT_EFFECT, K.PROBE_OWNER, K.COMPACTION]


def by_subject(findings):
    return {(f.subject, f.kind): f for f in findings}


def test_every_rule_declares_what_it_reads():
    assert set(READS) == set(RULES)


def test_the_model_rules_read_and_write_only_what_they_declare():
    found = by_subject(check_steps(Twin(kinds=KINDS, env=True)))
    assert found[("rule:dispatch", "reads")].ok
    assert found[("rule:commit_effect", "writes")].ok
    assert found[("rule:probe_owner", "reads")].ok
    assert found[("env:move-target", "reads")].ok
    assert all(f.ok for f in found.values()), [f for f in found.values() if not f.ok]


def test_a_rule_reading_a_non_dependency_is_refused_by_name():
    m = LOCALITY_MUTANTS["dispatch-reads-non-dependency"]
    found = by_subject(check_steps(Twin(m.semantics(), kinds=[K.DISPATCH], env=False)))
    f = found[("rule:dispatch_reading_a_non_dependency", "reads")]
    assert not f.ok
    assert "dispatch(t3" in f.detail and "deps.done" in f.detail


def test_a_rule_reading_an_undeclared_global_is_refused(monkeypatch):
    monkeypatch.setitem(READS, K.COMMIT_EFFECT, frozenset({"self"}))
    found = by_subject(check_steps(Twin(kinds=[K.COMMIT_EFFECT], env=False)))
    assert not found[("rule:commit_effect", "reads")].ok


def test_a_rule_without_declaration_is_refused(monkeypatch):
    monkeypatch.delitem(READS, K.LOG)
    found = by_subject(check_steps(Twin(kinds=[K.LOG], env=False)))
    assert not found[("rule:log", "declares")].ok


def test_a_rule_writing_another_task_is_refused():
    def touch_first(s, i, t, r, s2):
        return s2.put(0, replace_task(s2.tasks[0], logs=s2.tasks[0].logs + 1))
    rule = with_update(K.LOG, touch_first)
    rules = dict(RULES)
    rules[K.LOG] = rule
    found = by_subject(check_steps(Twin(Semantics("log-writes-t1", rules), kinds=[K.LOG],
                                        env=False)))
    assert found[("rule:rule", "reads")].ok
    assert not found[("rule:rule", "writes")].ok


def test_a_property_reading_another_task_is_refused(monkeypatch):
    p = Property("reads-first-task", "always", "state", "Reads task t1.",
                 lambda s, i, t: s.tasks[0].logs <= t.logs + 5)
    monkeypatch.setitem(invariants.REGISTRY, p.id, p)
    found = by_subject(check_state_properties(Twin(kinds=[K.LOG], env=False)))
    assert not found[("property:reads-first-task", "reads")].ok
    assert found[("property:done-iff-graphsave", "reads")].ok


def test_the_padding_tasks_hold_every_property():
    found = check_padding(Twin(kinds=[K.LOG], env=False))
    assert [f.subject for f in found if not f.ok] == []
    assert {f.subject for f in found} >= {"padding:open", "padding:done", "padding:abandoned"}


def test_unbounded_rejects_a_sometimes_property(capsys):
    assert main(["prove", "--unbounded", "--invariant", "done-reached"]) == 2
    err = capsys.readouterr().err
    assert "always" in err and len(err.strip().splitlines()) == 1


def test_a_rule_reading_its_dependents_may_only_refuse_and_the_check_can_fail():
    """The reopen reads whether a dependent is committed (``dependents.committed``): the
    check holds for the model and fails for a reopen that ignores its dependents."""
    from wgk.conformance.z3.cutoff import check_dependents
    from wgk.conformance.z3.mutants import MUTANTS
    assert [f for f in check_dependents() if not f.ok] == []
    bad = check_dependents(MUTANTS["reopen-overtakes-dependent"].semantics())
    assert [f.kind for f in bad if not f.ok] == ["refuses"]
