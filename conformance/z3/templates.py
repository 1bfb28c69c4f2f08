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

``Catalogue`` numbers the templates and shapes, builds symbolic requests from
a per-step ``Pool`` of variables, and turns a z3 model back into concrete
``Request``/``EnvStep`` objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import z3

from wgk.model.actions import OWNER, PARAMS, WITH_DEADLINE, WITH_EVIDENCE, WITH_IMPORTS
from wgk.model.env import EnvKind, EnvStep
from wgk.model.requests import EXIT_CODE_BASE, Capability, Owner, Request, phase_code
from wgk.model.vocab import (
    INTRUDER, AUTHORITY, NEEDS_CAPABILITY, TRANSACTION_KINDS, Actor, Disposition, Exit,
    Kind as K, Phase, Verdict,
)

from wgk.conformance.z3.symbolic import SymDigest, nonzero_int, value

CAP = ("generation", "attempt", "fence", "lease_epoch")
CAS = ("expected_phase", "expected_revision")

#: Every symbolic request field; a digest slot each.
POOL: tuple[str, ...] = CAP + CAS + ("expected_attempt", "expected_generation") + OWNER + (
    "imports", "candidate", "base", "deadline")
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
        for name in ("expected_attempt", "expected_generation", "candidate", "base"):
            if name in self.params:
                kw[name] = p[name]
        if self.kind in TRANSACTION_KINDS:
            kw["expected_phase"] = p["expected_phase"]
            kw["expected_revision"] = p["expected_revision"]
        if self.imports:
            kw["imports"] = p["imports"]
        if self.deadline:
            kw["deadline"] = p["deadline"]
        r = SymRequest(self.kind, self.actors[0], self.task, key=self._key(key), cap=cap,
                       owner=owner, verdict=self.verdict, disposition=self.disposition,
                       evidence=self.evidence, principal=self.principal, **kw)
        object.__setattr__(r, "_digest", SymDigest(
            pool.shape, {SLOT[n]: p[n] for n in self.slot_names}))
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
        return tuple(names)

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
        for name in ("expected_attempt", "expected_generation", "candidate", "base"):
            if name in self.params:
                kw[name] = values[name]
        if self.kind in TRANSACTION_KINDS:
            kw["expected_phase"] = code_to_phase(values["expected_phase"])
            kw["expected_revision"] = values["expected_revision"]
        if self.imports:
            kw["imports"] = values["imports"]
        if self.deadline:
            kw["deadline"] = values["deadline"]
        return Request(self.kind, actor, self.task, key=self._key(key), cap=cap, owner=owner,
                       verdict=self.verdict, disposition=self.disposition,
                       evidence=self.evidence, principal=self.principal, **kw)

    def _key(self, key: Any) -> Any:
        """The symbolic journal has one namespace (the role labels'): the intruder's
        requests carry no key there (its namespace is explored concretely)."""
        return None if self.principal else key


class SymRequest(Request):
    """A ``Request`` holding solver terms; its digest is a ``SymDigest``."""

    @property
    def digest(self) -> SymDigest:  # type: ignore[override]
        return self._digest


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
        return EnvStep(self.kind, self.task, content=pool.vars["candidate"],
                       birth=pool.vars["birth"], amount=1)

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
        return EnvStep(self.kind, self.task, content=content, birth=birth, amount=1)


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
                self.vars[name] = z3.Int(f"{prefix}.{name}")
        self.shape = z3.Int(f"{prefix}.shape")
        code = self.vars["expected_phase"]
        self.phase_domain = z3.Or(z3.And(code >= min(PHASE_CODES[:len(Phase)]),
                                         code <= max(PHASE_CODES[:len(Phase)])),
                                  z3.And(code >= 100, code <= max(PHASE_CODES)))
        self.key = z3.Int(f"{prefix}.key") if nkeys else None
        self.nkeys = nkeys

    def domain(self) -> list:
        out = [v >= 0 for v in self.vars.values()]
        if self.key is not None:
            out += [self.key >= 0, self.key < self.nkeys]
        return out


