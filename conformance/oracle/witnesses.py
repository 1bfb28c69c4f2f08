"""Witnesses of decision coverage: for each cell no trace reaches, a short request sequence
that reaches it from a state some trace passes through, stored as data and replayed in
lockstep against the implementation.

``search(traces)`` walks every trace through the model; at each state before a request
(and after the last step) it builds requests from the model's enumeration
(``wgk.model.actions.task_steps`` with the fuzzer's instance) and their variants (every
actor with its own principal, another role's, one without the role, none, a revoked one;
each field of K one less or one more, a foreign graph or task, no token, another task's
token, the task's earlier one; a re-send of a refused request, the same key with other
bytes; an unknown task; a name outside the grammar), decides each on a copy of the model
and keeps the first sequence that reaches a cell still missing. A witness whose requests
all leave the task state as it was is sent *inline* (before the trace's step ``at``, the
walk then goes on; a witness with no steps is the trace's own request before ``at``); one that changes it (or revokes a principal) is a *fork*: the trace's
prefix replayed on fresh systems, then the witness.

``WITNESSES`` (``witnesses.json``) holds them with the digest of the model's files they
were searched on (``model_digest``), of the model's cells with their reasons
(``cells_digest``) and of the trace files they start from. They are stale when a trace file
changed or, the model's text having changed, when its behaviour did as far as they read it:
the cells reachable, the proofs of the unreachable ones, a witness no longer reaching its
cells on the model (``stale_reason``; ``wgk coverage --write`` searches again). They are searched
for every reachable cell, whatever the traces reach, so that the quick budget reaches each
one even when the gate replays other traces (``--traces``). ``replay_witnesses`` sends them to the model and the
implementation side by side while ``coverage.recording()`` is active; each must be
answered alike.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from wgk.model.actions import task_steps
from wgk.model.requests import Capability, Request
from wgk.model.requests import Owner
from wgk.model.vocab import (
    AUTHORITY, NEEDS_CAPABILITY, TOKEN_BEARERS, TRANSACTION_KINDS, WAIT_NAMING_KINDS, Actor,
    Disposition, Exit, Kind, Phase, Verdict,
)

from wgk.conformance.oracle.coverage import Shadow, classify, reachable, recording
from wgk.conformance.oracle.fuzz import FuzzConfig, fuzz_instance
from wgk.conformance.oracle.systems import (
    REVOKE, ModelSystem, StepError, decide_wire,
)
from wgk.conformance.oracle.wire import WireError, request_from_wire, request_to_wire

WITNESSES = Path(__file__).with_name("witnesses.json")
FORMAT = "wgk-coverage-witnesses/1"


def model_digest(folder: Path | None = None) -> str:
    """sha256 over the model's source files (``wgk.model``, or those in ``folder``), in name
    order."""
    import wgk.model as model
    h = hashlib.sha256()
    for f in sorted((folder or Path(model.__file__).parent).glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


# --- candidates -----------------------------------------------------------------------------


def _holders(graph, actor: Actor) -> list[str]:
    return sorted(p for p, roles in graph.principals.items() if actor in roles)


def _variants(model: ModelSystem, r: Request, tasks: tuple[str, ...], history: dict,
              n: str) -> Iterator[tuple[str, list[dict]]]:
    """``(family, steps)`` for one enumerated request: the families a variant may reach
    (``n`` makes its keys unique)."""
    g, names = model.graph, model.names
    key = lambda k: f"cov-{n}-{k}"
    wire = lambda req, k: dict(request_to_wire(req, names), key=key(k))

    def sent_as(actor: Actor) -> Request | None:
        if not g.closed:
            return replace(r, actor=actor, principal=None)
        holders = [p for p in _holders(g, actor) if p not in model.state.revoked]
        return replace(r, actor=actor, principal=holders[0]) if holders else None

    base = sent_as(r.actor)
    for a in sorted(AUTHORITY[r.kind]):
        base = base or sent_as(a)
    if base is None:
        return
    yield "outcome", [wire(base, "a")]
    yield "outcome", [wire(base, "d"), wire(base, "d")]
    if base.evidence:                   # the same evidence again under a new key
        yield "outcome", [wire(base, "p"), wire(base, "q")]
    other = replace(base, evidence=(base.evidence or "") + "x")
    yield "outcome", [wire(base, "c"), wire(other, "c")]
    yield "outcome", [dict(wire(base, "u"), task="zz-unknown")]
    yield "outcome", [dict(wire(base, "b"), task="Bad Name")]
    for f in ("expected_generation", "expected_attempt"):
        if getattr(base, f) is not None:
            yield "outcome", [wire(replace(base, **{f: getattr(base, f) + 1}), f"e{f[9]}")]
    if base.expected_revision is not None:
        yield "outcome", [wire(replace(base, expected_revision=base.expected_revision + 1), "er")]
        moved = Phase.PREPARED if base.expected_phase == Phase.ABSENT else Phase.ABSENT
        yield "outcome", [wire(replace(base, expected_phase=moved), "ep")]
    if base.candidate or base.kind in TRANSACTION_KINDS or base.kind == Kind.ARCHIVE:
        alien = names.cid("coverage-other-candidate")
        yield "outcome", [wire(replace(base, candidate=alien), "ca")]
        yield "outcome", [wire(replace(base, base=alien), "cb")]
    if base.imports or base.kind in (Kind.DISPATCH, Kind.RETRY):
        yield "outcome", [wire(replace(base, imports=names.cid("coverage-other-candidate")), "ci")]
    if g.closed:
        yield "outcome", [dict(wire(base, "n"), principal="nobody")]
        for a in Actor:
            v = sent_as(a)
            if v is not None and a != r.actor:
                yield "actor", [wire(v, f"r{a.value}")]
        lacking = sorted(p for p, roles in g.principals.items() if r.actor not in roles
                         and p not in model.state.revoked)
        if lacking:
            yield "actor", [wire(replace(base, principal=lacking[0]), "w")]
        yield "actor", [{k: v for k, v in wire(base, "0").items() if k != "principal"}]
        yield "actor", [{"env": REVOKE, "principal": base.principal}, wire(base, "v")]
    if base.cap is not None:
        c = base.cap
        fields = {"generation": c.generation, "attempt": c.attempt, "fence": c.fence,
                  "lease_epoch": c.lease_epoch}
        for f, v in fields.items():
            for d in (-1, 1):
                if v + d >= 0:
                    yield "capability", [wire(replace(base, cap=replace(c, **{f: v + d})), f"k{f}{d}")]
        yield "capability", [wire(replace(base, cap=replace(c, graph=c.graph + "x")), "kg")]
        others = [t for t in tasks if t != c.task]
        if others:
            yield "capability", [wire(replace(base, cap=replace(c, task=others[0])), "kt")]
    if base.needs_token:
        i = g.index[base.task]
        yield "capability", [wire(replace(base, token=0), "t0")]
        for j, toks in sorted(history.items()):
            for tok in sorted(toks):
                if tok != model.state.tasks[i].token:
                    yield "capability", [wire(replace(base, token=tok), f"t{j}-{tok}")]


def _base_requests(model: ModelSystem, inst) -> Iterator[Request]:
    """The enumeration's requests of every task, then for every task and kind one built from
    the kind's fields and the task's current facts (its K and token, its phase and
    revision), as each class of role its authority names: what the enumeration offers only
    in some phases, such a request shows in any state."""
    for i in range(len(model.graph.tasks)):
        for r in task_steps(inst, model.state, i):
            if isinstance(r, Request):
                yield r
    for i in range(len(model.graph.tasks)):
        for k in Kind:
            for actor in _actor_classes(k):
                r = _exemplar(model, i, k, actor)
                if r is not None:
                    yield r


def _actor_classes(k: Kind) -> list[Actor]:
    bearers = sorted(AUTHORITY[k] & TOKEN_BEARERS)
    services = sorted(AUTHORITY[k] - TOKEN_BEARERS)
    return bearers[:1] + services[:1]


def _exemplar(model: ModelSystem, i: int, k: Kind, actor: Actor) -> Request | None:
    task = model.graph.tasks[i]
    t = model.state.tasks[i]
    extra: dict[str, Any] = {}
    if k in TRANSACTION_KINDS:
        extra.update(expected_phase=Exit(t.exit) if t.exit else Phase(t.phase),
                     expected_revision=t.revision)
    if k in NEEDS_CAPABILITY:
        extra["cap"] = Capability(model.graph.graph_id, task, t.generation, t.attempt,
                                  t.fence, t.lease_epoch)
    if k in (Kind.DISPATCH, Kind.RETRY, Kind.RESUME):
        extra["owner"] = Owner(t.owner_pid or 7, t.owner_birth or 7, t.session or 1)
        extra["mint"] = 1000 + t.attempt
    if k in (Kind.DISPATCH, Kind.RETRY):
        extra["expected_attempt"] = t.attempt
    if k in (Kind.RESET, Kind.REOPEN, Kind.ABANDON, Kind.RECONCILE, Kind.RECONSTRUCT):
        extra["expected_generation"] = t.generation
    if k in WAIT_NAMING_KINDS:
        extra["correlation"] = t.waiting_on or 1
    if k in (Kind.VALIDATE, Kind.ACCEPT):
        extra["verdict"] = Verdict.PASS
    if k == Kind.RECORD_DISPOSITION:
        extra["disposition"] = Disposition.LAND
    token = t.token if actor in TOKEN_BEARERS or k == Kind.RESUME else 0
    try:
        return Request(k, actor, task, key="x", evidence="e", candidate=t.candidate,
                       base=t.base, token=token, **extra)
    except ValueError:
        return None


# --- trying a candidate on a copy of the model -------------------------------------------


def _try(model: ModelSystem, history: dict, steps: list[dict]) -> tuple[set, bool]:
    """The cells the steps reach and whether they changed the task state (True), or only
    revoked a principal (``"revoke"``), or nothing but journal entries (False)."""
    snap = model.snapshot()
    found: set = set()
    changed: Any = False
    try:
        for step in steps:
            if "request" not in step and "kind" in step:
                step = {"request": step}
            if "env" in step:
                model.apply(step)
                changed = changed or (REVOKE if step["env"] == REVOKE else True)
                continue
            s = model.state
            r = request_from_wire(step["request"], model.names, "/request")
            d, s2 = decide_wire(s, r, step["request"], model.rules)
            found.update(classify(s, r, d.to_json(), history))
            if s2.tasks != s.tasks or s2.target != s.target or s2.now != s.now:
                changed = True          # a revoke followed by refusals alone stays "revoke"
            model.state = s2
    except (StepError, WireError):
        return set(), True
    finally:
        model.restore(snap)
    return found, changed


def _steps(raw: list[dict]) -> list[dict]:
    return [s if "env" in s else {"request": s} for s in raw]


def search(traces: Iterable, covered: set, progress: Callable[[str], None] | None = None
           ) -> tuple[list[dict], list[str]]:
    """Witnesses for the reachable cells not in ``covered`` (inline ones first where both
    reach a cell), and the cells no witness was found for."""
    need = set(reachable()) - set(covered)
    out: list[dict] = []
    for trace in traces:
        if not need:
            break
        try:
            model = ModelSystem(trace)
        except StepError:
            continue
        inst = fuzz_instance(FuzzConfig(tasks=len(model.graph.tasks), review=True))
        shadow = Shadow(model, {})
        shadow._note()
        for n in range(len(trace.steps) + 1):
            step = trace.steps[n] if n < len(trace.steps) else None
            if step is not None and "request" in step:
                hit = _try(model, shadow.history, [step])[0] & need
                if hit:                 # the trace's own request: walking it there sends it
                    need -= hit
                    out.append({"trace": trace.id, "at": n + 1, "fork": False,
                                "cells": sorted(hit), "steps": []})
            if step is None or "request" in step:
                out += _search_state(trace, n, model, shadow.history, inst, need)
            if step is None or not need:
                break
            try:
                model.apply(step)
            except StepError:
                break
            shadow._note()
        if progress:
            progress(f"{trace.id}: {len(need)} cells left")
    seen: set = set()
    deadline = time.process_time() + TWO_STEP_SECONDS
    for trace in traces:                # two steps: a request applied first, then the cell's
        if not need or time.process_time() > deadline:
            break
        out += _search_two(trace, need, seen, deadline)
        if progress:
            progress(f"{trace.id} (two steps): {len(need)} cells left")
    return out, sorted(need)


#: How long the search of two-step witnesses may take (each distinct state is tried once), in
#: this process's CPU seconds: a wall-clock bound ended it before its last traces on a loaded
#: machine, and a cell found at rest went missing.
TWO_STEP_SECONDS = 240.0


def _search_two(trace, need: set, seen: set, deadline: float) -> list[dict]:
    """Witnesses of two steps from the states of ``trace`` not ``seen`` before: a request the
    model applies (one built per task and kind, ``_exemplar``), then a request of a kind with
    a cell missing."""
    out: list[dict] = []
    try:
        model = ModelSystem(trace)
    except StepError:
        return out
    inst = fuzz_instance(FuzzConfig(tasks=len(model.graph.tasks), review=True))
    history: dict = {}
    for n in range(len(trace.steps) + 1):
        step = trace.steps[n] if n < len(trace.steps) else None
        here = (model.state.tasks, model.state.target, model.state.now, model.state.revoked)
        if (step is None or "request" in step) and here not in seen \
                and time.process_time() < deadline:
            seen.add(here)
            for first in _firsts(model):
                snap = model.snapshot()
                try:
                    model.apply(first)
                    if model.state.tasks == snap[0].tasks:
                        continue
                    found = _search_state(trace, n, model, history, inst, set(need))
                finally:
                    model.restore(snap)
                for w in found:
                    hit = set(w["cells"]) & need
                    if hit:
                        need -= hit
                        out.append(dict(w, fork=True, cells=sorted(hit),
                                        steps=[first] + w["steps"]))
                if not need:
                    return out
        if step is None:
            break
        try:
            model.apply(step)
        except StepError:
            break
    return out


def _firsts(model: ModelSystem) -> Iterator[dict]:
    for i in range(len(model.graph.tasks)):
        for k in Kind:
            for actor in _actor_classes(k):
                r = _exemplar(model, i, k, actor)
                if r is None:
                    continue
                if model.graph.closed:
                    holders = [p for p in _holders(model.graph, actor)
                               if p not in model.state.revoked]
                    if not holders:
                        continue
                    r = replace(r, principal=holders[0])
                yield {"request": dict(request_to_wire(r, model.names), key=f"cov-first-{i}-{k.value}")}


def _search_state(trace, n: int, model: ModelSystem, history: dict, inst, need: set) -> list[dict]:
    out = []
    tasks = model.graph.tasks
    kinds_needed = {c.split("/", 1)[0] for c in need}
    for j, r in enumerate(_base_requests(model, inst)):
        if r.kind.label not in kinds_needed:
            continue
        families = {c.split("/")[1] for c in need if c.startswith(r.kind.label + "/")}
        for family, raw in _variants(model, r, tasks, history, f"{n}-{j}"):
            if family != "outcome" and family not in families:
                continue
            steps = _steps(raw)
            found, changed = _try(model, history, steps)
            hit = found & need
            if hit:
                need -= hit
                out.append({"trace": trace.id, "at": n, "fork": changed, "cells": sorted(hit),
                            "steps": steps})
            if not need:
                return out
    return out


# --- cells no search reaches ----------------------------------------------------------------


def add_written(found: list[dict], unfound: list[str], traces: Iterable) -> list[str]:
    """The hand-written witnesses (``witnesses_written``) of cells the search left without
    one, whose trace is loaded, appended to ``found``; the cells still without a witness."""
    from wgk.conformance.oracle.witnesses_written import written
    ids = {t.id for t in traces}
    left = set(unfound)
    for w in written():
        if w["trace"] in ids and set(w["cells"]) & left:
            found.append(w)
            left -= set(w["cells"])
    return sorted(left)


def unreachable_reasons(unfound: Iterable[str]) -> dict[str, str]:
    """The cells of ``unfound`` proved unreachable (``wgk.conformance.z3.unreachable``), each
    with its proof; a cell neither witnessed nor proved stays an uncovered reachable cell."""
    from wgk.conformance.z3.unreachable import prove_unreachable
    return prove_unreachable(unfound)


# --- stored witnesses -----------------------------------------------------------------------


def trace_digests(traces: Iterable, ids: Iterable[str]) -> dict[str, str]:
    """sha256 of the files of the traces ``ids`` names (witnesses start from their states)."""
    want = set(ids)
    return {t.id: hashlib.sha256(Path(t.path).read_bytes()).hexdigest()
            for t in traces if t.id in want and t.path}


def write(witnesses: list[dict], unfound: list[str], traces: Iterable = (),
          path: Path = WITNESSES, unreached: dict[str, str] | None = None) -> Path:
    doc = {"format": FORMAT, "model-digest": model_digest(), "cells": cells_digest(),
           "unfound": unfound,
           "unreached": unreached or {},
           "traces": trace_digests(traces, {w["trace"] for w in witnesses}),
           "witnesses": witnesses}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load(path: Path = WITNESSES) -> dict:
    """The stored witnesses (an empty set when there is no file)."""
    if not path.exists():
        return {"format": FORMAT, "model-digest": None, "unfound": [], "witnesses": []}
    return json.loads(path.read_text(encoding="utf-8"))


def cells_digest() -> str:
    """sha256 of every cell of the model's decision space with its reason (None: reachable),
    as ``coverage.cells`` finds them from the model's tables and rules now."""
    from wgk.conformance.oracle.coverage import cells
    return hashlib.sha256(json.dumps(cells(), sort_keys=True).encode()).hexdigest()


