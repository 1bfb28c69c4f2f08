"""Requests on the wire: parsing, normalisation and the digest of "same bytes".

A request is a JSON object with kebab-case keys (docs/vocabulary.md). It is
parsed into a frozen ``Request``; anything malformed raises ``BadRequest``
naming the field, and is never journaled (it is not a request at all).

A request is input from anyone: ``parse`` is total on any Python value (a JSON
value of any shape, nesting or size) and refuses in one short line what no
store can hold (strings that are not text: lone surrogates, NUL; integers
outside 64 bits), echoing at most a short, shallow ``repr`` of the value.

The digest is sha256 of the canonical JSON of the normalised request without
its key: sorted keys, no whitespace, defaults omitted, owner epochs filled in.
Two requests have the same bytes iff their digests are equal.

Capability tokens: a request of the attempt's own process presents ``token``,
the secret its opener handed it; ``parse`` keeps only its sha256
(``token_hash``), so neither the journal, the ledger nor the canonical form ever
holds a token. A request that opens an attempt or a continuation carries
``mint``: the sha256 (64 lowercase hex digits) of the new token, which the
opener generated and keeps; a re-sent opener (a lost response) is answered from
the journal and the opener still holds its secret.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Iterable, Mapping

from . import names
from .canonical import canonical_json  # noqa: F401  (re-exported)
from .names import short
from .errors import BadRequest
from .vocabulary import (
    ACTORS, AUTHORITY, CONTRACTS, NEEDS_CAPABILITY, DISPOSITIONS, REVIEW_VERDICTS, EXITS, FAILURES, KINDS, MINTING_KINDS,
    PHASES,
    REASONS, TOKEN_BEARERS, TRANSACTION_KINDS, VERDICTS, WAIT_NAMING_KINDS,
)


@dataclass(frozen=True, slots=True)
class Capability:
    """K = (graph, task, generation, attempt, fence, lease-epoch)."""

    graph: str
    task: str
    generation: int
    attempt: int
    fence: int
    lease_epoch: int

    def to_wire(self) -> dict:
        return {"graph": self.graph, "task": self.task, "generation": self.generation,
                "attempt": self.attempt, "fence": self.fence, "lease-epoch": self.lease_epoch}


@dataclass(frozen=True, slots=True)
class Owner:
    """Which process owns the attempt: pid and birth time, with session and epochs."""

    pid: int
    birth: int
    session: str | None
    wrapper_epoch: int = 1
    child_epoch: int = 1

    def to_wire(self) -> dict:
        return {"pid": self.pid, "birth": self.birth, "session": self.session,
                "wrapper-epoch": self.wrapper_epoch, "child-epoch": self.child_epoch}


@dataclass(frozen=True, slots=True)
class Request:
    kind: str
    actor: str
    task: str
    key: str
    cap: Capability | None = None
    expected_phase: str | None = None
    expected_revision: int | None = None
    expected_attempt: int | None = None
    expected_generation: int | None = None
    owner: Owner | None = None
    imports: str | None = None
    candidate: str | None = None
    base: str | None = None
    verdict: str | None = None
    disposition: str | None = None
    evidence: str = ""
    deadline: int = 0
    reason: str = "none"
    failure: str = "none"          # fail: why the attempt failed
    token_hash: str | None = None  # sha256 of the presented capability token (never the token)
    mint: str | None = None        # dispatch, retry, resume: sha256 of the new attempt's token
    correlation: str | None = None  # park, deliver: the event an external wait waits for
    # the review valve: the manifest's digests, its contract, a reviewer's verdict, the flags
    requirements: str | None = None
    output: str | None = None
    validation: str | None = None
    contract: str | None = None
    review: str | None = None
    resolvable: bool = False
    protected_free: bool = False
    succeeded: bool = False
    outputs_match: bool = False
    route: str | None = None     # provider-failure: the route named by the failure
    digest: str = ""             # sha256 of ``canonical``
    canonical: str = ""          # canonical JSON of the request without its key

    @property
    def authorized(self) -> bool:
        return self.actor in AUTHORITY[self.kind]

    @property
    def needs_capability(self) -> bool:
        return self.kind in NEEDS_CAPABILITY

    @property
    def needs_token(self) -> bool:
        """A continuation always; any other K-request of the attempt's own process."""
        return self.kind == "resume" or (
            self.kind in NEEDS_CAPABILITY and self.actor in TOKEN_BEARERS)


