"""The request path's shortcuts in ``wire``: a plain capability object and ASCII text are
read without the full checks, a request is built from its slots, and the canonical text
comes from one encoder made once. Each must give exactly what the full checks, the
dataclass and ``json.dumps`` give, refusals included."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from types import MappingProxyType

import pytest

from hypothesis import event, given, settings, strategies as st

from wgk.impl import BadRequest
from wgk.impl.contract import wire
from wgk.impl.contract.wire import canonical_json
from wgk.impl.contract.vocabulary import (
    ACTORS, DISPOSITIONS, FAILURES, KINDS, MINTING_KINDS, PHASES, REASONS, VERDICTS,
)

HEX = hashlib.sha256(b"t").hexdigest()

names = st.sampled_from(["t1", "g", "beat-1", "x" * 600])
good_ints = st.one_of(st.integers(-3, 3), st.sampled_from([2 ** 63 - 1, -2 ** 63]))
positive = st.one_of(st.integers(1, 5), st.just(2 ** 63 - 1))
bad = st.one_of(st.sampled_from(["", "a\x00b", "\ud800", "é", 2 ** 63, -2 ** 63 - 1, 0, -1,
                                 True, None, 1.5, [], {}, HEX.upper()]),
            st.text(max_size=4), st.integers(-2, 2))
CAP_KEYS = ("graph", "task", "generation", "attempt", "fence", "lease-epoch")
caps = st.fixed_dictionaries({"graph": names, "task": names, "generation": good_ints,
                              "attempt": good_ints, "fence": good_ints,
                              "lease-epoch": good_ints})
owners = st.fixed_dictionaries({"pid": positive, "birth": positive}, optional={
    "session": st.one_of(names, st.none(), st.just("")), "wrapper-epoch": good_ints,
    "child-epoch": st.one_of(good_ints, st.none())})
OPTIONAL = {
    "cap": caps, "owner": owners, "expected-phase": st.sampled_from(PHASES + ("needs-repair",)),
    "expected-revision": good_ints, "expected-attempt": good_ints,
    "expected-generation": good_ints, "deadline": good_ints,
    "imports": st.one_of(names, st.just("")), "candidate": names, "base": names,
    "verdict": st.sampled_from(VERDICTS), "disposition": st.sampled_from(DISPOSITIONS),
    "reason": st.sampled_from(REASONS), "failure": st.sampled_from(FAILURES),
    "evidence": st.one_of(names, st.just("")), "token": names,
}
SOME_KINDS = ("heartbeat", "submit", "dispatch", "resume", "reset", "save-work", "log")
valid = st.fixed_dictionaries(
    {"kind": st.one_of(st.sampled_from(SOME_KINDS), st.sampled_from(KINDS)),
     "actor": st.sampled_from(ACTORS), "task": names, "key": names},
    optional=OPTIONAL).map(lambda d: {**d, "mint": HEX} if d["kind"] in MINTING_KINDS else d)


def places(body: dict) -> list:
    """Where a bad value may go: nowhere, a field of the body or an unknown one, a field of
    its capability or owner."""
    inner = [f"{f}.{k}" for f in ("cap", "owner") if f in body for k in list(body[f]) + ["x"]]
    return [None] + list(body) + ["unknown", "owner", "mint"] + inner * 2


def spoiled(args) -> dict:
    body, place, value = args
    if place is None:
        return body
    field, _, inner = place.partition(".")
    body = dict(body)
    if not inner:
        body[field] = value
    else:
        body[field] = {**body[field], inner: value}
    return body


bodies = valid.flatmap(lambda d: st.tuples(st.just(d), st.sampled_from(places(d)), bad)).map(spoiled)


def outcome(body):
    """What ``parse`` makes of a body: the request, or the refusal's one line."""
    try:
        return wire.parse(body)
    except BadRequest as e:
        return str(e)


def slow(body):
    """The same body read without the shortcuts: a capability that is not a plain ``dict``
    and a text that is not ``str``'s own ASCII check take the full checks."""
    if isinstance(body, dict) and isinstance(body.get("cap"), dict):
        body = {**body, "cap": MappingProxyType(body["cap"])}
    return body


@settings(max_examples=1500, deadline=None, database=None)
@given(bodies)
def test_the_shortcuts_read_every_body_as_the_full_checks_do(body):
    fast = outcome(body)
    assert fast == outcome(slow(body))
    event("request" if isinstance(fast, wire.Request) else "refused")


def test_a_request_built_from_its_slots_equals_the_dataclass_one():
    for body in ({"kind": "heartbeat", "actor": "worker", "task": "t1", "key": "k",
                  "cap": {"graph": "g", "task": "t1", "generation": 0, "attempt": 1,
                          "fence": 1, "lease-epoch": 1}, "evidence": "e", "token": "secret"},
                 {"kind": "dispatch", "actor": "daemon", "task": "t1", "key": "d",
                  "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911}, "mint": HEX}):
        r = wire.parse(body)
        same = wire.Request(**{f.name: getattr(r, f.name) for f in dataclasses.fields(r)})
        assert r == same and hash(r) == hash(same) and r.digest == hashlib.sha256(
            r.canonical.encode()).hexdigest()
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.kind = "submit"
    with pytest.raises(TypeError, match="no field 'kinds'"):
        wire._request(kinds="submit")


def test_a_request_under_another_key_is_the_same_request_with_that_key_alone():
    body = {"kind": "save-work", "actor": "wrapper", "task": "t1", "key": "k",
            "cap": {"graph": "g", "task": "t1", "generation": 0, "attempt": 1, "fence": 1,
                    "lease-epoch": 1}, "expected-phase": "quiescing", "expected-revision": 2,
            "candidate": "w", "base": "b", "token": "secret"}
    r = wire.parse(body)
    moved = wire.rekeyed(r, "alice/k")
    assert moved == dataclasses.replace(r, key="alice/k") and moved is not r
    assert (moved.key, r.key) == ("alice/k", "k")
    assert (moved.canonical, moved.digest) == (r.canonical, r.digest)
    assert [getattr(moved, f.name) for f in dataclasses.fields(r) if f.name != "key"] == \
        [getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "key"]


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4), inner, max_size=4), max_leaves=12)


