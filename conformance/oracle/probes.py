"""Probes: the vocabulary's tables compared in behaviour, not as copies.

The implementation keeps its own authority table (which actor may send which kind)
and its own edge table (which phase each transaction kind leaves from), written from
``docs/vocabulary.md``; nothing compares them with the model's tables. Instead, at
every state a trace passes through, each request the model's enumeration offers for
each task (``wgk.model.actions.task_steps``, every kind, transaction edges from any
phase) is sent as its own actor and as every other actor, to the model and to the
implementation side by side. A probe the model rejects is sent to the implementation,
which must reject it with the same code; a rejection changes nothing, so the run then
goes on along the trace. A probe the model would apply is left out (it would leave
the trace), so a table that grants too much — an actor the model refuses, an edge
from a phase the model does not leave — answers ``applied`` or another code, and is
caught at the first state where the two differ.

Adversarial variants (``variants``): at each state, every K-request the model
enumerates is also sent with each field of K stale (one less), ahead (one more) and
never issued (far ahead), with another task's K, and without its token, with another
attempt's token and with a stale one (one minted earlier for the same task); in a
closed graph each request is also sent as its role by a principal holding the role, by
another one holding it, by one without it, and by no principal, and after the trace
each principal is revoked (through the implementation's own revoke) and its credential
must then be answered as an unknown one. Every variant the model refuses must be
refused by the implementation with the same code, and must change nothing: the
projection after it is the one before. The quick budget sends each (kind, variant)
once, at the first state where the model refuses it; ``thorough`` sends every variant
at every state. Everything goes through requests and projections (and, for revocation,
the system's ``revoke``), so the probes can run over the external protocol.

Results are data (``ProbeResult``); nothing here prints.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from wgk.model.actions import task_steps
from wgk.model.instance import Instance
from wgk.model.requests import Request
from wgk.model.vocab import AUTHORITY, TOKEN_BEARERS, Actor, Kind

from wgk.conformance.oracle.fuzz import FuzzConfig, fuzz_instance
from wgk.conformance.oracle.systems import ModelSystem, StepError, System, decide_wire
from wgk.conformance.oracle.wire import WireError, request_from_wire, request_to_wire
from wgk.conformance.traces.format import Trace

def probe_instance(trace: Trace) -> Instance:
    """The fuzzer's instance for the trace's graph (every kind, edges from any phase, bounds
    no run reaches: ``fuzz.fuzz_instance``) with the archive's and the reopen's kinds."""
    review = any(t.get("review-required") for t in trace.graph.get("tasks", []))
    inst = fuzz_instance(FuzzConfig(tasks=len(trace.graph.get("tasks", [])), review=review))
    return replace(inst, groups=inst.groups + tuple(g for g in PROBED_GROUPS if g not in inst.groups))


#: Groups the probes enumerate beyond the fuzzer's: the archive's and the reopen's kinds.
PROBED_GROUPS = ("archive", "reopen")


@dataclass
class ProbeResult:
    trace: str
    probes: int = 0                  # probes sent to both (the model rejected each)
    skipped: int = 0                 # probes the model would apply (left out)
    mismatch: dict[str, Any] | None = None   # the first probe the two answered differently
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    cells: set = field(default_factory=set)   # (kind, variant) sent and refused alike

    @property
    def ok(self) -> bool:
        return self.mismatch is None and not self.problems and self.probes > 0

    def to_json(self) -> dict:
        return {"trace": self.trace, "probes": self.probes, "skipped": self.skipped,
                "mismatch": self.mismatch, "problems": self.problems,
                "cells": sorted(f"{k}/{v}" for k, v in self.cells),
                "seconds": round(self.seconds, 3)}


def _probes(model: ModelSystem, inst: Instance, seen: set) -> list[dict]:
    """The enumerated requests of every task not yet probed in this situation: each as its
    own actor once per phase of its task (the edge table), as every other actor the kind's
    authority admits once per outcome of the request as its own actor (where it would be
    applied, and where each of its conditions refuses it: a rule that skips a condition for
    one actor shows only there), and as every other actor once per kind."""
    out = []
    for i, name in enumerate(model.graph.tasks):
        t = model.state.tasks[i]
        situation = (name, t.phase, t.exit, t.attempt_state)
        graph_wide = situation + tuple((u.phase, u.exit, u.attempt_state) for u in model.state.tasks)
        for r in task_steps(inst, model.state, i):
            if not isinstance(r, Request):
                continue
            outcome = None
            here = graph_wide if r.kind in READS_OTHER_TASKS else situation
            for actor in Actor:
                if actor != r.actor and outcome is None:
                    own = _model_answer(model, request_to_wire(
                        replace(r, principal=_sender(model.graph, r.actor)), model.names))
                    outcome = (own or {}).get("code", (own or {}).get("decision"))
                if actor == r.actor:
                    key = (r.kind, here)
                elif actor in AUTHORITY.get(r.kind, ()):     # its conditions decide: each outcome
                    key = (r.kind, actor, outcome)
                else:                                       # refused before any condition
                    key = (r.kind, actor)
                if key in seen:
                    continue
                seen.add(key)
                posed = replace(r, actor=actor, principal=_sender(model.graph, actor))
                out.append(request_to_wire(posed, model.names))
    return out


#: Kinds whose decision reads other tasks (dependencies, dependents): probed as their own
#: actor once per situation of the whole graph, not only of their task.
READS_OTHER_TASKS = frozenset({Kind.DISPATCH, Kind.RETRY, Kind.RESET, Kind.REOPEN,
                               Kind.PREPARE_EFFECT, Kind.SAVE_GRAPH})


def _sender(graph, actor: Actor) -> str | None:
    """Who sends a probe as ``actor`` in a closed graph: a declared principal holding that
    role (its authority is what is probed), else any declared one (its role is refused)."""
    if not graph.closed:
        return None
    holders = sorted(p for p, roles in graph.principals.items() if actor in roles)
    return (holders or sorted(graph.principals) or [None])[0]


def closed_copy(trace: Trace) -> Trace:
    """An open trace as a closed graph: two principals per role (``<role>-1``, ``<role>-2``),
    and each request sent by the first holder of its actor's role (a closed trace as it is).
    Its decisions are the open trace's, and the sender variants can be probed on it."""
    if "principals" in trace.graph:
        return trace
    principals = [{"name": f"{a.label}-{n}", "roles": [a.label]} for a in Actor for n in (1, 2)]
    steps = [dict(s, request=dict(s["request"], principal=f"{s['request'].get('actor')}-1"))
             if isinstance(s.get("request"), dict) else s for s in trace.steps]
    return replace(trace, id=f"{trace.id} (closed)", graph=dict(trace.graph, principals=principals),
                      steps=steps)