_FIELDS = frozenset({
    "kind", "actor", "task", "key", "cap", "expected-phase", "expected-revision",
    "expected-attempt", "expected-generation", "owner", "imports", "candidate", "base",
    "verdict", "disposition", "evidence", "deadline", "reason", "token", "mint", "failure",
    "correlation", "requirements", "output", "validation", "contract", "review", "resolvable",
    "protected-free", "succeeded", "outputs-match", "route",
})
#: The review valve's flags: true or false on the wire (false is left out).
_FLAGS = ("resolvable", "protected-free", "succeeded", "outputs-match")
#: A token is at most this long (the client's are 64 hex digits: 256 bits from ``secrets``).
TOKEN_MAX = 512
_HEX = frozenset("0123456789abcdef")
_CAP_FIELDS = ("graph", "task", "generation", "attempt", "fence", "lease-epoch")
_CAP_KEYS = frozenset(_CAP_FIELDS)
_OWNER_FIELDS = frozenset({"pid", "birth", "session", "wrapper-epoch", "child-epoch"})
_VISIBLE_PHASES = frozenset(PHASES) | frozenset(EXITS)   # "none" never matches a task
_LABELS = {"kind": frozenset(KINDS), "actor": frozenset(ACTORS),
           "expected-phase": _VISIBLE_PHASES, "verdict": frozenset(VERDICTS),
           "disposition": frozenset(DISPOSITIONS), "reason": frozenset(REASONS),
           "failure": frozenset(FAILURES), "contract": frozenset(CONTRACTS) - {"none"},
           "review": frozenset(REVIEW_VERDICTS) - {"absent"}}


#: Integers are stored as 64-bit signed values (SQLite INTEGER, PostgreSQL BIGINT).
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1