def _authority_classes(kind: K) -> tuple[tuple[Actor, ...], tuple[Actor, ...]]:
    """(actors allowed to send ``kind``, actors who are not)."""
    allowed = tuple(a for a in Actor if a in AUTHORITY[kind])
    denied = tuple(a for a in Actor if a not in AUTHORITY[kind])
    return allowed, denied


def request_templates(kinds: Iterable[K], tasks: Iterable[str], evidence_ids: tuple[str, ...], *,
                      rejections: bool = True, deadlines: bool = True,
                      verdicts: dict | None = None, dispositions: dict | None = None,
                      by_actor: frozenset = frozenset()) -> list[Template]:
    """Every behavioural class of request of the given kinds on the given tasks.

    ``rejections`` adds the classes rejected before any rule runs (an
    unauthorized actor, an unknown task, a capability for another graph).
    Authorized actors form one class, except for the kinds in ``by_actor``
    (whose rules ask who sent the request): there each actor is its own."""
    verdicts = VERDICTS if verdicts is None else verdicts
    dispositions = DISPOSITIONS if dispositions is None else dispositions
    out: list[Template] = []
    tasks = list(tasks)
    for kind in kinds:
        allowed, denied = _authority_classes(kind)
        cap = "own" if kind in NEEDS_CAPABILITY else "none"
        params = PARAMS.get(kind, ())
        for task in tasks:
            for verdict in verdicts.get(kind, (None,)):
                for disposition in dispositions.get(kind, (None,)):
                    for ev in (evidence_ids if kind in WITH_EVIDENCE else ("",)):
                        for imports in ((False, True) if kind in WITH_IMPORTS else (False,)):
                            for deadline in ((False, True) if deadlines and kind in WITH_DEADLINE
                                             else (False,)):
                                for actors in ([(a,) for a in allowed] if kind in by_actor
                                               else [allowed] if allowed else []):
                                    out.append(Template(kind, task, actors, params, verdict,
                                                        disposition, ev, cap, imports, deadline,
                                                        kind in by_actor))
            if rejections:
                first_ev = evidence_ids[0] if kind in WITH_EVIDENCE else ""
                first_v = verdicts.get(kind, (None,))[0]
                first_d = dispositions.get(kind, (None,))[0]
                if denied:
                    out.append(Template(kind, task, denied, params, first_v, first_d, first_ev, cap))
                if cap == "own" and allowed:
                    out.append(Template(kind, task, allowed, params, first_v, first_d, first_ev,
                                        "foreign"))
        if rejections and allowed:
            out.append(Template(kind, UNKNOWN_TASK, allowed, params,
                                verdicts.get(kind, (None,))[0], dispositions.get(kind, (None,))[0],
                                evidence_ids[0] if kind in WITH_EVIDENCE else "", cap))
    return out


def intruder_templates(kinds: Iterable[K], tasks: Iterable[str],
                       evidence_ids: tuple[str, ...]) -> list[Template]:
    """One template per kind and task: the intruder posing as the kind's authorized actors
    with a capability for this graph (every field it compares is symbolic)."""
    out: list[Template] = []
    tasks = list(tasks)
    for kind in kinds:
        allowed, _ = _authority_classes(kind)
        if not allowed:
            continue
        cap = "own" if kind in NEEDS_CAPABILITY else "none"
        for task in tasks:
            out.append(Template(kind, task, allowed, PARAMS.get(kind, ()),
                                VERDICTS.get(kind, (None,))[0],
                                DISPOSITIONS.get(kind, (None,))[0],
                                evidence_ids[0] if kind in WITH_EVIDENCE else "", cap,
                                principal=INTRUDER))
    return out