def stale(doc: dict, traces: Iterable = ()) -> bool:
    """Whether the witnesses no longer hold for the model and the traces (``stale_reason``)."""
    return stale_reason(doc, traces) is not None


def stale_reason(doc: dict, traces: Iterable = (), prove: Callable | None = None) -> str | None:
    """Why the witnesses are stale (None: they are not), decided by what they read.

    A trace they start from changed (among ``traces``; one not given is not compared): stale.
    The model's text the same as when they were searched (``model_digest``): current. Else by
    the model's behaviour: the cells of the decision space and their reasons
    (``cells_digest``: which cells are reachable, from the tables and the rules' answers)
    must be those they were searched for, and the cells no witness reaches must be proved
    unreachable now with the same proofs as then (``unreachable_reasons``, run again: the
    proofs read the rules through z3). That each witness still reaches the cells it claims
    on the model, after its trace's prefix still runs, is checked as the witnesses are
    replayed (``replay_witnesses``: a witness that misses its cell, or a prefix the model
    refuses, is a problem naming the command that searches again). A rule edited without
    changing any answer along them, which cells are reachable or the proofs keeps them
    current; an edit changing any of those makes them stale or fails their replay.
    ``prove``: what proves the cells unreachable (``unreachable_reasons`` by default; the
    gate's cache keeps each cell's proof, ``gate_frames.unreachable_kept``)."""
    have = trace_digests(traces, doc.get("traces", {}))
    changed = sorted(tid for tid, digest in have.items() if doc["traces"].get(tid) != digest)
    if changed:
        return f"the trace {changed[0]} changed"
    if doc.get("model-digest") == model_digest():
        return None
    if doc.get("cells") != cells_digest():
        return "the model's cells or their reachability changed"
    if (prove or unreachable_reasons)(doc.get("unfound", [])) != (doc.get("unreached") or {}):
        return "the proofs of the unreachable cells changed"
    return None