def _text_problem(v: str) -> str | None:
    """Why a string is not text every store holds (a lone surrogate, a NUL), or None."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"not Unicode text: a lone surrogate U+{ord(v[e.start]):04X} at position {e.start}"
    if "\0" in v:
        return f"a NUL character at position {v.index(chr(0))}"
    return None


def _string(v: object, where: str) -> str:
    if type(v) is not str:
        raise BadRequest(f"request field '{where}': expected a string, got {short(v)}")
    if v.isascii() and "\0" not in v:
        return v                      # ASCII without NUL: text every store holds
    problem = _text_problem(v)
    if problem is not None:
        raise BadRequest(f"request field '{where}': {problem}")
    return v


def _label(body: Mapping, name: str, *, required: bool = False) -> str | None:
    v = body.get(name)
    if v is None:
        if required:
            raise BadRequest(f"request has no '{name}'")
        return None
    if type(v) is not str or v not in _LABELS[name]:
        raise BadRequest(f"request field '/{name}': unknown label {short(v)}")
    return v


def _int(body: Mapping, name: str, *, where: str = "") -> int | None:
    v = body.get(name)
    if v is None:
        return v
    if type(v) is not int:
        raise BadRequest(f"request field '{where}/{name}': expected an integer, got {short(v)}")
    if not INT_MIN <= v <= INT_MAX:
        raise BadRequest(f"request field '{where}/{name}': integer {short(v, 24)} is outside "
                         "64 bits")
    return v


def _content(body: Mapping, name: str) -> str | None:
    """A content id: a non-empty string, or none."""
    v = body.get(name)
    if v is None or v == "":
        return None
    return _string(v, f"/{name}")


def _text(body: Mapping, name: str, *, required: bool = False) -> str:
    v = body.get(name)
    if v is None:
        if required:
            raise BadRequest(f"request has no '{name}'")
        return ""
    return _string(v, f"/{name}")


def _keys(v: Mapping) -> str:
    shown = sorted(short(k, 40) for k in v)
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def _capability(v: Any) -> Capability | None:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise BadRequest(f"request field '/cap': expected an object, got {short(v)}")
    if type(v) is dict and v.keys() == _CAP_KEYS and all(
            type(n) is int and INT_MIN <= n <= INT_MAX for n in (v[f] for f in _CAP_FIELDS[2:])):
        return Capability(_string(v["graph"], "/cap/graph"), _string(v["task"], "/cap/task"),
                          v["generation"], v["attempt"], v["fence"], v["lease-epoch"])
    if len(v) != 6 or not all(f in v for f in _CAP_FIELDS):
        extra = [k for k in v if k not in _CAP_FIELDS]
        missing = [f for f in _CAP_FIELDS if f not in v]
        raise BadRequest("request field '/cap': " + (
            f"unknown keys {_keys(dict.fromkeys(extra))}" if extra else f"missing {missing}"))
    graph, task = _string(v["graph"], "/cap/graph"), _string(v["task"], "/cap/task")
    nums = [_int(v, f, where="/cap") for f in _CAP_FIELDS[2:]]
    return Capability(graph, task, *nums)


def _owner(v: Any) -> Owner | None:
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise BadRequest(f"request field '/owner': expected an object, got {short(v)}")
    extra = [k for k in v if k not in _OWNER_FIELDS]
    if extra:
        raise BadRequest(f"request field '/owner': unknown keys {_keys(dict.fromkeys(extra))}")
    pid = _int(v, "pid", where="/owner")
    birth = _int(v, "birth", where="/owner")
    if pid is None or birth is None:
        raise BadRequest("request field '/owner': needs 'pid' and 'birth'")
    if pid <= 0 or birth <= 0:
        raise BadRequest("request field '/owner': pid and birth must be positive (0 means no process)")
    session = v.get("session")
    if isinstance(session, bool) or not isinstance(session, (str, int, type(None))):
        raise BadRequest(f"request field '/owner/session': expected a string, got {short(session)}")
    if type(session) is int:
        session = str(_int(v, "session", where="/owner"))
    session = None if session is None or session == "" else _string(session, "/owner/session")
    we = _int(v, "wrapper-epoch", where="/owner")
    ce = _int(v, "child-epoch", where="/owner")
    return Owner(pid, birth, session, 1 if we is None else we, 1 if ce is None else ce)


def _token_hash(body: Mapping) -> str | None:
    """The sha256 of the presented token (the token itself is never kept)."""
    v = body.get("token")
    if v is None:
        return None
    v = _string(v, "/token")
    if not 1 <= len(v) <= TOKEN_MAX:
        raise BadRequest(f"request field '/token': expected 1 to {TOKEN_MAX} characters")
    return hashlib.sha256(v.encode()).hexdigest()


def _mint(body: Mapping, kind: str) -> str | None:
    v = body.get("mint")
    if v is None:
        if kind in MINTING_KINDS:
            raise BadRequest(f"{kind} must carry 'mint': the sha256 (64 hex digits) of the "
                             "token the opened attempt's process will present")
        return None
    if type(v) is not str or len(v) != 64 or not set(v) <= _HEX:
        raise BadRequest(f"request field '/mint': expected 64 lowercase hex digits (a sha256), "
                         f"got {short(v)}")
    if kind not in MINTING_KINDS:
        raise BadRequest(f"request field '/mint': {kind} opens no attempt")
    return v


def _correlation(body: Mapping, kind: str) -> str | None:
    """The name of the event an external wait waits for (required by park and deliver)."""
    v = _content(body, "correlation")
    if v is None and kind in WAIT_NAMING_KINDS:
        raise BadRequest(f"{kind} must carry 'correlation': the name of the event an external "
                         "wait waits for")
    if v is not None and kind not in WAIT_NAMING_KINDS:
        raise BadRequest(f"request field '/correlation': {kind} names no external wait")
    return v


def _route(body: Mapping, kind: str) -> str | None:
    """The provider route a provider failure was reported on (a name; only that kind names one)."""
    v = _content(body, "route")
    if v is not None and kind != "provider-failure":
        raise BadRequest(f"request field '/route': {kind} names no provider route")
    return v


def _flag(body: Mapping, name: str) -> bool:
    v = body.get(name)
    if v is None:
        return False
    if type(v) is not bool:
        raise BadRequest(f"request field '/{name}': expected true or false, got {short(v)}")
    return v


def parse(body: Any) -> Request:
    """The typed, normalised request for a wire object (``BadRequest`` if malformed).

    A plain ``dict`` is read in one pass over its fields (``_FIELD_KINDS``: each field's
    check by its type of value), checked against its kind's table (``_KIND_FIELDS``: the
    fields it must carry and those it may not) and normalised on the way into the wire form
    whose canonical text is its digest; anything that pass does not take (a value outside
    its field's plain form, a refusal) is read again field by field (``_parse_checked``),
    which names what is wrong exactly as it always did."""
    if type(body) is dict:
        r = _one_pass(body)
        if r is not None:
            return r
    return _parse_checked(body)


# the kinds of value a field holds (``_FIELD_KINDS``), checked in ``_one_pass``
_LABEL, _TEXT, _INT, _CONTENT, _FLAG, _CAP, _OWNER, _TOKEN, _MINT = range(9)
#: Each wire field: its kind of value and the ``Request`` slot it fills.
_FIELD_KINDS: dict[str, tuple[int, str]] = {
    **{f: (_LABEL, f.replace("-", "_")) for f in _LABELS},
    **{f: (_TEXT, f) for f in ("task", "key", "evidence")},
    **{f: (_INT, f.replace("-", "_")) for f in (
        "expected-revision", "expected-attempt", "expected-generation", "deadline")},
    **{f: (_CONTENT, f) for f in (
        "imports", "candidate", "base", "correlation", "requirements", "output", "validation",
        "route")},
    **{f: (_FLAG, f.replace("-", "_")) for f in _FLAGS},
    "cap": (_CAP, "cap"), "owner": (_OWNER, "owner"), "token": (_TOKEN, "token_hash"),
    "mint": (_MINT, "mint"),
}
assert set(_FIELD_KINDS) == _FIELDS, sorted(set(_FIELD_KINDS) ^ _FIELDS)
#: The values the wire form leaves out (a default, or an empty content id).
_ABSENT: dict[str, Any] = {"evidence": "", "deadline": 0, "reason": "none", "failure": "none"}
_MINT_TEXT = re.compile(r"[0-9a-f]{64}")


def _kind_fields(kind: str) -> tuple[frozenset, frozenset]:
    """The wire fields a request of ``kind`` must carry (with a value), and those it may not."""
    must = {"kind", "actor", "task", "key"}
    never = set()
    (must if kind in MINTING_KINDS else never).add("mint")
    (must if kind in WAIT_NAMING_KINDS else never).add("correlation")
    if kind != "provider-failure":
        never.add("route")
    if kind in TRANSACTION_KINDS:
        must |= {"expected-phase", "expected-revision"}
    if kind in _OWNED:
        must.add("owner")
    return frozenset(must), frozenset(never)


def _one_pass(body: dict) -> Request | None:
    """The request ``body`` is when every field holds its plain form and the kind's table
    admits the fields it carries; None when it does not (read it field by field)."""
    slots = dict(_DEFAULTS)
    out: dict[str, Any] = {}
    for name, v in body.items():
        spec = _FIELD_KINDS.get(name)
        if spec is None:
            return None
        kind, slot = spec
        if v is None:
            continue
        if kind == _LABEL:
            if type(v) is not str or v not in _LABELS[name]:
                return None
        elif kind == _TEXT or kind == _CONTENT:
            if type(v) is not str or not v.isascii() or "\0" in v:
                return None
            if not v and kind == _CONTENT:
                continue
        elif kind == _INT:
            if type(v) is not int or not INT_MIN <= v <= INT_MAX:
                return None
        elif kind == _FLAG:
            if type(v) is not bool:
                return None
            if not v:
                continue
        elif kind == _CAP:
            if type(v) is not dict or v.keys() != _CAP_KEYS:
                return None
            g, t = v["graph"], v["task"]
            if type(g) is not str or type(t) is not str or not (g + t).isascii() \
                    or "\0" in g or "\0" in t:
                return None
            nums = (v["generation"], v["attempt"], v["fence"], v["lease-epoch"])
            for n in nums:
                if type(n) is not int or not INT_MIN <= n <= INT_MAX:
                    return None
            slots["cap"] = _capability_of(g, t, *nums)
            out["cap"] = v
            continue
        elif kind == _OWNER:
            owner = _plain_owner(v)
            if owner is None:
                return None
            slots["owner"] = owner
            out["owner"] = owner.to_wire()
            continue
        elif kind == _TOKEN:
            if type(v) is not str or not v.isascii() or "\0" in v or not 1 <= len(v) <= TOKEN_MAX:
                return None
            slots["token_hash"] = hashlib.sha256(v.encode()).hexdigest()
            out["token-hash"] = slots["token_hash"]
            continue
        else:                                             # _MINT
            if type(v) is not str or not _MINT_TEXT.fullmatch(v):
                return None
        slots[slot] = v
        if v != _ABSENT.get(name):
            out[name] = v
    kind = out.get("kind")
    if kind is None:
        return None
    must, never = _KIND_FIELDS[kind]
    if not must <= out.keys() or not never.isdisjoint(out.keys()) or not out["key"]:
        return None
    slots["canonical"], slots["digest"] = _digested(out)
    return _fill(*slots.values())


_OWNER_PLAIN = frozenset({"pid", "birth"})


def _plain_owner(v: Any) -> Owner | None:
    """The owner ``v`` names in its plain form (positive pid and birth, a session that is
    ASCII text or none, epochs or none), else None."""
    if type(v) is not dict or not _OWNER_PLAIN <= v.keys() or not v.keys() <= _OWNER_FIELDS:
        return None
    pid, birth = v["pid"], v["birth"]
    if type(pid) is not int or type(birth) is not int or not 0 < pid <= INT_MAX \
            or not 0 < birth <= INT_MAX:
        return None
    session = v.get("session")
    if session == "":
        session = None
    elif session is not None and (type(session) is not str or not session.isascii()
                                  or "\0" in session):
        return None
    we, ce = v.get("wrapper-epoch"), v.get("child-epoch")
    for n in (we, ce):
        if n is not None and (type(n) is not int or not INT_MIN <= n <= INT_MAX):
            return None
    return Owner(pid, birth, session, 1 if we is None else we, 1 if ce is None else ce)


def _parse_checked(body: Any) -> Request:
    """``parse`` field by field in the contract's order: what a body the one pass does not
    take is read with, and what names the first thing wrong with it."""
    if type(body) is not dict:
        if not isinstance(body, Mapping):
            raise BadRequest(f"a request is a JSON object, got {type(body).__name__}")
        body = dict(body)
    extra = [k for k in body if k not in _FIELDS]
    if extra:
        raise BadRequest(f"request has unknown fields: {_keys(dict.fromkeys(extra))}")
    kind = _label(body, "kind", required=True)
    actor = _label(body, "actor", required=True)
    task = _text(body, "task", required=True)
    key = _text(body, "key", required=True)
    if not key:
        raise BadRequest("request has an empty 'key'")
    # every string a store will hold is text (checked where it is read, above)
    deadline = _int(body, "deadline")
    r = _request(
        kind=kind, actor=actor, task=task, key=key, cap=_capability(body.get("cap")),
        expected_phase=_label(body, "expected-phase"),
        expected_revision=_int(body, "expected-revision"),
        expected_attempt=_int(body, "expected-attempt"),
        expected_generation=_int(body, "expected-generation"), owner=_owner(body.get("owner")),
        imports=_content(body, "imports"), candidate=_content(body, "candidate"),
        base=_content(body, "base"), verdict=_label(body, "verdict"),
        disposition=_label(body, "disposition"), evidence=_text(body, "evidence"),
        deadline=deadline or 0, reason=_label(body, "reason") or "none",
        failure=_label(body, "failure") or "none", token_hash=_token_hash(body),
        mint=_mint(body, kind), correlation=_correlation(body, kind),
        requirements=_content(body, "requirements"), output=_content(body, "output"),
        validation=_content(body, "validation"), contract=_label(body, "contract"),
        review=_label(body, "review"), route=_route(body, kind),
        **{f.replace("-", "_"): _flag(body, f) for f in _FLAGS})
    if kind in TRANSACTION_KINDS and (r.expected_phase is None or r.expected_revision is None):
        raise BadRequest(f"{kind} moves the SaveTransaction and must carry "
                         "'expected-phase' and 'expected-revision'")
    if kind in _OWNED and r.owner is None:
        raise BadRequest(f"{kind} must name its exact 'owner'")
    return _sealed(r, to_wire(r))


def _sealed(r: Request, canonical: dict) -> Request:
    """``r`` with the canonical text of its normalised wire form ``canonical`` (the key
    left out) and that text's digest."""
    text, digest = _digested(canonical)
    object.__setattr__(r, "canonical", text)
    object.__setattr__(r, "digest", digest)
    return r


def _digested(canonical: dict) -> tuple[str, str]:
    """The canonical text of the normalised wire form ``canonical`` with its key left out,
    and that text's sha256 (``canonical`` loses its key)."""
    del canonical["key"]
    text = canonical_json(canonical)
    return text, hashlib.sha256(text.encode()).hexdigest()


_OWNED = frozenset({"dispatch", "retry", "resume"})
#: Request's fields in order, with their defaults and their slots' setters (``_request``).
_DEFAULTS = {f.name: f.default for f in fields(Request)}
_SLOTS = tuple(Request.__dict__[name] for name in _DEFAULTS)


def _filler(cls: type = Request, slots: tuple = _SLOTS):
    """A function taking one value per field of ``cls`` (a frozen dataclass with slots
    ``slots``) in order and returning the instance holding them: each slot set by its own
    setter, one call each, written out once here (neither the frozen dataclass's
    ``__init__``, a Python call per field, nor a loop over the slots)."""
    arity = len(slots)
    args = ", ".join(f"v{i}" for i in range(arity))
    text = f"def fill({args}):\n    r = new(cls)\n" \
        + "".join(f"    s{i}(r, v{i})\n" for i in range(arity)) + "    return r\n"
    scope = {"new": object.__new__, "cls": cls,
             **{f"s{i}": slot.__set__ for i, slot in enumerate(slots)}}
    exec(compile(text, f"<wire.fill {cls.__name__}>", "exec"), scope)
    return scope["fill"]


_fill = _filler()
#: ``Capability(graph, task, generation, attempt, fence, lease_epoch)`` in one generated call.
_capability_of = _filler(Capability, tuple(Capability.__dict__[f.name] for f in fields(Capability)))


_values = attrgetter(*_DEFAULTS)
_KEY_AT = tuple(_DEFAULTS).index("key")


def rekeyed(r: Request, key: str) -> Request:
    """``r`` under another ``key`` (its canonical text and digest leave the key out: they
    stay), each slot copied by the one generated call (not the frozen dataclass's
    ``__init__`` through ``dataclasses.replace``)."""
    values = list(_values(r))
    values[_KEY_AT] = key
    return _fill(*values)


def _filled(values: Iterable[Any]) -> Request:
    """A ``Request`` whose slots hold ``values`` in field order."""
    return _fill(*values)


#: Each kind's table: the fields it must carry and those it may not (``_one_pass``).
_KIND_FIELDS = {kind: _kind_fields(kind) for kind in KINDS}


def _request(**given: Any) -> Request:
    """``Request(**given)`` without the frozen dataclass's ``__init__`` (a call per field)."""
    values = {**_DEFAULTS, **given}
    if len(values) != len(_DEFAULTS):
        raise TypeError(f"Request has no field {sorted(set(given) - set(_DEFAULTS))[0]!r}")
    return _filled(values.values())


def to_wire(r: Request) -> dict[str, Any]:
    """The normalised wire form: kebab-case keys, defaults omitted."""
    out: dict[str, Any] = {"kind": r.kind, "actor": r.actor, "task": r.task, "key": r.key}
    if r.cap is not None:
        out["cap"] = r.cap.to_wire()
    for name, value in (("expected-phase", r.expected_phase),
                        ("expected-revision", r.expected_revision),
                        ("expected-attempt", r.expected_attempt),
                        ("expected-generation", r.expected_generation),
                        ("imports", r.imports), ("candidate", r.candidate), ("base", r.base),
                        ("verdict", r.verdict), ("disposition", r.disposition),
                        ("mint", r.mint), ("correlation", r.correlation),
                        ("requirements", r.requirements), ("output", r.output),
                        ("validation", r.validation), ("contract", r.contract),
                        ("review", r.review), ("route", r.route)):
        if value is not None:
            out[name] = value
    for name in _FLAGS:
        if getattr(r, name.replace("-", "_")):
            out[name] = True
    if r.owner is not None:
        out["owner"] = r.owner.to_wire()
    for name, value, absent in (("evidence", r.evidence, ""), ("deadline", r.deadline, 0),
                                ("reason", r.reason, "none"), ("failure", r.failure, "none")):
        if value != absent:
            out[name] = value
    if r.token_hash is not None:
        out["token-hash"] = r.token_hash      # the canonical form keeps the hash only
    return out


_is_name = names.is_name
#: The content ids a request may carry, each a name (``name_fields``, in this order).
_CONTENT_NAMES = ("imports", "candidate", "base", "correlation", "requirements", "output",
                  "validation")
_content_names = attrgetter(*_CONTENT_NAMES)
_NO_CONTENT = (None,) * len(_CONTENT_NAMES)       # a request that carries no content id


def name_fields(r: Request) -> list[tuple[str, str]]:
    """``(field, value)`` of every name the request carries: its task, its K's graph and
    task, its content ids."""
    out = [("task", r.task)]
    if r.cap is not None:
        out += [("cap/graph", r.cap.graph), ("cap/task", r.cap.task)]
    return out + [(f, v) for f, v in zip(_CONTENT_NAMES, _content_names(r)) if v is not None]


def refused_name(r: Request) -> str | None:
    """One line naming the first name of ``r`` outside the grammar and its rule, or None.

    Every name is matched once against the grammar (``names.is_name``); only where one
    does not match are they described in the fields' order, naming the first refused."""
    cap, contents = r.cap, _content_names(r)
    if _is_name(r.task) and (cap is None or (_is_name(cap.graph) and _is_name(cap.task))) \
            and (contents == _NO_CONTENT or all(v is None or _is_name(v) for v in contents)):
        return None
    for field, value in name_fields(r):
        line = names.describe(f"request field '/{field}'", value)
        if line is not None:
            return line
    return None


def decision(kind: str, code: str | None = None, original: dict | None = None) -> dict:
    """A wire decision: ``{"decision", "code"?, "original"?}``."""
    out: dict[str, Any] = {"decision": kind}
    if code:
        out["code"] = code
    if original is not None:
        out["original"] = original
    return out
