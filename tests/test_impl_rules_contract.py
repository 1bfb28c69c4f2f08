"""The implementation's rules are the contract's tables of conditions.

docs/vocabulary.md lists, per kind, its conditions in order with their codes ("Conditions,
kind by kind") and, per transaction kind, the phase it writes and the receipt it binds
("The transaction's steps"); ``impl/decisions/rules.py`` and the modules it gathers are written
from them. These tests hold the two together (the model is held to the implementation by
lockstep, not by a comparison of tables).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from wgk.impl.decisions.rules import RULES
from wgk.impl.decisions.transaction import STEPS, Step
from wgk.impl.contract.vocabulary import CODES, KINDS, TRANSACTION_KINDS

DOC = Path(__file__).resolve().parents[1] / "docs" / "vocabulary.md"
CONDITION = re.compile(r"^([a-z-]+) → `([a-z-]+)`$")


def _section(text: str, title: str) -> str:
    return text.split(f"### {title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def _rows(section: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| `")]


def _conditions(cell: str) -> list[tuple[str, str]]:
    pairs = []
    for part in ([] if cell == "-" else cell.split("; ")):
        m = CONDITION.match(part)
        assert m, f"docs/vocabulary.md: not 'condition → `code`': {part!r}"
        pairs.append((m.group(1), m.group(2)))
    return pairs


def documented(text: str) -> dict[str, tuple[str | None, str | None, list[tuple[str, str]]]]:
    """kind -> (phase written, receipt bound, [(condition, code)]) from the steps' table."""
    out = {}
    for kind, phase, receipt, conditions, _ in _rows(_section(text, "The transaction's steps")):
        out[kind.strip("`")] = (None if phase == "-" else phase,
                                None if receipt == "-" else receipt, _conditions(conditions))
    return out


def documented_conditions(text: str) -> dict[str, list[tuple[str, str]]]:
    """kind -> [(condition, code)] from "Conditions, kind by kind" (the other kinds)."""
    return {kind.strip("`"): _conditions(conditions)
            for kind, conditions in _rows(_section(text, "Conditions, kind by kind"))}


def implemented(steps: dict[str, Step]) -> dict[str, tuple[str | None, str | None, list]]:
    return {kind: (s.to, s.receipt, [(c.name, c.code) for c in s.when])
            for kind, s in steps.items()}


def differences(doc: dict, impl: dict) -> list[str]:
    out = [f"{k}: only in the doc" for k in sorted(set(doc) - set(impl))]
    out += [f"{k}: only in impl/decisions/transaction.py" for k in sorted(set(impl) - set(doc))]
    out += [f"{k}: doc {doc[k]} != impl {impl[k]}" for k in sorted(set(doc) & set(impl))
            if doc[k] != impl[k]]
    return out


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text()


def test_every_transaction_kind_is_one_step_of_the_table():
    assert set(STEPS) == TRANSACTION_KINDS


def test_the_steps_are_the_contracts_table(text):
    assert differences(documented(text), implemented(STEPS)) == []


def test_a_condition_out_of_the_contracts_order_is_reported(text):
    doc = documented(text)
    phase, receipt, conditions = doc["save-work"]
    doc["save-work"] = (phase, receipt, conditions[::-1])
    assert differences(doc, implemented(STEPS)) == [
        f"save-work: doc {doc['save-work']} != impl {implemented(STEPS)['save-work']}"]
    del doc["quiesce"]
    assert "quiesce: only in impl/decisions/transaction.py" in differences(doc, implemented(STEPS))


def test_the_other_kinds_conditions_are_the_contracts_table(text):
    doc = documented_conditions(text)
    impl = {kind: [(c.name, c.code) for c in rule.when]
            for kind, rule in RULES.items() if kind not in TRANSACTION_KINDS}
    assert list(doc) == [k for k in KINDS if k not in TRANSACTION_KINDS]
    assert differences(doc, impl) == []
    assert all(RULES[k].when == STEPS[k].when for k in TRANSACTION_KINDS)