# --- replaying them -------------------------------------------------------------------------


def _run_now(label: str, inputs: Any, trace, make_impl: Callable, run: Callable) -> Any:
    """``run(make_impl)`` (the ``kept`` of ``replay_witnesses`` by default)."""
    return run(make_impl)


def replay_witnesses(traces: list, witnesses: list[dict], make_impl: Callable,
                     workers: int = 1, kept: Callable = _run_now) -> tuple[set, list[str]]:
    """Send every witness to the model and the implementation (inline ones along their
    trace, forks each on fresh systems after the trace's prefix), recording the cells the
    implementation is sent; the problems found (a differing answer, a step the trace no longer allows).
    ``workers`` > 1: the traces' witnesses shared among that many processes (forked, this one
    among them), the cells and the problems the same as in one. ``kept(label, inputs, trace,
    make_impl, run)`` gives ``run(make_impl)``, the problems of one run of a trace's witnesses
    (``inputs``: what that run reads beside the model and the implementation); the gate's
    cache passes ``gate_cache_memo.kept_run``, which gives a kept result while the
    implementation answers every call as before and the model's side is unchanged."""
    by_id = {t.id: t for t in traces}
    groups: dict[str, list[dict]] = {}
    for w in witnesses:                # one of a trace not loaded: its cells stay uncovered
        if w["trace"] in by_id:
            groups.setdefault(w["trace"], []).append(w)
    jobs = [(by_id[tid], ws) for tid, ws in groups.items()]
    chunks = _chunks(jobs, workers)
    if len(chunks) < 2:
        return _replay_groups(jobs, make_impl, kept)
    import multiprocessing
    _FORKED["job"] = (chunks, make_impl, kept)
    try:
        with multiprocessing.get_context("fork").Pool(len(chunks) - 1) as pool:
            later = pool.map_async(_replay_chunk, range(1, len(chunks)))
            first = _replay_chunk(0)
            done = [first] + later.get()
    finally:
        _FORKED.pop("job", None)
    cells: set = set()
    problems: list[str] = []
    for found, trouble in done:
        cells |= found
        problems += trouble
    _record_here(cells)
    return cells, problems