def _model_answer(model: ModelSystem, request: dict) -> dict | None:
    """The model's decision for ``request`` in its current state, which stays as it is (the
    decision alone: no invariant is evaluated, the probes compare answers)."""
    snap = model.snapshot()
    try:
        r = request_from_wire(request, model.names, "/request")
        return decide_wire(model.state, r, request, model.rules)[0].to_json()
    except WireError:
        return None
    finally:
        model.restore(snap)


def probe_trace(trace: Trace, make_impl: Callable[[Trace], System], *,
                variants: bool = True, thorough: bool = False,
                seen: set | None = None) -> ProbeResult:
    """Probe every state of ``trace`` (see the module's docstring). ``seen``: the probes
    already sent (shared across traces, each probe is sent once in all of them)."""
    t0 = time.perf_counter()
    result = ProbeResult(trace.id)
    # the model answers and takes the trace's steps; the replay section evaluates its invariants
    model, impl = ModelSystem(trace, checking=False), make_impl(trace)
    inst, seen = probe_instance(trace), (set() if seen is None else seen)
    minted: dict[str, list[str]] = {}
    try:
        for n, step in enumerate(trace.steps):
            if "request" in step:
                if not _probe_state(model, impl, inst, n, seen, result):
                    break
                if variants and not _probe_variants(model, impl, inst, n, seen, minted,
                                                    thorough, result):
                    break
            model.apply(step)
            impl.apply(step)
            r = step.get("request", {})
            if isinstance(r.get("mint"), str):
                minted.setdefault(r.get("task"), []).append(r["mint"])
        else:
            if variants and model.graph.closed:
                _probe_revoked(trace, model, impl, result)
    except StepError as e:
        result.problems.append(f"step {n}: {e}")
    finally:
        impl.close()
    result.seconds = time.perf_counter() - t0
    return result


