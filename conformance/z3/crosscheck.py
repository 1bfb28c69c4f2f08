"""The solver and the executable model must agree: a decoded decision and post-state are
compared with the model's (``compare_step``), and ``crosscheck`` evaluates one concrete
step both ways. A disagreement is an encoding error (``SymbolicMismatch``).
"""
from __future__ import annotations

import z3

from wgk.model.env import EnvStep
from wgk.model.kernel import Decision
from wgk.model.requests import Request
from wgk.model.state import State
from wgk.model.vocab import Code, DecisionKind as D

from wgk.conformance.z3.symbolic import (
    Space, decode_state, equals, field_diff, fresh_state, value,
)
from wgk.conformance.z3.templates import journal_keys
from wgk.conformance.z3.catalogue import POOL, Catalogue, EnvTemplate, Pool, request_templates
from wgk.conformance.z3.transition import (
    MODEL, Semantics, actor_sensitive, branches, discover_universe,
)


class SymbolicMismatch(AssertionError):
    """The solver's model and the executable model disagree: an encoding error."""


def decode_decision(model: z3.ModelRef, d: Decision | None) -> Decision | None:
    if d is None:
        return None
    kind = D(value(model, d.kind))
    code = Code(value(model, d.code))
    if kind == D.DUPLICATE:
        return Decision(kind, code, D(value(model, d.original_kind)),
                        Code(value(model, d.original_code)))
    return Decision(kind, code)


def compare_step(where: str, sym_d: Decision | None, sym_post: State, d: Decision | None,
                 post: State) -> None:
    """The solver's decision and post-state must equal the executable model's."""
    if (sym_d is None) != (d is None):
        raise SymbolicMismatch(f"{where}: decision present on one side only")
    if d is not None:
        same = sym_d.kind == d.kind and sym_d.code == d.code
        if d.kind == D.DUPLICATE:
            same = same and sym_d.original_kind == d.original_kind \
                and sym_d.original_code == d.original_code
        if not same:
            raise SymbolicMismatch(f"{where}: solver decided {sym_d.label}, model {d.label}")
    if sym_post != post:
        diff = field_diff(post, sym_post)
        raise SymbolicMismatch(f"{where}: post-states differ (model -> solver): "
                               + "; ".join(diff or ["journal or evidence"]))


def crosscheck(s: State, step: Request | EnvStep, sem: Semantics = MODEL,
               evidence_ids: tuple[str, ...] = ("e1", "e2")) -> Decision | None:
    """Evaluate one concrete step both ways: the symbolic transition, pinned to ``s`` and
    ``step`` by the solver, must give the executable model's decision and state."""
    g = s.graph
    ids = tuple(sorted(set(evidence_ids) | ({step.evidence} if isinstance(step, Request)
                                              and step.evidence else set())
                       | {e for t in s.tasks for _, e in t.evidence}))
    if isinstance(step, EnvStep):
        templates = [EnvTemplate(step.kind, step.task)]
    else:
        templates = request_templates([step.kind], [step.task], ids,
                                      by_actor=actor_sensitive(g, sem))
    cat = Catalogue(templates, g.graph_id)
    universe = tuple(sorted(set(discover_universe(g, ids, sem))
                            | {p for t in s.tasks for p in t.evidence}))
    keys = (step.key,) if isinstance(step, Request) and step.key is not None else ()
    space = Space(g, universe, journal_keys(keys, cat.templates), len(POOL), len(cat.shapes),
                  cat.decode_digest)
    sym = fresh_state(space, "x")
    pool = Pool("xr", len(keys))
    solver = z3.Solver()
    solver.add(*equals(space, sym, s))
    if isinstance(step, EnvStep):
        n = 0
        values = {"candidate": step.content, "birth": step.birth}
    else:
        n, shape, values = cat.locate(step)
        solver.add(pool.shape == shape)
        if keys:
            solver.add(pool.key == 0)
    for name, v in values.items():
        solver.add(pool.vars[name] == v)
    b = branches(cat, sym, pool, sem, indices=[n])[0]
    d, post = sem.run(s, step)
    solver.add(b.guard)
    where = f"crosscheck {getattr(step, 'kind').label} on {getattr(step, 'task', '')}"
    if solver.check() != z3.sat:
        if post is None:
            return None              # an environment step disabled on both sides
        raise SymbolicMismatch(f"{where}: the symbolic step is not enabled")
    if post is None:
        raise SymbolicMismatch(f"{where}: enabled symbolically, disabled concretely")
    model = solver.model()
    compare_step(where, decode_decision(model, b.decision),
                 decode_state(model, space, b.post, g), d, post)
    return d