#: what the forked processes of ``replay_witnesses`` run (inherited, never pickled)
_FORKED: dict = {}


def _record_here(cells: set) -> None:
    """Cells found in other processes, recorded where this process records (as when sent here)."""
    from wgk.conformance.oracle import coverage
    if coverage._SINK["cells"] is not None:
        coverage._SINK["cells"].update(cells)


def _replay_chunk(n: int) -> tuple[set, list[str]]:
    chunks, make_impl, kept = _FORKED["job"]
    return _replay_groups(chunks[n], make_impl, kept)


def _chunks(jobs: list, workers: int) -> list[list]:
    """``jobs`` in at most ``workers`` runs of consecutive ones, of about as many steps each."""
    if workers < 2 or len(jobs) < 2:
        return [jobs]
    cost = [sum(max(1, w.get("at", 0)) + len(w.get("steps", [])) for w in ws) for _, ws in jobs]
    share, out, current, acc = sum(cost) / workers, [], [], 0.0
    for job, c in zip(jobs, cost):
        if current and acc + c / 2 > share * (len(out) + 1) and len(out) < workers - 1:
            out.append(current)
            current = []
        current.append(job)
        acc += c
    out.append(current)
    return out


def _replay_groups(jobs: list, make_impl: Callable, kept: Callable = _run_now
                   ) -> tuple[set, list[str]]:
    problems: list[str] = []

    def one(trace, ws: list[dict], before: dict | None = None) -> list[str]:
        # what the run reads beside the code: the trace (its content), the witnesses, the steps
        inputs = [trace.to_json(), ws, before]
        return kept("witnesses", inputs, trace, make_impl,
                    lambda make: _run(trace, ws, make, before))
    with recording() as cells:
        for trace, ws in jobs:
            inline = [w for w in ws if not w["fork"]]
            if inline:
                problems += one(trace, inline)
            revoking: dict[tuple, list[dict]] = {}
            for w in ws:
                if w["fork"] == REVOKE:     # one fork per revocation, its refusals after it
                    revoking.setdefault((w["at"], json.dumps(w["steps"][0])), []).append(w)
                elif w["fork"]:
                    problems += one(trace, [w])
            for (n, first), group in revoking.items():
                problems += one(trace, [dict(w, steps=w["steps"][1:]) for w in group],
                                {n: [json.loads(first)]})
    return cells, problems


