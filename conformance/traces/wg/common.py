"""Shared helpers of the WG importer: source objects read field by field, the decision and fact
shapes, and the transaction state a well-behaved client keeps between requests."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from wgk.model.names import broken_rule, is_name
from wgk.model.vocab import EDGES, Kind, NEEDS_CAPABILITY, TRANSACTION_KINDS

V1_COMMIT = "b0892ea7"
FAMILIES = ("v1", "v2", "deletion-map", "daemon/v1", "daemon/v2", "daemon/v3", "runtime/v1",
            "simple-land/v1", "planner-runtime")
FAMILY_PATHS = {
    "v1": "formal/fixtures/v1",
    "v2": "formal/fixtures/v2",
    "deletion-map": "docs/research/traces/wg-control-plane-authority-deletion-map",
    "daemon/v1": "formal/fixtures/daemon/v1",
    "daemon/v2": "formal/fixtures/daemon/v2",
    "daemon/v3": "formal/fixtures/daemon/v3",
    "runtime/v1": "formal/fixtures/runtime/v1",
    "simple-land/v1": "formal/fixtures/simple-land/v1",
    "planner-runtime": "tests/fixtures/planner_runtime",
}
PHASE_AFTER = {to.label: kind.label for kind, (_, to) in EDGES.items()}


class WgImportError(ValueError):
    """A source field or event that cannot be mapped: ``file: /pointer: message``."""

    def __init__(self, file: str, at: str, message: str):
        super().__init__(f"{file}: {at or '/'}: {message}")
        self.file = file
        self.at = at


@dataclass(frozen=True)
class Unmapped:
    """A case the model cannot express exactly: the file, the case, the field, and why."""

    file: str
    case: str
    field: str
    reason: str

    def line(self) -> str:
        return f"{self.file}: case {self.case}: field {self.field}: {self.reason}"

    def to_json(self) -> dict:
        return {"file": self.file, "case": self.case, "field": self.field, "reason": self.reason}


# --- reading source objects, field by field ------------------------------------------------


class Src:
    """A source object whose every field must be consumed: ``finish()`` names the first unmapped one."""

    def __init__(self, value: Any, at: str, file: str):
        self.value = value
        self.at = at
        self.file = file
        self.used: set[str] = set()
        if not isinstance(value, dict):
            raise self.error("expected an object")

    def error(self, message: str, key: str | None = None) -> WgImportError:
        at = self.at + ("/" + key if key is not None else "")
        return WgImportError(self.file, at, message)

    def has(self, key: str) -> bool:
        return key in self.value

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.value.get(key, default)

    def req(self, key: str, kind: type | tuple | None = None) -> Any:
        if key not in self.value:
            raise self.error(f"field {key!r} is missing", key)
        self.used.add(key)
        v = self.value[key]
        if kind is not None and not isinstance(v, kind):
            raise self.error(f"field {key!r} has an unexpected value {v!r}", key)
        return v

    def const(self, key: str, expected: Any) -> None:
        v = self.req(key)
        if v != expected:
            raise self.error(f"field {key!r} is {v!r}; only {expected!r} can be mapped", key)

    def sub(self, key: str) -> "Src":
        return Src(self.req(key), f"{self.at}/{key}", self.file)

    def items(self, key: str) -> list["Src"]:
        seq = self.req(key, list)
        return [Src(v, f"{self.at}/{key}/{i}", self.file) for i, v in enumerate(seq)]

    def finish(self) -> None:
        extra = [k for k in self.value if k not in self.used]
        if extra:
            raise self.error(f"field {extra[0]!r} cannot be mapped", extra[0])


def merge_facts(facts: dict, more: dict, err: Callable[[str], WgImportError], path: str = "") -> dict:
    """Merge nested fact dicts; the same fact with two different values is an error."""
    for k, v in more.items():
        if k in facts and isinstance(facts[k], dict) and isinstance(v, dict) \
                and not any(m in v for m in ("$kinds", "$contains")):
            merge_facts(facts[k], v, err, f"{path}.{k}")
        elif k in facts and facts[k] != v:
            raise err(f"conflicting facts for {path}.{k}: {facts[k]!r} and {v!r}")
        else:
            facts[k] = v
    return facts


def content_key(value: Any) -> str:
    raw = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def decided(decision: str, code: str | None = None) -> dict:
    return {"decision": decision, "code": code} if code else {"decision": decision}


def duplicate_of(original: dict) -> dict:
    return {"decision": "duplicate", "original": original}


def binding_of(fence: int, candidate: str, base: str) -> dict:
    return {"fence": fence, "candidate": candidate, "base": base}


# --- shared trace-writing state ------------------------------------------------------------------


@dataclass
class Tx:
    """What a well-behaved client knows from the responses it was given."""

    task: str
    graph: str
    k: dict
    phase: str = "absent"
    revision: int = 0
    target: str = "main-0"
    worktree: str = "main-0"
    candidate: str | None = None
    base: str | None = None
    disposition: str | None = None
    steps: list[dict] = field(default_factory=list)
    first: dict[str, dict] = field(default_factory=dict)   # key -> first decision

    def cap(self, **override: Any) -> dict:
        return {"graph": self.graph, "task": self.task, **self.k, **override}

    def request(self, kind: str, actor: str, key: str, cap: dict | None = None, **params: Any) -> dict:
        r: dict[str, Any] = {"kind": kind, "actor": actor, "task": self.task, "key": key}
        k = Kind.parse(kind)
        if k in NEEDS_CAPABILITY:
            r["cap"] = cap if cap is not None else self.cap()
        if k in TRANSACTION_KINDS:
            r["expected-phase"] = self.phase
            r["expected-revision"] = self.revision
        for name, value in params.items():
            if value is not None:
                r[name.replace("_", "-")] = value
        return r

    def emit(self, step: dict, expect: dict | None, origin: dict) -> dict:
        if expect is not None:
            step["expect"] = expect
        step["from"] = origin
        self.steps.append(step)
        if "request" in step and expect is not None:
            key = step["request"]["key"]
            self.first.setdefault(key, expect)
            if expect["decision"] == "applied":
                self.advance(step["request"])
        return step

    def advance(self, r: dict) -> None:
        """An applied request: move the transaction as the client will have seen it."""
        k = Kind.parse(r["kind"])
        if k in EDGES:
            self.phase = EDGES[k][1].label
            self.revision += 1
        if k == Kind.SAVE_WORK:
            self.candidate, self.base = r["candidate"], r["base"]
        if k == Kind.RECORD_DISPOSITION:
            self.disposition = r["disposition"]
        if k == Kind.COMMIT_EFFECT and self.disposition == "land":
            self.target = r["candidate"]
        if k == Kind.LEGACY_DONE:
            self.phase, self.revision = "needs-reconciliation", self.revision + 1


def origin_of(at: str, event: str, decision: Any) -> dict:
    return {"pointer": at, "event": event, "decision": decision}


def task_spec(name: str, requires_assignment: bool = False) -> dict:
    return {"name": name, "deps": [], "review-required": False, "requires-assignment": requires_assignment}


# --- the peer's identifiers as names -----------------------------------------------------------

#: Where a trace holds names (wgk.model.names): the peer's ids there become names.
NAME_FIELDS = ("graph", "target", "worktree", "origin", "content", "candidate", "base", "imports",
               "saved-work", "retained", "imported")
#: Parts of a trace that are prose or provenance, never names.
NOT_NAMES = ("source", "title", "description", "from", "note", "key", "evidence")


def peer_name(value: str, file: str, at: str) -> str:
    """The name (in the grammar of ``wgk.model.names``) of a peer identifier: itself when it is
    one, else with ``:`` as ``.`` (``graph:v2:golden`` -> ``graph.v2.golden``); anything else
    is an error naming the rule."""
    if is_name(value):
        return value
    name = value.replace(":", ".")
    if not is_name(name):
        raise WgImportError(file, at, f"identifier {value!r} is no name (rule {broken_rule(name)})")
    return name


def as_names(doc: dict, file: str) -> dict:
    """``doc`` with every peer identifier found in a name field replaced by its name, wherever
    the same string stands as a value (the expected facts repeat the candidates and bases)."""
    found: dict[str, str] = {}

    def collect(v: Any, at: str, key: str | None) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in NOT_NAMES:
                    collect(x, f"{at}/{k}", k)
        elif isinstance(v, list):
            for n, x in enumerate(v):
                collect(x, f"{at}/{n}", key)
        elif isinstance(v, str) and (key in NAME_FIELDS or at == "/graph/id"):
            found[v] = peer_name(v, file, at)

    def rename(v: Any, key: str | None = None) -> Any:
        if isinstance(v, dict):
            return {k: (x if k in NOT_NAMES else rename(x, k)) for k, x in v.items()}
        if isinstance(v, list):
            return [rename(x, key) for x in v]
        return found.get(v, v) if isinstance(v, str) else v

    collect(doc, "", None)
    if len(set(found.values())) != len(found):
        raise WgImportError(file, "", "two peer identifiers would become the same name")
    return rename(doc)