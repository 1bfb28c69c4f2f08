"""ITF (the Informal Trace Format of Apalache and Quint): encode a trace's states, decode ITF.

An ITF document is ``{"#meta": {...}, "vars": [names], "states": [{"#meta":
{"index": i}, name: value, ...}]}``. Values: JSON booleans and strings,
integers as ``{"#bigint": "42"}``, tuples ``{"#tup": [...]}``, sets ``{"#set":
[...]}``, maps ``{"#map": [[key, value], ...]}``, sequences as JSON arrays,
records as plain objects, variants as ``{"tag": "Name", "value": ...}`` (Quint
encodes ``Option`` as ``Some(x)`` / ``None`` with the unit value ``{"#tup":
[]}``). Quint's ``--mbt`` adds ``mbt::actionTaken`` and ``mbt::nondetPicks`` to
each state.

``encode_trace`` writes the model's state sequence of a ``wgk-trace/1`` file:
one ITF state for the initial state and one after every step, with the
observable projection (``target``, ``now``, ``tasks``, ``journal``) plus what
happened (``action``, ``request``, ``decision``; ``mbt::actionTaken`` too, so
Quint-minded tools see the step). Optional projection fields are ``Option``
variants, per-task and per-key tables are maps, the evidence is a set of
tuples. ``decode`` reads any ITF (ours, Apalache's, Quint's) into Python
values; ``plain`` turns those into JSON-shaped data (``Some``/``None``
unwrapped), so ``plain(decode(encode(p)))`` is the projection again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from wgk.conformance.traces.format import Trace, render

FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"
VARS = ["target", "now", "tasks", "journal", "action", "request", "decision", "mbt::actionTaken"]

#: Projection keys whose value may be null: encoded as Option (Some/None).
OPTIONAL = frozenset({"target", "plan", "owner", "candidate", "base", "saved-work", "retained",
                      "imported", "content", "origin"})
#: Projection keys whose value is a table with data keys: encoded as ``#map``.
MAPS = frozenset({"tasks", "journal", "receipts"})
#: Projection keys whose value is a set of tuples.
SETS = frozenset({"evidence"})


class ItfError(ValueError):
    """Malformed ITF: ``pointer: message``."""


@dataclass(frozen=True)
class Variant:
    """A variant value (``tag`` and ``value``), e.g. Quint's ``Some(3)``."""

    tag: str
    value: Any


@dataclass(frozen=True)
class ItfSet:
    """An ITF set, kept as the list of its elements in file order (elements may be unhashable)."""

    items: tuple


@dataclass(frozen=True)
class ItfMap:
    """An ITF map, kept as its ``(key, value)`` pairs (keys may be unhashable)."""

    pairs: tuple

    def to_dict(self) -> dict:
        return {_hashable(k): v for k, v in self.pairs}


@dataclass(frozen=True)
class Unserializable:
    text: str


UNIT = {"#tup": []}


# --- encoding ---------------------------------------------------------------------------


def some(x: Any) -> dict:
    return {"tag": "Some", "value": x}


NONE = {"tag": "None", "value": UNIT}