@settings(max_examples=500, deadline=None, database=None)
@given(json_values)
def test_canonical_json_is_json_dumps_with_sorted_keys_and_no_spaces(value):
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))


def checked(body):
    """What the field-by-field reading makes of a body (``wire._parse_checked``)."""
    try:
        return wire._parse_checked(body)
    except BadRequest as e:
        return str(e)


@settings(max_examples=1500, deadline=None, database=None)
@given(bodies)
def test_the_one_pass_reads_every_body_as_the_field_by_field_checks_do(body):
    """Whatever the one pass takes, it takes as the checks do (the same request, the same
    canonical text and digest); whatever it leaves, the checks read."""
    one = wire._one_pass(body)
    whole = checked(body)
    if one is not None:
        assert isinstance(whole, wire.Request), (body, whole)
        assert (one, one.canonical, one.digest) == (whole, whole.canonical, whole.digest)
    assert outcome(body) == whole
    event("one pass" if one is not None else "field by field")


@settings(max_examples=300, deadline=None, database=None)
@given(valid)
def test_a_request_in_its_plain_form_is_read_in_one_pass(body):
    """Every valid body of ASCII text and plain objects is taken by the one pass (the
    field-by-field reading is for what is wrong, or unusual)."""
    plain = all(v.isascii() for v in body.values() if isinstance(v, str)) and not (
        isinstance(body.get("owner"), dict) and type(body["owner"].get("session")) is int)
    whole = checked(body)
    if plain and isinstance(whole, wire.Request):
        assert wire._one_pass(body) == whole


def test_the_kinds_tables_say_what_a_kind_must_carry_and_may_not():
    must, never = wire._KIND_FIELDS["dispatch"]
    assert {"mint", "owner", "kind", "key"} <= must and {"correlation", "route"} <= never
    must, never = wire._KIND_FIELDS["provider-failure"]
    assert "route" not in never and "mint" in never
    must, never = wire._KIND_FIELDS["submit"]
    assert {"expected-phase", "expected-revision"} <= must
    body = {"kind": "submit", "actor": "worker", "task": "t1", "key": "k", "expected-phase": "absent"}
    assert wire._one_pass(body) is None
    with pytest.raises(BadRequest, match="expected-revision"):
        wire.parse(body)


BAD_VALUES = ["", "a\x00b", "\ud800", "é", 2 ** 63, -2 ** 63 - 1, 0, -1, True, False, None, 1.5,
              [], {}, HEX.upper(), HEX[:-1], "x" * 513, 7]
PLAIN = [
    {"kind": "dispatch", "actor": "daemon", "task": "t1", "key": "d", "expected-attempt": 0,
     "owner": {"pid": 4001, "birth": 911, "session": "s", "wrapper-epoch": 2, "child-epoch": 3},
     "mint": HEX, "imports": "w1"},
    {"kind": "heartbeat", "actor": "worker", "task": "t1", "key": "k", "evidence": "e",
     "cap": {"graph": "g", "task": "t1", "generation": 0, "attempt": 1, "fence": 1,
             "lease-epoch": 1}, "token": "secret"},
    {"kind": "accept", "actor": "evaluator", "task": "t1", "key": "a", "expected-phase": "validated",
     "expected-revision": 5, "candidate": "c", "verdict": "pass", "deadline": 9, "resolvable": True},
    {"kind": "park", "actor": "worker", "task": "t1", "key": "p", "correlation": "ev"},
    {"kind": "provider-failure", "actor": "wrapper", "task": "t1", "key": "f", "route": "r1",
     "reason": "none", "failure": "none"},
]


@pytest.mark.parametrize("base", PLAIN, ids=lambda b: b["kind"])
def test_every_field_spoiled_in_every_way_is_read_as_the_checks_read_it(base):
    assert wire._one_pass(base) == checked(base)
    for field in list(_FIELDS_OF_WIRE) + [f"{o}.{k}" for o in ("cap", "owner") if o in base
                                             for k in list(base[o]) + ["x"]]:
        for value in BAD_VALUES:
            body = spoiled((base, field, value))
            one, whole = wire._one_pass(body), checked(body)
            assert one is None or (isinstance(whole, wire.Request) and one == whole
                                   and one.digest == whole.digest), (field, value, whole)
            if one is None and isinstance(whole, wire.Request) and field not in ("owner.session",):
                # what the checks take in its plain form, the one pass takes too
                assert not isinstance(value, str) or not value.isascii() or "\0" in value, (
                    field, value)


_FIELDS_OF_WIRE = sorted(wire._FIELDS)
