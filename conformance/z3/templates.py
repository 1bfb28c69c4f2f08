"""Request and environment templates: one symbolic step stands for many concrete ones.

A request template fixes what the rules branch on in Python (kind, task, the
actor's authority, verdict, disposition, evidence id, whether ``imports`` or
``deadline`` is set, whether the capability names this graph and task) and
leaves every field the rules only *compare* symbolic: the capability's
numbers, the expected phase and revision, expected attempt and generation,
the owner's pid, birth, session and epochs, candidate, base, imports and
deadline. One template therefore covers every caller of its class, current
or stale. Actors with the same authority behave alike, so a template holds a
class of actors; which one sent the request is part of the digest (its
*shape*), a symbolic choice among the class.

A template builds its symbolic request from a per-step ``Pool`` of variables
and turns a z3 model's values back into a concrete ``Request``/``EnvStep``;
which templates exist, numbered with their shapes, is ``wgk.conformance.z3.catalogue``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from wgk.model.actions import OWNER
from wgk.model.env import EnvKind, EnvStep
from wgk.model.requests import EXIT_CODE_BASE, Capability, Owner, Request
from wgk.model.vocab import (
    AUTHORITY, MINTING_KINDS, TRANSACTION_KINDS, Actor, Contract, Disposition, Exit, Failure,
    Kind as K, Phase, ReviewVerdict, Verdict,
)

from wgk.conformance.z3.symbolic import SymDigest, int_var, nonzero_int

CAP = ("generation", "attempt", "fence", "lease_epoch")
CAS = ("expected_phase", "expected_revision")

#: Every symbolic request field; a digest slot each.
POOL: tuple[str, ...] = CAP + CAS + ("expected_attempt", "expected_generation") + OWNER + (
    "imports", "candidate", "base", "deadline", "token", "mint", "failure", "correlation") + (
    "requirements", "output", "validation", "contract", "review", "resolvable",
    "protected_free", "succeeded", "outputs_match", "route")
#: The fields a template copies from the pool when its kind's parameters name them.
PLAIN = ("expected_attempt", "expected_generation", "candidate", "base", "correlation",
         "requirements", "output", "validation", "resolvable", "protected_free", "succeeded",
         "outputs_match", "route")
#: The review valve's flags (1: holds) and labelled fields.
FLAGS = ("resolvable", "protected_free", "succeeded", "outputs_match")
LABELLED = {"contract": Contract, "review": ReviewVerdict}
SLOT = {name: n for n, name in enumerate(POOL)}

VERDICTS: dict[K, tuple[Verdict | None, ...]] = {
    K.VALIDATE: (Verdict.PASS, Verdict.FAIL, Verdict.NOT_REQUIRED, None),
    K.ACCEPT: (Verdict.PASS, Verdict.FAIL, Verdict.NOT_REQUIRED, None),
}
DISPOSITIONS: dict[K, tuple[Disposition | None, ...]] = {
    K.RECORD_DISPOSITION: (Disposition.LAND, Disposition.DELIVER, Disposition.REPORT, None),
}
UNKNOWN_TASK = "unknown-task"
FOREIGN_GRAPH = "foreign-graph"

#: Phase codes a client may send as expected phase (``phase_code`` of a Phase or Exit).
PHASE_CODES = tuple(int(p) for p in Phase) + tuple(EXIT_CODE_BASE + int(x) for x in Exit)


def code_to_phase(code: int) -> Phase | Exit:
    return Phase(code) if code < EXIT_CODE_BASE else Exit(code - EXIT_CODE_BASE)


@dataclass(frozen=True)
class Template:
    """A class of requests the rules treat alike (see the module docstring)."""

    kind: K
    task: str
    actors: tuple[Actor, ...]
    params: tuple[str, ...]
    verdict: Verdict | None = None
    disposition: Disposition | None = None
    evidence: str = ""
    cap: str = "none"            # "none" | "own" | "foreign"
    imports: bool = False
    deadline: bool = False
    by_actor: bool = False       # the rule asks who sent it: this template is one actor
    shapes: tuple[int, ...] = ()
    principal: str | None = None  # INTRUDER: sent by the intruder posing as its actors
    unheld: bool = False         # the intruder's roles it does not hold, beside those it does

    @property
    def is_env(self) -> bool:
        return False

    @property
    def label(self) -> str:
        extra = [x for x in (
            self.actors[0].label if self.by_actor else "",
            self.verdict.label if self.verdict else "",
            self.disposition.label if self.disposition else "",
            f"ev={self.evidence}" if self.evidence else "",
            "import" if self.imports else "",
            "deadline" if self.deadline else "",
            "foreign-cap" if self.cap == "foreign" else "",
            "unauthorized" if self.actors[0] not in AUTHORITY[self.kind] else "",
            f"as {self.principal}" if self.principal else "",
            "unheld" if self.unheld else "",
        ) if x]
        return f"{self.kind.label}({','.join([self.task] + extra)})"

    def request(self, pool: "Pool", graph_id: str, key: Any) -> Request:
        """The symbolic request of this template, fields drawn from ``pool``."""
        p = pool.vars
        cap = None
        if self.cap != "none":
            cap = Capability(FOREIGN_GRAPH if self.cap == "foreign" else graph_id, self.task,
                             p["generation"], p["attempt"], p["fence"], p["lease_epoch"])
        owner = None
        if "pid" in self.params:
            owner = Owner(p["pid"], p["birth"], p["session"], p["wrapper_epoch"], p["child_epoch"])
        kw: dict[str, Any] = {}
        for name in PLAIN + tuple(LABELLED):
            if name in self.params:
                kw[name] = p[name]
        if self.kind in TRANSACTION_KINDS:
            kw["expected_phase"] = p["expected_phase"]
            kw["expected_revision"] = p["expected_revision"]
        if self.imports:
            kw["imports"] = p["imports"]
        if self.deadline:
            kw["deadline"] = p["deadline"]
        for name in self.token_slots + self.failure_slot:
            kw[name] = p[name]
        r = SymRequest(self.kind, self.actors[0], self.task, key=key, cap=cap,
                       owner=owner, verdict=self.verdict, disposition=self.disposition,
                       evidence=self.evidence, principal=self.principal, **kw)
        object.__setattr__(r, "_digest", SymDigest(
            pool.shape, {SLOT[n]: p[n] for n in self.slot_names}))
        object.__setattr__(r, "_namespace", pool.nkeys if self.principal else 0)
        return r

    @property
    def slot_names(self) -> tuple[str, ...]:
        names = list(self.params)
        if self.cap != "none":
            names = list(CAP) + names
        if self.kind in TRANSACTION_KINDS:
            names += list(CAS)
        if self.imports:
            names.append("imports")
        if self.deadline:
            names.append("deadline")
        return tuple(names) + self.token_slots + self.failure_slot

    @property
    def failure_slot(self) -> tuple[str, ...]:
        """A failure report says why (a code the rules only compare and store)."""
        return ("failure",) if self.kind in (K.FAIL, K.FAIL_REVIEW) else ()

    @property
    def token_slots(self) -> tuple[str, ...]:
        """The token a K-request presents (any value: the template covers the attempt's own
        process and every forger alike) and the token an opener mints."""
        return (("token",) if self.cap != "none" else ()) + (
            ("mint",) if self.kind in MINTING_KINDS else ())

    def constraints(self, pool: "Pool") -> list:
        """What the pool's variables must satisfy for this template."""
        p = pool.vars
        lo, hi = min(self.shapes), max(self.shapes)
        assert hi - lo + 1 == len(self.shapes), "a template's shapes are numbered contiguously"
        out = [pool.shape == lo if lo == hi else z3.And(pool.shape >= lo, pool.shape <= hi)]
        if self.kind in TRANSACTION_KINDS:
            out.append(pool.phase_domain)
        if self.imports:
            out.append(p["imports"] > 0)
        if self.deadline:
            out.append(p["deadline"] > 0)
        if "pid" in self.params:                  # an owner is a real process (the wire refuses 0)
            out += [p["pid"] > 0, p["birth"] > 0]
        if self.kind in MINTING_KINDS:            # an opener mints a token (the wire refuses none)
            out.append(p["mint"] > 0)
        if self.failure_slot:                     # one of the failure labels
            out.append(p["failure"] <= max(Failure))
        if "correlation" in self.params:          # an event's name (the wire refuses none)
            out.append(p["correlation"] > 0)
        out += [p[name] <= 1 for name in FLAGS if name in self.params]
        out += [p[name] <= max(enum) for name, enum in LABELLED.items() if name in self.params]
        return out

    def concrete(self, values: dict[str, int], actor: Actor, key: str | None,
                 graph_id: str) -> Request:
        """The concrete request with the given field values."""
        cap = None
        if self.cap != "none":
            cap = Capability(FOREIGN_GRAPH if self.cap == "foreign" else graph_id, self.task,
                             values["generation"], values["attempt"], values["fence"],
                             values["lease_epoch"])
        owner = None
        if "pid" in self.params:
            owner = Owner(values["pid"], values["birth"], values["session"],
                          values["wrapper_epoch"], values["child_epoch"])
        kw: dict[str, Any] = {}
        for name in PLAIN:
            if name in self.params:
                kw[name] = values[name]
        for name, enum in LABELLED.items():
            if name in self.params:
                kw[name] = enum(values[name])
        if self.kind in TRANSACTION_KINDS:
            kw["expected_phase"] = code_to_phase(values["expected_phase"])
            kw["expected_revision"] = values["expected_revision"]
        if self.imports:
            kw["imports"] = values["imports"]
        if self.deadline:
            kw["deadline"] = values["deadline"]
        for name in self.token_slots:
            kw[name] = values[name]
        if self.failure_slot:
            kw["failure"] = Failure(values["failure"])
        return Request(self.kind, actor, self.task, key=key, cap=cap, owner=owner,
                       verdict=self.verdict, disposition=self.disposition,
                       evidence=self.evidence, principal=self.principal, **kw)


