"""The wire form of docs/vocabulary.md, converted to and from the model's types.

Content ids are strings on the wire and ints in the model; ``Names`` interns
them. Malformed input raises ``WireError`` naming the JSON pointer of the
offending field, so a trace loader or the JSON-lines protocol can report it in
one line.
"""
from __future__ import annotations

from typing import Any

from wgk.model.env import EnvKind, EnvStep
from wgk.model.kernel import Decision
from wgk.model.observe import Names
from wgk.model.requests import Capability, Owner, Request
from wgk.model.vocab import (
    Actor, Code, Contract, DecisionKind, Disposition, Exit, Failure, Kind, Phase, Reason,
    ReviewVerdict, Verdict,
    MINTING_KINDS, TRANSACTION_KINDS, WAIT_NAMING_KINDS,
)


class WireError(ValueError):
    """A malformed wire object; ``pointer`` is a JSON pointer into it."""

    def __init__(self, pointer: str, message: str):
        super().__init__(f"{pointer or '/'}: {message}")
        self.pointer = pointer
        self.message = message


#: The review valve's digests (content ids on the wire) and flags (booleans on the wire).
REVIEW_FIELDS = ("requirements", "output", "validation")
REVIEW_FLAGS = ("resolvable", "protected-free", "succeeded", "outputs-match")
REQUEST_FIELDS = {
    "kind", "actor", "task", "key", "cap", "expected-phase", "expected-revision",
    "expected-attempt", "expected-generation", "owner", "imports", "candidate", "base",
    "verdict", "disposition", "evidence", "deadline", "reason", "principal", "token", "mint",
    "failure", "correlation", "route",
} | set(REVIEW_FIELDS) | set(REVIEW_FLAGS) | {"contract", "review"}
CAP_FIELDS = ("graph", "task", "generation", "attempt", "fence", "lease-epoch")
OWNER_FIELDS = ("pid", "birth", "session", "wrapper-epoch", "child-epoch")


def _enum(cls, value: Any, pointer: str):
    if not isinstance(value, str):
        raise WireError(pointer, f"expected a {cls.__name__} label, got {value!r}")
    try:
        return cls.parse(value)
    except ValueError as e:
        raise WireError(pointer, str(e)) from None


