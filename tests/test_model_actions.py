"""The one enumeration of requests (wgk.model.actions) and the BMC templates agree per group."""
from __future__ import annotations

from collections import deque

import pytest

from wgk.conformance.check.interning import successor
from wgk.conformance.z3.bmc import instance_templates
from wgk.model.actions import (
    GROUP_KINDS, GROUPS, SYMBOLIC_ONLY, Instance, instance_kinds, steps,
)
from wgk.model.instance import CONCRETE_IN
from wgk.model.requests import Request
from wgk.model.rules import RULES


def _wide(groups: tuple[str, ...]) -> Instance:
    """An instance whose bounds and policy leave every kind of its groups possible."""
    return Instance(tasks=1, attempts=2, generations=2, versions=2, review=True, rejections=True,
                    groups=groups)


def enumerated_kinds(inst: Instance, limit: int = 3000) -> set:
    """The kinds of every request the enumeration lists in the states reachable (up to ``limit``)."""
    s0 = inst.initial()
    seen, queue, kinds = {s0}, deque([s0]), set()
    while queue and len(seen) < limit:
        s = queue.popleft()
        for step in steps(inst, s):
            if isinstance(step, Request):
                kinds.add(step.kind)
            _, s2, _ = successor(inst, s, step, RULES)
            if s2 is not None and s2 not in seen:
                seen.add(s2)
                queue.append(s2)
    return kinds


def template_kinds(inst: Instance) -> set:
    return {tpl.kind for tpl in instance_templates(inst, ("e1",)) if not tpl.is_env}


@pytest.mark.parametrize("group", [g for g in GROUPS if g not in ("core", "env")])
def test_each_group_enumerates_the_kinds_the_bmc_templates_cover(group):
    inst = _wide(("core", group))
    declared = set(GROUP_KINDS["core"]) | set(GROUP_KINDS[group])
    assert template_kinds(inst) == declared == set(instance_kinds(inst))
    assert enumerated_kinds(inst) == declared - (SYMBOLIC_ONLY - CONCRETE_IN.get(group, frozenset()))


def test_an_instance_of_every_kind_sends_the_symbolic_only_kinds_too():
    from dataclasses import replace
    inst = replace(_wide(("core", "evidence")), every_kind=True)
    assert enumerated_kinds(inst) == set(GROUP_KINDS["core"]) | set(GROUP_KINDS["evidence"])


def test_core_alone():
    inst = _wide(("core",))
    assert template_kinds(inst) == set(GROUP_KINDS["core"]) == enumerated_kinds(inst)


def test_the_kinds_left_to_the_symbolic_templates_are_evidence_kinds():
    assert SYMBOLIC_ONLY <= set(GROUP_KINDS["evidence"])
    assert SYMBOLIC_ONLY <= template_kinds(_wide(("core", "evidence")))


def test_the_instance_bounds_remove_the_kinds_they_make_impossible():
    from wgk.model.vocab import Kind as K
    kinds = set(instance_kinds(Instance(groups=("core", "operator"))))
    assert not kinds & {K.REQUEST_REVIEW, K.REVISE, K.RESET}
    assert {K.RETRY, K.ABANDON} <= kinds