@pytest.mark.parametrize("title,kinds", [
    ("The transaction's steps", TRANSACTION_KINDS),
    ("Conditions, kind by kind", frozenset(KINDS) - TRANSACTION_KINDS)])
def test_every_condition_is_defined_in_the_contract_and_refuses_with_a_code(text, title, kinds):
    defined = set(re.findall(r"\*([a-z-]+)\*", _section(text, title).split("\n| kind |", 1)[0]))
    used = {c.name for k in kinds for c in RULES[k].when}
    for kind in kinds:
        for c in RULES[kind].when:
            assert c.name in defined, f"{kind}: the condition {c.name} is not defined in the doc"
            assert c.code in CODES, (kind, c.code)
    assert defined == used


# --- conditions the phase order already guarantees still refuse on their own ---------------

def _decide(record, kind: str, actor: str, target: str = "main-0", **params):
    """``rules.decide`` on a record no request sequence reaches (the phase order keeps it
    out): a condition kept as defence in depth must still refuse on it."""
    from wgk.impl import MemoryWorld, TaskPolicy
    from wgk.impl.decisions.decision import Ctx, Observe
    from wgk.impl.decisions.rules import decide
    from wgk.impl.contract.wire import parse
    world = MemoryWorld.create(target=target)
    wire = {"kind": kind, "actor": actor, "task": "a", "key": "k",
            "cap": {"graph": "g", "task": "a", "generation": record.generation,
                    "attempt": record.attempt, "fence": record.fence,
                    "lease-epoch": record.lease_epoch},
            "expected-phase": record.visible_phase, "expected-revision": record.revision, **params}
    ctx = Ctx(graph_id="g", policy=TaskPolicy("a"), record=record, request=parse(wire),
              deps_done=lambda: True, seen=lambda kind, ident: False,
              observe=Observe(world.environment(), "a"))
    return decide(ctx)


def _in_flight(phase: str, **receipts):
    from wgk.impl.storage.records import EMPTY, Binding, evolve
    t = evolve(EMPTY, generation=0, attempt=1, fence=1, lease_epoch=1, attempt_state="running",
                   phase=phase, revision=9, candidate="c1", base="main-0", disposition="land")
    bound = {name: Binding(1, "c1", "main-0") for name in receipts}
    return evolve(t, receipts=t.with_receipts(**bound))


def test_an_effect_without_the_review_of_its_exact_candidate_is_refused():
    all_but_review = dict.fromkeys(("work_save", "candidate", "validation", "disposition"))
    out = _decide(_in_flight("effect-prepared", **all_but_review), "commit-effect", "promoter",
                     candidate="c1", base="main-0")
    assert (out.decision, out.code) == ("rejected", "review-required")
    out = _decide(_in_flight("effect-prepared", review=None, **all_but_review),
                     "commit-effect", "promoter", candidate="c1", base="main-0")
    assert out.decision == "applied"


def test_a_graph_save_missing_a_receipt_is_refused():
    every = dict.fromkeys(("work_save", "candidate", "validation", "review", "disposition",
                           "effect", "cleanup"))
    out = _decide(_in_flight("cleanup-committed", **every), "save-graph", "daemon")
    assert out.decision == "applied"
    del every["validation"]
    out = _decide(_in_flight("cleanup-committed", **every), "save-graph", "daemon")
    assert (out.decision, out.code) == ("rejected", "evidence-missing")


def test_a_land_from_a_base_the_target_left_is_refused_before_any_effect():
    """The repository's own compare-and-swap would refuse the land too; the rule refuses it
    first, with no effect to attempt."""
    every = dict.fromkeys(("work_save", "candidate", "validation", "review", "disposition"))
    out = _decide(_in_flight("effect-prepared", **every), "commit-effect", "promoter",
                  target="moved", candidate="c1", base="main-0")
    assert (out.decision, out.code, out.effects) == ("rejected", "cas-moved", [])
    out = _decide(_in_flight("effect-prepared", **every), "commit-effect", "promoter",
                  candidate="c1", base="main-0")
    assert out.decision == "applied" and [e.name for e in out.effects] == ["land"]