class SymRequest(Request):
    """A ``Request`` holding solver terms; its digest is a ``SymDigest``. Its key is an index
    into the role labels' journal keys; the intruder's namespace is the next ``nkeys``
    entries of the journal (``journal_keys``), as ``principal/key`` is concretely."""

    @property
    def digest(self) -> SymDigest:  # type: ignore[override]
        return self._digest

    @property
    def journal_key(self) -> Any:  # type: ignore[override]
        namespace = getattr(self, "_namespace", 0)
        if self.key is None or not namespace:
            return self.key
        key = self.__dict__.get("_journal_key")    # one term object, built once
        if key is None:
            key = self.key + namespace
            object.__setattr__(self, "_journal_key", key)
        return key


def journal_keys(keys: tuple[str, ...], templates) -> tuple[str, ...]:
    """The journal's keys of a symbolic check: the role labels' namespace, then that of the
    principal the templates send as (the intruder's), ``principal/key`` as concretely."""
    principals = sorted({t.principal for t in templates if getattr(t, "principal", None)})
    assert len(principals) <= 1, "one principal namespace beside the role labels'"
    return tuple(keys) + tuple(f"{p}/{k}" for p in principals for k in keys)


@dataclass(frozen=True)
class EnvTemplate:
    """An environment step of one kind on one task; content and birth are symbolic."""

    kind: EnvKind
    task: str = ""

    @property
    def is_env(self) -> bool:
        return True

    @property
    def label(self) -> str:
        return f"env:{self.kind.label}({self.task})"

    def step(self, pool: "Pool") -> EnvStep:
        onto = pool.vars["base"] if self.kind == EnvKind.EDIT else 0      # a rebase, or 0
        return EnvStep(self.kind, self.task, content=pool.vars["candidate"],
                       birth=pool.vars["birth"], amount=1, onto=onto)

    def constraints(self, pool: "Pool") -> list:
        """Contents and birth times name something (the wire refuses empty ones)."""
        if self.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET):
            return [pool.vars["candidate"] > 0]
        if self.kind == EnvKind.PID_REUSE:
            return [pool.vars["birth"] > 0]
        return []

    def concrete(self, values: dict[str, int]) -> EnvStep:
        content = values["candidate"] if self.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET) else 0
        birth = values["birth"] if self.kind == EnvKind.PID_REUSE else 0
        onto = values["base"] if self.kind == EnvKind.EDIT else 0
        return EnvStep(self.kind, self.task, content=content, birth=birth, amount=1, onto=onto)


#: Environment steps that change the state (crash and lost-response change no model state).
ENV_KINDS = (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE, EnvKind.MOVE_TARGET, EnvKind.TICK)
TASK_ENV = (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE)


class Pool:
    """The symbolic fields of one step: shared by every template of that step."""

    def __init__(self, prefix: str, nkeys: int = 0):
        self.prefix = prefix
        self.vars: dict[str, Any] = {}
        for name in POOL:
            if name in ("imports", "deadline"):
                self.vars[name] = nonzero_int(f"{prefix}.{name}")
            else:
                self.vars[name] = int_var(f"{prefix}.{name}")
        self.shape = int_var(f"{prefix}.shape")
        code = self.vars["expected_phase"]
        self.phase_domain = z3.Or(z3.And(code >= min(PHASE_CODES[:len(Phase)]),
                                         code <= max(PHASE_CODES[:len(Phase)])),
                                  z3.And(code >= 100, code <= max(PHASE_CODES)))
        self.key = int_var(f"{prefix}.key") if nkeys else None
        self.nkeys = nkeys

    def domain(self) -> list:
        out = [v >= 0 for v in self.vars.values()]
        if self.key is not None:
            out += [self.key >= 0, self.key < self.nkeys]
        return out