def env_templates(tasks: Iterable[str], kinds: Iterable[EnvKind] = ENV_KINDS) -> list[EnvTemplate]:
    out: list[EnvTemplate] = []
    kinds = list(kinds)
    for task in tasks:
        out += [EnvTemplate(k, task) for k in kinds if k in TASK_ENV]
    out += [EnvTemplate(k) for k in kinds if k not in TASK_ENV]
    return out


@dataclass
class Catalogue:
    """Numbered templates and request shapes (a shape is a template plus one actor)."""

    templates: list
    graph_id: str = "g"
    shapes: list[tuple[int, Actor]] = field(default_factory=list)

    def __post_init__(self) -> None:
        numbered = []
        for n, tpl in enumerate(self.templates):
            if isinstance(tpl, Template):
                ids = []
                for actor in tpl.actors:
                    ids.append(len(self.shapes))
                    self.shapes.append((n, actor))
                tpl = Template(**{**tpl.__dict__, "shapes": tuple(ids)})
            numbered.append(tpl)
        self.templates = numbered

    def step(self, n: int, pool: Pool):
        """The symbolic request or environment step of template ``n``."""
        tpl = self.templates[n]
        if tpl.is_env:
            return tpl.step(pool)
        return tpl.request(pool, self.graph_id, pool.key)

    def decode_digest(self, shape: int, slots: tuple) -> str:
        """The concrete sha256 digest of the request a stored (shape, slots) names."""
        if not 0 <= shape < len(self.shapes):
            raise ValueError(f"digest shape {shape} outside the catalogue")
        n, actor = self.shapes[shape]
        values = {name: slots[SLOT[name]] for name in POOL}
        return self.templates[n].concrete(values, actor, None, self.graph_id).digest

    def concrete_step(self, n: int, model: z3.ModelRef, pool: Pool, keys: tuple[str, ...]):
        """The concrete request or environment step a z3 model picks for template ``n``."""
        tpl = self.templates[n]
        values = {name: value(model, v) for name, v in pool.vars.items()}
        if tpl.is_env:
            return tpl.concrete(values)
        shape = value(model, pool.shape)
        shape_tpl, actor = self.shapes[shape]
        if shape_tpl != n:
            raise ValueError(f"shape {shape} does not belong to template {tpl.label}")
        key = keys[value(model, pool.key)] if pool.key is not None else None
        return tpl.concrete(values, actor, key, self.graph_id)

    def locate(self, r: Request) -> tuple[int, int, dict[str, int]]:
        """(template, shape, pool values) of a concrete request this catalogue covers."""
        cap = "none" if r.cap is None else (
            "own" if r.cap.graph == self.graph_id and r.cap.task == r.task else "foreign")
        for n, tpl in enumerate(self.templates):
            if tpl.is_env or r.actor not in tpl.actors:
                continue
            if (tpl.kind, tpl.task, tpl.verdict, tpl.disposition, tpl.evidence, tpl.cap,
                    tpl.imports, tpl.deadline) != (r.kind, r.task, r.verdict, r.disposition,
                                                   r.evidence, cap, bool(r.imports),
                                                   bool(r.deadline)):
                continue
            values = {name: 0 for name in POOL}
            if r.cap is not None:
                values.update(generation=r.cap.generation, attempt=r.cap.attempt,
                              fence=r.cap.fence, lease_epoch=r.cap.lease_epoch)
            if r.owner is not None:
                values.update(pid=r.owner.pid, birth=r.owner.birth, session=r.owner.session,
                              wrapper_epoch=r.owner.wrapper_epoch,
                              child_epoch=r.owner.child_epoch)
            if r.expected_phase is not None:
                values["expected_phase"] = phase_code(r.expected_phase)
            for name in ("expected_revision", "expected_attempt", "expected_generation"):
                if getattr(r, name) is not None:
                    values[name] = getattr(r, name)
            values.update(imports=r.imports, candidate=r.candidate, base=r.base,
                          deadline=r.deadline)
            shape = tpl.shapes[tpl.actors.index(r.actor)]
            return n, shape, values
        raise KeyError(f"no template covers {r.kind.label} on {r.task}")