def _run(trace, ws: list[dict], make_impl: Callable, before: dict | None = None) -> list[str]:
    """The trace's steps with the witnesses sent before the steps they name (up to the last
    witness; ``before``: steps taken once before the witnesses of a step), model and
    implementation answering each alike, and each witness reaching on the model the cells it
    claims (those its steps reach, classified as the coverage does; a witness with no steps:
    those of the trace's request before ``at``)."""
    problems: list[str] = []
    # the model answers (no invariant evaluated: the replay section evaluates them on the trace)
    model, impl = ModelSystem(trace, checking=False), make_impl(trace)
    history: dict[int, set] = {}
    _note(model, history)
    at: dict[int, list[dict]] = {}
    for w in ws:
        at.setdefault(w["at"], []).append(w)
    last = max(at)
    own: set = set()                    # the cells of the trace's request just applied
    try:
        for n in range(last + 1):
            for step in (before or {}).get(n, []):
                model.apply(step)
                impl.apply(step)
                _note(model, history)
            for w in at.get(n, []):
                reached = set() if w["steps"] else set(own)
                for step in w["steps"]:
                    want, found = _model_send(model, step, history)
                    got = _send(impl, step)
                    reached |= found
                    if want != got:
                        problems.append(f"{trace.id} before step {n}: witness of "
                                        f"{w['cells'][0]}: the model {want}, the implementation "
                                        f"{got}")
                        return problems
                missed = sorted(set(w["cells"]) - reached)
                if missed:
                    problems.append(f"{trace.id} before step {n}: the witness of {missed[0]} no "
                                    "longer reaches it on the model (stale: run wgk coverage "
                                    "--write)")
                    return problems
            if n < len(trace.steps) and n < last:
                want, own = _model_send(model, trace.steps[n], history)
                if isinstance(want, dict) and set(want) == {"error"}:
                    raise StepError(want["error"])
                got = impl.apply(trace.steps[n])
                if want != got:
                    problems.append(f"{trace.id} step {n}: the model {want}, the "
                                    f"implementation {got}")
                    return problems
    except StepError as e:
        problems.append(f"{trace.id}: {e} (stale: run wgk coverage --write)")
    finally:
        impl.close()
    return problems


