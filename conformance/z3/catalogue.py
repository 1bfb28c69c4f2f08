"""Which templates exist: every behavioural class of request of some kinds on some tasks
(``request_templates``, the intruder's, the environment's), and the ``Catalogue`` that numbers
them and their shapes, builds each step's symbolic request from a ``Pool`` and turns a z3
model back into concrete ``Request``/``EnvStep`` objects (``wgk.conformance.z3.templates``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import z3

from wgk.model.actions import PARAMS, WITH_DEADLINE, WITH_EVIDENCE, WITH_IMPORTS
from wgk.model.env import EnvKind
from wgk.model.requests import Request, phase_code
from wgk.model.vocab import INTRUDER, AUTHORITY, NEEDS_CAPABILITY, TOKEN_BEARERS, Actor, Kind as K

from wgk.conformance.z3.symbolic import value
from wgk.conformance.z3.templates import (  # noqa: F401  (POOL, Pool, EnvTemplate re-exported)
    DISPOSITIONS, ENV_KINDS, POOL, SLOT, TASK_ENV, UNKNOWN_TASK, VERDICTS, EnvTemplate, Pool,
    Template,
)


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
                            for deadline in ((False, True) if kind in WITH_DEADLINE and (
                                    deadlines or kind in (K.PARK, K.UNPAUSE, K.PROVIDER_FAILURE,
                                                          K.PROBE_ROUTE)) else (False,)):
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
                       evidence_ids: tuple[str, ...],
                       held: Iterable[Actor] = TOKEN_BEARERS,
                       by_actor: frozenset = frozenset()) -> list[Template]:
    """Per kind and task, the intruder posing as the kind's authorized actors with a
    capability for this graph (every field it compares is symbolic), ``held``: the roles the
    graph gives it.

    A template's symbolic request is sent by its first actor and stands for every actor of
    its class, so a class holds actors the kernel treats alike: those the intruder holds (each
    its own, for the kinds in ``by_actor``, whose rules ask who sent the request), then (a
    template of their own, labelled ``unheld`` when the kind has both) those it does not,
    whose requests the kernel rejects as role-not-held."""
    out: list[Template] = []
    tasks = list(tasks)
    held = frozenset(held)
    for kind in kinds:
        allowed, _ = _authority_classes(kind)
        mine = tuple(a for a in allowed if a in held)
        others = tuple(a for a in allowed if a not in held)
        split = kind in by_actor and len(mine) > 1
        classes = [((a,), False, True) for a in mine] if split else \
            [(mine, False, False)] if mine else []
        if others:
            classes.append((others, bool(mine), False))
        cap = "own" if kind in NEEDS_CAPABILITY else "none"
        for task in tasks:
            for actors, unheld, one in classes:
                out.append(Template(kind, task, actors, PARAMS.get(kind, ()),
                                    VERDICTS.get(kind, (None,))[0],
                                    DISPOSITIONS.get(kind, (None,))[0],
                                    evidence_ids[0] if kind in WITH_EVIDENCE else "", cap,
                                    by_actor=one, principal=INTRUDER, unheld=unheld))
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
                          deadline=r.deadline, token=r.token, mint=r.mint,
                          failure=int(r.failure), correlation=r.correlation,
                          requirements=r.requirements, output=r.output, validation=r.validation,
                          contract=int(r.contract), review=int(r.review),
                          resolvable=int(r.resolvable), protected_free=int(r.protected_free),
                          succeeded=int(r.succeeded), outputs_match=int(r.outputs_match),
                          route=r.route)
            shape = tpl.shapes[tpl.actors.index(r.actor)]
            return n, shape, values
        raise KeyError(f"no template covers {r.kind.label} on {r.task}")