def encode_value(v: Any, key: str | None = None) -> Any:
    """Encode a JSON-shaped projection value; ``key`` says which projection field it is."""
    if key in OPTIONAL:
        return NONE if v is None else some(encode_value(v))
    if v is None:
        return NONE
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, int):
        return {"#bigint": str(v)}
    if key in SETS and isinstance(v, list):
        return {"#set": [{"#tup": [encode_value(x) for x in item]} if isinstance(item, list)
                         else encode_value(item) for item in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, dict):
        if key in MAPS:
            return {"#map": [[k, encode_value(x)] for k, x in v.items()]}
        return {k: encode_value(x, k) for k, x in v.items()}
    raise ItfError(f"cannot encode {type(v).__name__} value {v!r}")


def encode_state(index: int, projection: dict, step: dict | None, decision: dict | None) -> dict:
    action = "init" if step is None else (step["request"]["kind"] if "request" in step else step["env"])
    state = {"#meta": {"index": index}}
    for name in ("target", "now", "tasks", "journal"):
        state[name] = encode_value(projection[name], name)
    state["action"] = action
    request = step.get("request") if step else None
    state["request"] = NONE if request is None else some(encode_value(request))
    state["decision"] = NONE if decision is None else some(encode_value(decision))
    state["mbt::actionTaken"] = action
    return state


States = list[tuple["dict | None", "dict | None", dict]]


def encode_trace(trace: Trace, seq: States) -> dict:
    """The model's state sequence ``seq`` of a trace (``(step, decision, projection)`` for the
    initial state and after every step, as ``oracle.replay.states`` gives it), as an ITF
    document (deterministic)."""
    return {
        "#meta": {"format": "ITF", "format-description": FORMAT_DESCRIPTION,
                  "source": trace.path or trace.id,
                  "description": f"wgk-trace/1 {trace.id} replayed through the model"},
        "vars": list(VARS),
        "states": [encode_state(i, p, step, d) for i, (step, d, p) in enumerate(seq)],
    }


def dumps(doc: dict) -> str:
    return render(doc) + "\n"


# --- decoding -----------------------------------------------------------------------------------


def _hashable(k: Any) -> Any:
    if isinstance(k, list):
        return tuple(_hashable(x) for x in k)
    if isinstance(k, dict):
        return tuple(sorted((a, _hashable(b)) for a, b in k.items()))
    if isinstance(k, (ItfSet, ItfMap, Variant)):
        return k
    return k


def decode_value(x: Any, at: str = "") -> Any:
    """One ITF value as Python: int, str, bool, list (sequence), tuple, ItfSet, ItfMap, dict
    (record), Variant, Unserializable."""
    if isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, list):
        return [decode_value(v, f"{at}/{i}") for i, v in enumerate(x)]
    if not isinstance(x, dict):
        raise ItfError(f"{at or '/'}: unexpected value {x!r}")
    if "#bigint" in x:
        try:
            return int(x["#bigint"])
        except (TypeError, ValueError):
            raise ItfError(f"{at}/#bigint: not an integer: {x['#bigint']!r}") from None
    if "#tup" in x:
        return tuple(decode_value(v, f"{at}/#tup/{i}") for i, v in enumerate(_arr(x, "#tup", at)))
    if "#set" in x:
        return ItfSet(tuple(decode_value(v, f"{at}/#set/{i}") for i, v in enumerate(_arr(x, "#set", at))))
    if "#map" in x:
        pairs = []
        for i, pair in enumerate(_arr(x, "#map", at)):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ItfError(f"{at}/#map/{i}: a map entry must be [key, value]")
            pairs.append((decode_value(pair[0], f"{at}/#map/{i}/0"), decode_value(pair[1], f"{at}/#map/{i}/1")))
        return ItfMap(tuple(pairs))
    if "#unserializable" in x:
        return Unserializable(str(x["#unserializable"]))
    if set(x) == {"tag", "value"} and isinstance(x["tag"], str):
        return Variant(x["tag"], decode_value(x["value"], f"{at}/value"))
    return {k: decode_value(v, f"{at}/{k}") for k, v in x.items()}


def _arr(x: dict, key: str, at: str) -> list:
    if not isinstance(x[key], list):
        raise ItfError(f"{at}/{key}: expected an array")
    return x[key]


def plain(v: Any) -> Any:
    """Decoded ITF as JSON-shaped data: Some(x) -> x, None -> null, other variants ->
    {"tag", "value"}, tuples and sequences -> lists, sets -> sorted lists, maps -> objects
    (string keys) or lists of [key, value] pairs."""
    if isinstance(v, Variant):
        if v.tag == "Some":
            return plain(v.value)
        if v.tag == "None" and v.value in ((), None):
            return None
        return {"tag": v.tag, "value": plain(v.value)}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, ItfSet):
        items = [plain(x) for x in v.items]
        return sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
    if isinstance(v, ItfMap):
        if all(isinstance(k, str) for k, _ in v.pairs):
            return {k: plain(x) for k, x in v.pairs}
        return [[plain(k), plain(x)] for k, x in v.pairs]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, Unserializable):
        return {"#unserializable": v.text}
    return v


@dataclass
class ItfTrace:
    """A decoded ITF document. ``actions`` and ``picks`` come from Quint's ``--mbt`` fields."""

    meta: dict
    vars: list[str]
    states: list[dict[str, Any]]
    params: list[str] = field(default_factory=list)
    loop: int | None = None

    @property
    def actions(self) -> list[str | None]:
        return [s.get("mbt::actionTaken") for s in self.states]

    @property
    def picks(self) -> list[dict | None]:
        return [s.get("mbt::nondetPicks") for s in self.states]


def decode(doc: Any) -> ItfTrace:
    """Decode a parsed ITF document (``ItfError`` with a JSON pointer for malformed input)."""
    if not isinstance(doc, dict):
        raise ItfError("/: an ITF document must be a JSON object")
    if not isinstance(doc.get("states"), list):
        raise ItfError("/states: missing or not an array")
    names = doc.get("vars", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ItfError("/vars: expected an array of names")
    out = []
    for i, st in enumerate(doc["states"]):
        if not isinstance(st, dict):
            raise ItfError(f"/states/{i}: a state must be an object")
        out.append({k: decode_value(v, f"/states/{i}/{k}") for k, v in st.items() if k != "#meta"})
    meta = doc.get("#meta", {})
    return ItfTrace(meta=meta if isinstance(meta, dict) else {}, vars=names, states=out,
                    params=list(doc.get("params", [])),
                    loop=doc.get("loop") if isinstance(doc.get("loop"), int) else None)


def loads(text: str) -> ItfTrace:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ItfError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    return decode(doc)


def projections(itf: ItfTrace) -> list[dict]:
    """The observable projection in every state of an ITF document written by ``encode_trace``."""
    return [{k: plain(s[k]) for k in ("target", "now", "tasks", "journal")} for s in itf.states]