def _probe_state(model: ModelSystem, impl: System, inst: Instance, n: int, seen: set,
                 result: ProbeResult) -> bool:
    """Send this state's probes; False at the first mismatch."""
    for k, request in enumerate(_probes(model, inst, seen)):
        request["key"] = f"probe-{n}-{k}"
        if not _send(model, impl, request, n, None, result):
            return False
    return True


def _send(model: ModelSystem, impl: System, request: dict, n: int, variant: str | None,
          result: ProbeResult, expected: dict | None = None, before: dict | None = None) -> bool:
    """One probe the model refuses (else it is skipped): the implementation must refuse it with
    the same code and (for a variant) change nothing. False at a mismatch."""
    if expected is None:
        expected = _model_answer(model, request)
    if expected is None or expected.get("decision") != "rejected":
        result.skipped += 1
        return True
    try:
        got = impl.apply({"request": request})
    except StepError as e:
        got = {"error": str(e).splitlines()[0]}
    result.probes += 1
    changed = None
    if variant is not None and got == expected and before is not None:
        after = _state(impl)
        changed = sorted(k for k in set(before) | set(after)
                         if k not in JOURNALED and before.get(k) != after.get(k))
    if got != expected or changed:
        result.mismatch = {"before-step": n, "request": request, "model": expected,
                           "impl": got, "variant": variant}
        if changed:
            result.mismatch["changed"] = changed
        return False
    if variant is not None:
        result.cells.add((request["kind"], variant))
    return True


def _state(impl: System) -> dict:
    """The projection a refusal must leave as it was (``JOURNALED`` aside): the system's own
    without the journal where it gives one (``project_without_journal``: the journal, every
    stored answer, is the bulk of a projection and is not compared), else its whole one."""
    without = getattr(impl, "project_without_journal", None)
    return impl.project() if without is None else without()


# --- adversarial variants: K, the token, the sender -----------------------------------------

K_FIELDS = ("generation", "attempt", "fence", "lease-epoch")
#: What a refusal may change in the projection: its answer, journaled under its key.
JOURNALED = ("journal",)
#: How far ahead "never issued" is: no run of the gate issues that many of anything.
NEVER_ISSUED = 1000


def cap_variants(wire: dict, model: ModelSystem, minted: dict[str, list[str]]) -> list[tuple[str, dict]]:
    """The capability variants of a K-request (``wire``): (variant name, request)."""
    out: list[tuple[str, dict]] = []
    cap = wire.get("cap")
    if isinstance(cap, dict):
        for f in K_FIELDS:
            v = cap[f]
            for name, value in (("stale", v - 1), ("ahead", v + 1), ("never-issued", v + NEVER_ISSUED)):
                if value >= 0:
                    out.append((f"{f}-{name}", dict(wire, cap=dict(cap, **{f: value}))))
        others = [t for t in model.graph.tasks if t != wire["task"]]
        if others:
            o = others[0]
            t = model.state.tasks[model.graph.index[o]]
            out.append(("task-foreign", dict(wire, cap=dict(cap, task=o))))
            out.append(("cap-of-another-attempt", dict(wire, cap=dict(
                cap, task=o, generation=t.generation, attempt=t.attempt, fence=t.fence,
                **{"lease-epoch": t.lease_epoch}))))
        out.append(("graph-foreign", dict(wire, cap=dict(cap, graph=f"{cap['graph']}-other"))))
    if "token" in wire:
        for actor in _bearers(wire):
            if model.graph.closed and actor != Actor.parse(wire["actor"]) and \
                    not any(actor in roles for roles in model.graph.principals.values()):
                continue            # no principal holds the role: it is refused before its token
            posed = dict(wire, actor=actor.label, principal=_sender(model.graph, actor))
            if posed["principal"] is None:
                del posed["principal"]
            suffix = "" if actor.label == wire["actor"] else f"/{actor.label}"
            out += [(v + suffix, w) for v, w in _token_variants(posed, minted)]
    return out


def _bearers(wire: dict) -> list[Actor]:
    """The request's own actor, then every other token bearer the kind's authority admits."""
    kind = Kind.parse(wire["kind"])
    own = Actor.parse(wire["actor"])
    return [own] + [a for a in sorted(TOKEN_BEARERS, key=lambda a: a.label)
                    if a != own and a in AUTHORITY.get(kind, ())]