def _note(model: ModelSystem, history: dict[int, set]) -> None:
    """Every token the tasks' attempts were opened with so far (``Shadow._note``)."""
    for i, t in enumerate(model.state.tasks):
        if t.token:
            history.setdefault(i, set()).add(t.token)


def _model_send(model: ModelSystem, step: dict, history: dict[int, set]) -> tuple[Any, set]:
    """The model's answer to ``step`` (``_send``) and the cells it reaches (``classify`` in
    the state before it, as the implementation's shadow records them)."""
    model.last = None
    want = _send(model, step)
    found: set = set()
    if "request" in step and model.last is not None:
        s, r, d, _ = model.last
        found = set(classify(s, r, d.to_json(), history))
    _note(model, history)
    return want, found


def _send(system, step: dict) -> Any:
    try:
        return system.apply(step)
    except StepError as e:
        return {"error": str(e).splitlines()[0]}


def trace_cells(traces: Iterable) -> set:
    """The cells every trace's requests reach, by the model alone (what replay sends)."""
    found: set = set()
    for trace in traces:
        try:
            shadow = Shadow(ModelSystem(trace, checking=False), {})
        except StepError:
            continue
        shadow._note()
        with recording() as got:
            for step in trace.steps:
                shadow.step(step)
        found |= got
    return found


__all__ = ["WITNESSES", "cells_digest", "load", "model_digest", "replay_witnesses", "search",
           "stale", "stale_reason",
           "trace_cells", "write"]