def _int(value: Any, pointer: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError(pointer, f"expected an integer, got {value!r}")
    return value


def _phase(value: Any, pointer: str) -> Phase | Exit:
    if not isinstance(value, str):
        raise WireError(pointer, f"expected a phase label, got {value!r}")
    for cls in (Phase, Exit):
        try:
            return cls.parse(value)
        except ValueError:
            continue
    allowed = ", ".join(Phase.labels() + [e for e in Exit.labels() if e != "none"])
    raise WireError(pointer, f"unknown phase {value!r} (expected one of: {allowed})")


def request_from_wire(d: Any, names: Names, pointer: str = "") -> Request:
    """Build a model Request from its wire form (raises WireError)."""
    if not isinstance(d, dict):
        raise WireError(pointer, "a request must be a JSON object")
    unknown = sorted(set(d) - REQUEST_FIELDS)
    if unknown:
        raise WireError(f"{pointer}/{unknown[0]}", "unknown request field")
    for required in ("kind", "actor", "task"):
        if required not in d:
            raise WireError(f"{pointer}/{required}", "missing")
    kind = _enum(Kind, d["kind"], f"{pointer}/kind")
    actor = _enum(Actor, d["actor"], f"{pointer}/actor")
    if not isinstance(d["task"], str):
        raise WireError(f"{pointer}/task", "expected a task name")
    kw: dict[str, Any] = {}
    if "key" in d:
        if not isinstance(d["key"], str) or not d["key"]:
            raise WireError(f"{pointer}/key", "expected a non-empty string")
        kw["key"] = d["key"]
    if d.get("cap") is not None:
        kw["cap"] = _cap_from_wire(d["cap"], f"{pointer}/cap")
    if "expected-phase" in d:
        kw["expected_phase"] = _phase(d["expected-phase"], f"{pointer}/expected-phase")
    for f in ("expected-revision", "expected-attempt", "expected-generation", "deadline"):
        if f in d:
            kw[f.replace("-", "_")] = _int(d[f], f"{pointer}/{f}")
    if d.get("owner") is not None:
        kw["owner"] = _owner_from_wire(d["owner"], names, f"{pointer}/owner")
    for f in ("imports", "candidate", "base") + REVIEW_FIELDS:
        if d.get(f) is not None:
            if not isinstance(d[f], str):
                raise WireError(f"{pointer}/{f}", "expected a content id (string)")
            kw[f] = names.cid(d[f])
    if "verdict" in d:
        kw["verdict"] = _enum(Verdict, d["verdict"], f"{pointer}/verdict")
    if "contract" in d:
        kw["contract"] = _enum(Contract, d["contract"], f"{pointer}/contract")
    if "review" in d:
        kw["review"] = _enum(ReviewVerdict, d["review"], f"{pointer}/review")
    for f in REVIEW_FLAGS:
        if f in d:
            if not isinstance(d[f], bool):
                raise WireError(f"{pointer}/{f}", f"expected true or false, got {d[f]!r}")
            kw[f.replace("-", "_")] = int(d[f])
    if "disposition" in d:
        kw["disposition"] = _enum(Disposition, d["disposition"], f"{pointer}/disposition")
    if "reason" in d:
        kw["reason"] = _enum(Reason, d["reason"], f"{pointer}/reason")
    if "failure" in d:
        kw["failure"] = _enum(Failure, d["failure"], f"{pointer}/failure")
    if "evidence" in d:
        if not isinstance(d["evidence"], str):
            raise WireError(f"{pointer}/evidence", "expected an evidence id (string)")
        kw["evidence"] = d["evidence"]
    if "principal" in d:
        if not isinstance(d["principal"], str) or not d["principal"]:
            raise WireError(f"{pointer}/principal", "expected a principal name")
        kw["principal"] = d["principal"]
    for f in ("token", "mint"):
        if f in d:
            if not isinstance(d[f], str) or not d[f]:
                raise WireError(f"{pointer}/{f}", "expected a capability token (a string)")
            kw[f] = names.tid(d[f])
    if "correlation" in d:
        if not isinstance(d["correlation"], str) or not d["correlation"]:
            raise WireError(f"{pointer}/correlation", "expected a correlation id (a name)")
        kw["correlation"] = names.corr(d["correlation"])
    if "route" in d:
        if not isinstance(d["route"], str) or not d["route"]:
            raise WireError(f"{pointer}/route", "expected a provider route (a name)")
        kw["route"] = names.rid(d["route"])
    if kind in WAIT_NAMING_KINDS and "correlation" not in kw:
        raise WireError(f"{pointer}/correlation",
                        f"missing: {kind.label} names the event an external wait waits for")
    if kind in MINTING_KINDS and "mint" not in kw:
        raise WireError(f"{pointer}/mint", f"missing: {kind.label} mints the opened attempt's token")
    if kind in TRANSACTION_KINDS:
        for f in ("expected-phase", "expected-revision"):
            if f not in d:
                raise WireError(f"{pointer}/{f}", f"missing: {kind.label} moves the SaveTransaction")
    return Request(kind, actor, d["task"], **kw)


def _cap_from_wire(c: Any, at: str) -> Capability:
    if not isinstance(c, dict):
        raise WireError(at, "expected an object")
    missing = [f for f in CAP_FIELDS if f not in c]
    if missing:
        raise WireError(f"{at}/{missing[0]}", "missing")
    extra = sorted(set(c) - set(CAP_FIELDS))
    if extra:
        raise WireError(f"{at}/{extra[0]}", "unknown capability field")
    return Capability(
        graph=str(c["graph"]), task=str(c["task"]),
        generation=_int(c["generation"], f"{at}/generation"),
        attempt=_int(c["attempt"], f"{at}/attempt"),
        fence=_int(c["fence"], f"{at}/fence"),
        lease_epoch=_int(c["lease-epoch"], f"{at}/lease-epoch"))


def _owner_from_wire(o: Any, names: Names, at: str) -> Owner:
    if not isinstance(o, dict):
        raise WireError(at, "expected an object")
    for f in ("pid", "birth"):
        if f not in o:
            raise WireError(f"{at}/{f}", "missing")
    for f in ("pid", "birth"):
        if _int(o[f], f"{at}/{f}") <= 0:
            raise WireError(f"{at}/{f}", "must be positive (0 means no process)")
    return Owner(
        pid=_int(o["pid"], f"{at}/pid"),
        birth=_int(o["birth"], f"{at}/birth"),
        session=names.sid(o.get("session")),
        wrapper_epoch=_int(o.get("wrapper-epoch", 1), f"{at}/wrapper-epoch"),
        child_epoch=_int(o.get("child-epoch", 1), f"{at}/child-epoch"))


def request_to_wire(r: Request, names: Names) -> dict[str, Any]:
    """The wire form of a model Request (content ids as names)."""
    out: dict[str, Any] = {"kind": r.kind.label, "actor": r.actor.label, "task": r.task}
    if r.key is not None:
        out["key"] = r.key
    if r.cap is not None:
        c = r.cap
        out["cap"] = {"graph": c.graph, "task": c.task, "generation": c.generation,
                      "attempt": c.attempt, "fence": c.fence, "lease-epoch": c.lease_epoch}
    if r.expected_phase is not None:
        out["expected-phase"] = r.expected_phase.label
    for f in ("expected_revision", "expected_attempt", "expected_generation"):
        v = getattr(r, f)
        if v is not None:
            out[f.replace("_", "-")] = v
    if r.owner is not None:
        o = r.owner
        out["owner"] = {"pid": o.pid, "birth": o.birth, "session": names.sname(o.session),
                        "wrapper-epoch": o.wrapper_epoch, "child-epoch": o.child_epoch}
    for f in ("imports", "candidate", "base") + REVIEW_FIELDS:
        v = getattr(r, f)
        if v:
            out[f] = names.cname(v)
    if r.contract:
        out["contract"] = Contract(r.contract).label
    if r.review:
        out["review"] = ReviewVerdict(r.review).label
    for f in REVIEW_FLAGS:
        if getattr(r, f.replace("-", "_")):
            out[f] = True
    if r.verdict is not None:
        out["verdict"] = r.verdict.label
    if r.disposition is not None:
        out["disposition"] = r.disposition.label
    if r.evidence:
        out["evidence"] = r.evidence
    if r.deadline:
        out["deadline"] = r.deadline
    if r.reason != Reason.NONE:
        out["reason"] = r.reason.label
    if r.failure != Failure.NONE:
        out["failure"] = r.failure.label
    if r.principal is not None:
        out["principal"] = r.principal
    if r.token:
        out["token"] = names.tname(r.token)
    if r.mint:
        out["mint"] = names.tname(r.mint)
    if r.correlation:
        out["correlation"] = names.corrname(r.correlation)
    if r.route:
        out["route"] = names.rname(r.route)
    return out


def decision_to_wire(d: Decision) -> dict[str, Any]:
    return d.to_json()


def decision_label(wire: dict) -> str:
    """``applied``, ``rejected:cas-moved`` ...: the comparable form of a wire decision."""
    label = wire.get("decision", "?")
    return f"{label}:{wire['code']}" if wire.get("code") else label


ENV_FIELDS = {"env", "task", "content", "onto", "paths", "birth", "amount"}


def env_from_wire(d: Any, names: Names, pointer: str = "") -> EnvStep:
    if not isinstance(d, dict):
        raise WireError(pointer, "an environment step must be a JSON object")
    unknown = sorted(set(d) - ENV_FIELDS)
    if unknown:
        raise WireError(f"{pointer}/{unknown[0]}", "unknown environment field")
    kind = _enum(EnvKind, d.get("env"), f"{pointer}/env")
    task = d.get("task", "")
    if kind in (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE) and not task:
        raise WireError(f"{pointer}/task", f"{kind.label} needs a task")
    content = 0
    if kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET):
        if not isinstance(d.get("content"), str) or not d["content"]:
            raise WireError(f"{pointer}/content", "expected a content id (a non-empty string)")
        content = names.cid(d["content"])
    birth = _int(d.get("birth"), f"{pointer}/birth") if kind == EnvKind.PID_REUSE else 0
    if kind == EnvKind.PID_REUSE and birth <= 0:
        raise WireError(f"{pointer}/birth", "must be positive")
    amount = _int(d.get("amount", 1), f"{pointer}/amount") if kind == EnvKind.TICK else 1
    onto = 0
    if "onto" in d:
        if kind != EnvKind.EDIT:
            raise WireError(f"{pointer}/onto", "only an edit rebases onto a commit")
        if not isinstance(d["onto"], str) or not d["onto"]:
            raise WireError(f"{pointer}/onto", "expected a content id (a non-empty string)")
        onto = names.cid(d["onto"])
    return EnvStep(kind, task, content=content, birth=birth, amount=amount, onto=onto)


def env_to_wire(e: EnvStep, names: Names) -> dict[str, Any]:
    out: dict[str, Any] = {"env": e.kind.label}
    if e.task:
        out["task"] = e.task
    if e.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET):
        out["content"] = names.cname(e.content)
    if e.kind == EnvKind.EDIT and e.onto:
        out["onto"] = names.cname(e.onto)
    if e.kind == EnvKind.PID_REUSE:
        out["birth"] = e.birth
    if e.kind == EnvKind.TICK:
        out["amount"] = e.amount
    return out


__all__ = [
    "WireError", "request_from_wire", "request_to_wire", "decision_to_wire", "decision_label",
    "env_from_wire", "env_to_wire", "DecisionKind", "Code",
]