def _token_variants(wire: dict, minted: dict[str, list[str]]) -> list[tuple[str, dict]]:
    out = [("token-none", {k: v for k, v in wire.items() if k != "token"})]
    theirs = [tok for task, toks in sorted(minted.items()) if task != wire["task"] for tok in toks]
    out.append(("token-of-another-attempt", dict(wire, token=(theirs or ["tok-never-minted"])[-1])))
    stale = [tok for tok in minted.get(wire["task"], []) if tok != wire["token"]]
    if stale:
        out.append(("token-stale", dict(wire, token=stale[-1])))
    return out


def actor_variants(wire: dict, graph) -> list[tuple[str, dict]]:
    """The sender variants of a request in a closed graph: its role sent by a principal
    holding it, by another one holding it, by one without it, and by none."""
    if not graph.closed:
        return []
    role = Actor.parse(wire["actor"])
    holders = sorted(p for p, roles in graph.principals.items() if role in roles)
    others = sorted(p for p, roles in graph.principals.items() if role not in roles)
    body = {k: v for k, v in wire.items() if k != "principal"}
    out = [("principal-none", body)]
    if holders:
        out.append(("principal-own", dict(body, principal=holders[0])))
    if len(holders) > 1:
        out.append(("principal-another", dict(body, principal=holders[1])))
    if others:
        out.append(("principal-without-role", dict(body, principal=others[0])))
    return out


def _probe_variants(model: ModelSystem, impl: System, inst: Instance, n: int, seen: set,
                    minted: dict[str, list[str]], thorough: bool, result: ProbeResult) -> bool:
    """Every variant of every request the model enumerates at this state, each (kind, variant)
    once unless ``thorough``; False at the first mismatch."""
    before = None
    k = 0
    for i, name in enumerate(model.graph.tasks):
        t = model.state.tasks[i]
        situation = (name, t.phase, t.exit, t.attempt_state, t.owner_seen)
        for r in task_steps(inst, model.state, i):
            if not isinstance(r, Request):
                continue
            wire = request_to_wire(replace(r, principal=_sender(model.graph, r.actor)), model.names)
            base = _model_answer(model, dict(wire, key=f"variant-{n}-base"))
            if base is None or base.get("decision") in ("rejected", "duplicate"):
                continue        # a variant decides something only where the request itself passes
            for variant, request in cap_variants(wire, model, minted) + actor_variants(wire, model.graph):
                cell = ("variant", request["kind"], variant) + ((n, situation) if thorough else ())
                if cell in seen:
                    continue
                request["key"] = f"variant-{n}-{k}"
                k += 1
                expected = _model_answer(model, request)
                if expected is None or expected.get("decision") != "rejected":
                    result.skipped += 1
                    continue
                seen.add(cell)
                if before is None:
                    before = _state(impl)
                if not _send(model, impl, request, n, variant, result, expected, before):
                    return False
    return True


def _probe_revoked(trace: Trace, model: ModelSystem, impl: System, result: ProbeResult) -> None:
    """After the trace: each principal that sent a request is revoked in turn (the system's
    own revoke) and then sends its last request again under a new key: the answer must be
    the model's for an unknown principal (``not-authenticated``), and nothing may change."""
    revoke = getattr(impl, "revoke", None)
    if revoke is None and getattr(impl, "revocation_undeclared", False):
        result.skipped += 1          # an external kernel that does not declare the revoke step
        return
    if revoke is None:
        result.problems.append("the system cannot revoke a principal: revocation not probed")
        return
    last: dict[str, dict] = {}
    for step in trace.steps:
        r = step.get("request")
        if isinstance(r, dict) and r.get("principal") in model.graph.principals:
            last[r["principal"]] = r
    for n, (who, r) in enumerate(sorted(last.items())):
        revoke(who)
        request = dict(r, key=f"revoked-{n}")
        expected = _model_answer(model, dict(request, principal=f"{who}-unknown"))
        if not _send(model, impl, request, len(trace.steps), "principal-revoked", result,
                     expected, _state(impl)):
            return


__all__ = ["K_FIELDS", "ProbeResult", "actor_variants", "cap_variants", "closed_copy", "probe_instance", "probe_trace"]
