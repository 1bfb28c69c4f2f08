"""The gate as data: sections of checks, each check a verdict.

A budget maps each section to a value that says how much of it runs (a number of
tasks, a list of instances or modes, a flag); a false value (``0``, ``False``, an
empty list) or a missing entry means the section is not run, and it is reported
as ``skipped``. A section that checks nothing (an empty trace set) or raises is
reported as an ``error`` naming it; the other sections still run. Nothing
checked is never a pass.

Progress goes through an injected callback that receives ``Tick`` values; the
gate itself never prints.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable

from wgk.conformance.oracle import impl_system, model_runs, mutant_traces, witnesses
from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
from wgk.conformance.reports import guard_verify, impl_mutants
from wgk.conformance.oracle.external_runs import Kernel
from wgk.conformance.reports.gate_external import (
    WEIGHTS as EXTERNAL_WEIGHTS, plan as external_plan, run_external_section,
    summary as external_summary,
)
from wgk.conformance.reports.gate_budget import (
    BUDGETS, BUNDLED_TRACES, COUNTEREXAMPLES, CRASH_MODES, Meter, Nothing, Progress, Tick,
    bundled_traces,
)
from wgk.conformance.reports.gate_model import (
    Earlier, earlier_results, explore_checks, instance_name, mutant_checks, prove_checks,
    trace_matrix_checks, unbounded_checks,
)
from wgk.conformance.reports.gate_real import (
    batch_checks, contract_checks, race_checks, two_kernel_checks,
)
from wgk.conformance.check.compiled import forget_graphs
from wgk.conformance.check.workers import every_core
from wgk.conformance.reports.gate_pool import (
    Done, Part, guarded, run_parts, run_parts_here, scratch,
)
from wgk.conformance.reports import gate_cache, gate_mutants  # noqa: F401 -- sets gate_cache.READS
from wgk.conformance.reports.gate_cache import NO_TRACES, GateCache, trace_identity
from wgk.conformance.reports.gate_cache_memo import kept_run, memoized
from wgk.conformance.reports.gate_frames import unreachable_kept
from wgk.conformance.reports.gate_coverage import (
    coverage_checks, merged, witness_replays, witness_traces,
)
from wgk.conformance.reports.gate_probes import probe_checks
from wgk.conformance.reports.gate_tamper import tamper_checks
from wgk.conformance.reports.gate_report import Check, GateResult, Section, write_junit
from wgk.conformance.reports.gate_split import LATE, split
from wgk.conformance.reports.gate_traces import (
    crash_cut_checks, fuzz_checks, real_selection, replay_checks,
)
from wgk.conformance.traces.format import load_traces

__all__ = ["BUDGETS", "SECTIONS", "Check", "GateResult", "Section", "Tick", "bundled_traces",
           "run_gate", "run_section", "write_junit"]


def mutant_sections(budget: str) -> list[str]:
    """The sections an implementation mutant runs through on ``budget`` (those that run the
    implementation and that the budget runs), cheapest first."""
    return impl_mutants.impl_sections(n for n, _ in SECTIONS if BUDGETS[budget].get(n))


def impl_mutant_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every planted bug of the implementation is killed by the gate's own sections."""
    meter = Meter("impl-mutants", len(IMPL_MUTANTS) + 1, progress)
    return impl_mutants.section_checks(budget, BUDGETS[budget]["impl-mutants"], mutant_sections,
                                       meter.step)


def verify_guard_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every guard marker guards something: disabled, a section's check fails."""
    meter = Meter("verify-guards", None, progress)
    return guard_verify.section_checks(budget, BUDGETS[budget]["verify-guards"], mutant_sections,
                                       meter.step)


#: Sections that take the loaded traces.
TRACE_SECTIONS = ("replay", "probes", "crash-cuts", "two-kernels", "batches", "tamper")

SECTIONS: list[tuple[str, Callable]] = [("prove", prove_checks), ("mutants", mutant_checks),
                                        ("explore", explore_checks), ("contract", contract_checks),
                                        ("replay", replay_checks), ("probes", probe_checks),
                                        ("crash-cuts", crash_cut_checks),
                                        ("two-kernels", two_kernel_checks), ("batches", batch_checks),
                                        ("tamper", tamper_checks),
                                        ("races", race_checks),
                                        ("fuzz", fuzz_checks),
                                        ("trace-matrix", trace_matrix_checks),
                                        ("coverage", coverage_checks),
                                        ("impl-mutants", impl_mutant_checks),
                                        ("verify-guards", verify_guard_checks)]


def _call(name: str, budget: str, progress: Progress | None, *, loaded: list | None = None,
          sources: list[str] | None = None, counterexamples: str = COUNTEREXAMPLES,
          backend: str | None = None, earlier: Earlier | None = None, workers: int = 1,
          replayed: dict | None = None, **part) -> list[Check]:
    """The section's checks (``part``: which of its traces or mutants, when it is split;
    ``workers``: the processes the coverage's witnesses may use, the late sections running
    when the others are done; ``replayed``: the coverage's witnesses replayed already)."""
    fn = dict(SECTIONS)[name]
    if name in TRACE_SECTIONS:
        if not loaded:
            raise Nothing(f"no traces to {name.replace('-', ' ')} in {', '.join(sources or ['?'])}")
        return fn(budget, progress, loaded, **part)
    if name == "fuzz":
        return fn(budget, progress, counterexamples, **part)
    if name in ("races", "contract"):
        return fn(budget, progress, backend)
    if name == "trace-matrix":
        return fn(budget, progress, earlier)
    if name == "coverage":
        if not loaded:
            raise Nothing(f"no traces to measure coverage on in {', '.join(sources or ['?'])}")
        return fn(budget, progress, loaded, earlier.cells if earlier is not None else None,
                  workers=workers, replayed=replayed)
    return fn(budget, progress, **part)


def _skipped(name: str, budget: str) -> Section | None:
    value = BUDGETS[budget].get(name)
    if value:
        return None
    why = "not listed" if name not in BUDGETS[budget] else f"{name}: {value!r}"
    return Section(name, [], 0.0, skipped=f"not run in the {budget} budget ({why})")


def _nonempty(checks: list[Check]) -> list[Check]:
    if not checks:
        raise Nothing("the section checked nothing")
    return checks


def run_section(name: str, budget: str, progress: Progress | None = None, *,
                loaded: list | None = None, sources: list[str] | None = None,
                counterexamples: str = COUNTEREXAMPLES, backend: str | None = None,
                earlier: Earlier | None = None, external: Kernel | None = None,
                workers: int = 1, cache: GateCache | None = None,
                replayed: dict | None = None) -> Section:
    """One section on the budget's value for it: skipped when that value is false or missing,
    an error naming the section when it checks nothing or raises (``earlier``: what the
    crash-cuts and prove sections found, for the trace matrix; ``external``: the kernel
    under test runs as that command, over the protocol, ``workers`` traces at once)."""
    skipped = _skipped(name, budget)
    if skipped is not None:
        return skipped
    if external is not None:
        if name in TRACE_SECTIONS and not loaded:
            return Section(name, guarded(name, lambda: _nonempty([])).checks, 0.0)
        section = run_external_section(name, budget, progress,
                                       {"loaded": loaded, "counterexamples": counterexamples,
                                        "earlier": earlier.cells if earlier is not None else None},
                                       external, workers)
        if section is not None:
            _final(section, progress)
            return section
    def call() -> list[Check]:
        return _nonempty(_call(name, budget, progress, loaded=loaded, sources=sources,
                               counterexamples=counterexamples, backend=backend, earlier=earlier,
                               workers=workers, replayed=replayed))
    if cache is not None and cache.keeps(name) and \
            (name != "coverage" or (replayed and "stale-reason" in replayed)):
        # (the coverage replaying its witnesses itself, their part having failed, may fork
        # and reads the model's text: not recorded, so not kept)
        key = cache.key(name, {}, part_inputs(name, budget, loaded, {}, earlier, replayed))
        checks = cache.lookup(key, name)
        done = guarded(name, lambda: checks if checks is not None else
                       cache.run(key, name, {}, lambda: fresh(call)))
    else:
        done = guarded(name, call)
    section = Section(name, done.checks, done.seconds)
    _final(section, progress)
    return section


def _final(section: Section, progress: Progress | None) -> None:
    if progress:
        progress(Tick(section.name, len(section.checks), len(section.checks), section.seconds,
                      section.verdict, final=True))


def run_gate(budget: str = "default", progress: Progress | None = None, *,
             traces: list[str] | None = None,
             counterexamples: str = COUNTEREXAMPLES,
             backend: str | None = None, workers: int | None = None,
             external: Kernel | None = None, cache: str | None = None,
             cache_scope: str = "all") -> GateResult:
    """Every section on the given budget; ``traces`` selects trace files or folders;
    a generated failure is written, minimised, under ``counterexamples``; ``backend``
    (a PostgreSQL DSN) runs the implementation's sections on PostgreSQL, the races too;
    ``workers``: the processes sharing the work (default: one per core; 1 runs every
    section in turn in this process). The report is the same either way. ``external``: the
    kernel under test is that command over the protocol (``gate_external``); the sections
    run in turn, ``workers`` traces at once. ``cache``: a folder where each part's checks
    are kept under a key covering what they depend on (``gate_cache``), and reused while
    that holds; the report is the same but for the count of reused checks. With
    ``external`` only the parts that do not run the kernel under test are kept and reused
    (``reusable``: the sections on the model), under the keys the gate in process gives
    them, so either gate's cache serves the other; a part over the protocol always runs.
    ``cache_scope``: ``all``, or ``model``: only the sections on the model are kept and
    reused (``CACHE_SCOPES``), the others run as without the cache, recording nothing: what a
    gate over the protocol can reuse, for what keeping those alone costs."""
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r} (known: {', '.join(BUDGETS)})")
    if cache_scope not in CACHE_SCOPES:
        raise ValueError(f"unknown cache scope {cache_scope!r} (known: {', '.join(CACHE_SCOPES)})")
    t0 = time.perf_counter()
    sources = [str(p) for p in (traces or [bundled_traces()])]
    store = None if cache is None else GateCache(cache, {
        "budget": budget, "value": BUDGETS[budget], "backend": backend,
        "counterexamples": str(counterexamples)}, CACHE_SCOPES[cache_scope])
    workers = every_core() if workers is None else workers
    with store.schema_verdicts() if store is not None else contextlib.nullcontext():
        loaded = load_traces(sources, workers)      # TraceError: bad input
    mutant_traces.remember(loaded)         # the mutants look through the same files
    kw = dict(loaded=loaded, sources=sources, counterexamples=counterexamples, backend=backend)
    if external is not None:
        with scratch() as where:
            if workers < 2 and store is None:
                sections = []
                for name, _ in SECTIONS:
                    sections.append(run_section(name, budget, progress, **kw, external=external,
                                                earlier=earlier_results(sections)))
            else:
                gate_cache.ACTIVE = store       # the proofs' frames kept in it (``gate_frames``)
                try:
                    sections = _on_workers(budget, progress, kw, workers, external, store)
                finally:
                    gate_cache.ACTIVE = None
        total = sum(len(s.checks) for s in sections)
        return GateResult(budget, sections, time.perf_counter() - t0, where,
                          external=external_summary(external, loaded),
                          cache=store.summary(total) if store is not None else None)
    with scratch() as where, model_runs.shared() if store is None or not store.keeps("replay") \
            else contextlib.nullcontext():
        # without the cache, each trace's run of the model is made once per process and
        # played to the replay, the two kernels and the crash cuts (``model_runs``; the parts
        # of one trace placed on one worker, ``gate_split``); with it, each part runs its own,
        # recorded as what it ran
        impl_system.use_backend(backend)
        gate_cache.ACTIVE = store
        try:
            sections = (_in_turn(budget, progress, kw) if workers < 2 and store is None else
                        _on_workers(budget, progress, kw, workers, cache=store))
        finally:
            gate_cache.ACTIVE = None
            impl_system.use_backend(None)
    total = sum(len(s.checks) for s in sections)
    return GateResult(budget, sections, time.perf_counter() - t0, where,
                      cache=store.summary(total) if store is not None else None)


_SELECTED: dict = {}


def _real_selections(budget: str, loaded: list) -> list[set[str] | str]:
    """The traces the budget runs on the real world (``traces``, ``cuts``), or the error
    that says why it cannot tell; once per gate run."""
    key = (budget, repr(BUDGETS[budget].get("real-world")), tuple(map(id, loaded)))
    if key not in _SELECTED:
        _SELECTED.clear()
        out = []
        for what in ("traces", "cuts"):
            try:
                out.append(real_selection(budget, loaded, what))
            except ValueError as e:
                out.append(str(e))
        _SELECTED[key] = out
    return _SELECTED[key]


def part_inputs(name: str, budget: str, loaded: list | None, spec: dict,
                earlier: Earlier | None, replayed: dict | None = None) -> list:
    """What a part of section ``name`` reads beyond the sources and the options: the traces
    it replays (those at ``spec['only']`` for a section split by trace, else every loaded
    one; none for a section that reads none), which of them run on the real world, the
    earlier sections' findings (for the coverage: the cells each measured section's checks
    sent, in their data) and, for the coverage's counting, the outcome of its witnesses'
    replays (the cells they sent and the problems found; not their seconds)."""
    loaded = loaded or []
    by_trace = name in ("replay", "crash-cuts", "two-kernels") and spec.get("only") is not None
    # a mutant alone reads its incident traces, keyed with it (``gate_mutants``)
    alone = name == "mutants" and spec.get("only") is not None
    chosen = [] if name in NO_TRACES or alone else \
        [t for n, t in enumerate(loaded) if not by_trace or n in spec["only"]]
    real = [sorted(t.id for t in chosen if t.id in selected) if isinstance(selected, set)
            else selected for selected in _real_selections(budget, loaded)]
    found = None if name not in LATE or earlier is None else \
        {"cells": earlier.cells} if name == "coverage" else dataclasses.asdict(earlier)
    out = [[trace_identity(t) for t in chosen], real, found]
    if name == "coverage" and not spec.get("witnesses"):
        out.append({k: v for k, v in (replayed or {}).items() if k != "seconds"})
    return out


def _in_turn(budget: str, progress: Progress | None, kw: dict,
             sections: list[Section] | None = None, cache: GateCache | None = None,
             workers: int = 1) -> list[Section]:
    """The sections not yet in ``sections``, one after another in this process (``workers``:
    the processes a section may share its work with, the others being done)."""
    sections = list(sections or [])
    for name, _ in SECTIONS[len(sections):]:
        sections.append(run_section(name, budget, progress, **kw, cache=cache,
                                    earlier=earlier_results(sections), workers=workers))
    return sections


def _on_workers(budget: str, progress: Progress | None, kw: dict, workers: int,
                external: Kernel | None = None, cache: GateCache | None = None
                ) -> list[Section]:
    """The sections before ``LATE`` split into parts on ``workers`` processes (in turn in
    this one for fewer than 2), then the late ones in turn (the trace matrix reads the crash
    cuts' and the proofs' results). ``external``: a section over the protocol is one part
    (its traces one after another). ``cache``: a part kept there is not run again."""
    early = [n for n, _ in SECTIONS][:min(i for i, (n, _) in enumerate(SECTIONS) if n in LATE)]
    sections: dict[str, Section] = {}
    parts: list[Part] = []
    protocol: set[int] = set()          # the parts run over the protocol (by position)
    for name in early:
        sections[name] = _skipped(name, budget)
        how = None if sections[name] is not None or external is None else \
            external_plan(name, budget, kw, external, 1)
        if isinstance(how, Section):
            sections[name] = how
        elif how is not None:
            protocol.add(len(parts))
            parts.append(Part(name, how, weight=EXTERNAL_WEIGHTS[name]))
        elif sections[name] is None:
            parts += split(name, budget, kw, _call)
    if external is None and _skipped("coverage", budget) is None and kw.get("loaded"):
        parts += _witness_parts(kw["loaded"])
    if cache is not None:
        parts = [_through(cache, budget, kw, p) if reusable(p, n in protocol)
                 and cache.keeps(p.section) else p for n, p in enumerate(parts)]
    results: dict[str, list[Done]] = {}
    replayed: dict = {}
    witnessed: list[Done] = []
    witness_parts = sum(1 for p in parts if p.spec.get("witnesses"))

    def on_done(n: int, done: Done) -> None:
        name = parts[n].section
        if parts[n].spec.get("witnesses"):          # for the coverage section, after the others
            witnessed.append(done)
            if len(witnessed) == witness_parts and not any(d.raised for d in witnessed):
                replayed.update(merged([d.checks[0].data for d in witnessed]))
            return
        results.setdefault(name, []).append(done)
        if n + 1 < len(parts) and parts[n + 1].section == name:
            return
        raised = [d for d in results[name] if d.raised]
        checks = raised[0].checks if raised else [c for d in results[name] for c in d.checks]
        if not checks:
            checks = guarded(name, lambda: _nonempty([])).checks
        sections[name] = Section(name, checks, sum(d.seconds for d in results[name]))
        _final(sections[name], progress)

    if workers < 2:
        run_parts_here(parts, progress, on_done)
    else:
        _kept_here(parts, workers, progress, on_done)
    done = [sections[n] for n in early]
    if external is None:
        return _in_turn(budget, progress, dict(kw, replayed=replayed or None), done, cache, workers)
    for name, _ in SECTIONS[len(done):]:
        done.append(run_section(name, budget, progress, **kw, external=external,
                                earlier=earlier_results(done)))
    return done


#: What ``cache_scope`` keeps: every section's parts (None), or the sections on the model's.
CACHE_SCOPES = {"all": None, "model": gate_cache.MODEL_SECTIONS}


def reusable(part: Part, over_protocol: bool) -> bool:
    """Whether the cache may keep and reuse ``part``: any part but one run over the protocol.
    Such a part's checks are what an outside command answered, and no key of ours covers
    that command's behaviour (its program, its files, its environment): it always runs. The
    other parts of a gate over the protocol (the sections on the model) run wgk's own code
    only, in the gate's process or its workers, and are keyed as the gate in process keys
    them."""
    return not over_protocol


#: Rough seconds of the coverage's witness replays (``_witness_parts``), all of them.
WITNESS_WEIGHT = 2.0


def _witness_parts(loaded: list) -> list[Part]:
    """The coverage's witnesses replayed among the other sections' parts, on the workers: they
    read no other section's result, so only the coverage's counting waits for the others.
    One part finds whether they are stale (``{"witnesses": True, "stale": True}``: the only
    one that reads the model's text, whether it is the one they were searched on), and one
    part per trace they start from replays that trace's witnesses (``"traces"``: its id), so
    the gate's cache keeps each trace's replays under what they ran: a changed rule runs
    again the replays of the traces whose witnesses ran it, and the currency (the unreachable
    cells' proofs kept cell by cell, ``gate_frames.unreachable_kept``: kept also when the
    text is the one they were searched on, so that a run after a rule changed finds those
    the change leaves alone). Each part's one
    check carries its outcome (``gate_coverage.witness_replays``); merged in the parts' order
    (``gate_coverage.merged``) they are the outcome of one replay of them all, which the
    coverage section reports as if it had replayed them itself; any part that raised leaves
    the replays to the section."""
    doc = witnesses_doc()
    traces = witness_traces(doc)
    steps = {t: 0 for t in traces}
    for w in doc["witnesses"]:
        steps[w["trace"]] += max(1, w.get("at", 0)) + len(w.get("steps", []))
    total = sum(steps.values()) or 1

    def part(spec: dict, only: set[str] | None, stale: bool, weight: float) -> Part:
        def run(progress) -> list[Check]:
            # with the gate's cache, each witness's system answered call by call and each run
            # of a trace's witnesses kept while the implementation answers it alike
            # (``gate_cache_memo``; as they are without it)
            # and each unreachable cell's proof kept under what it ran (``gate_frames``)
            cache = gate_cache.ACTIVE
            if cache is not None and not cache.keeps("coverage"):
                cache = None
            out = witness_replays(loaded, doc, make_impl=memoized(impl_system.ImplSystem),
                                  kept=kept_run, only=only, stale=stale,
                                  prove=None if cache is None else
                                  (lambda cells: unreachable_kept(cells, cache)))
            if stale and cache is not None and out["stale-reason"] is None and \
                    doc.get("model-digest") == witnesses.model_digest():
                # current by the model's text alone: the unreachable cells' proofs are kept
                # all the same, for the first run after a rule changed to find them
                unreachable_kept(doc.get("unfound", []), cache)
            if only:
                out["trace"] = min(only)
            return [Check("coverage", "witness replays", "pass", out["seconds"], "", out)]
        return Part("coverage", run, weight=weight, spec=spec)
    return [part({"witnesses": True, "stale": True}, set(), True, WITNESS_WEIGHT / 4)] + \
        [part({"witnesses": True, "traces": [t]}, {t}, False, WITNESS_WEIGHT * steps[t] / total)
         for t in traces]


def witnesses_doc() -> dict:
    """The stored witnesses (``witnesses.load``)."""
    return witnesses.load()


def _kept_here(parts: list[Part], workers: int, progress: Progress | None,
               on_done: Callable[[int, Done], None]) -> None:
    """``run_parts``, the parts taken from the cache (``_through``) done in this process: a
    worker would only send their checks back (no worker starts when every part is kept).
    ``on_done`` is called in the parts' order, as ``run_parts`` calls it."""
    rest = [n for n, p in enumerate(parts) if not getattr(p.run, "kept", False)]
    done: dict[int, Done] = {n: guarded(p.section, lambda p=p: p.run(lambda t: None))
                             for n, p in enumerate(parts) if getattr(p.run, "kept", False)}
    front = [0]

    def finish(n: int, d: Done | None = None) -> None:
        if d is not None:
            done[n] = d
        while front[0] in done:
            on_done(front[0], done.pop(front[0]))
            front[0] += 1
    finish(-1)
    if rest:
        run_parts([parts[n] for n in rest], workers, progress, lambda m, d: finish(rest[m], d))


def _through(cache: GateCache, budget: str, kw: dict, part: Part) -> Part:
    """``part`` taken from the cache when it is kept there, else run and kept."""
    name, spec = part.section, part.spec
    key = cache.key(name, spec, part_inputs(name, budget, kw.get("loaded"), spec, None))
    outputs = cache.outputs(name, spec, kw.get("loaded"))     # a replay: the model's run
    checks = cache.lookup(key, f"{name} {_plain_spec(spec)}".strip(), outputs,
                          counted=not spec.get("witnesses"))      # its check is no report's
    if checks is not None:
        def kept(progress) -> list[Check]:
            return checks
        kept.kept = True                  # done in the gate's process (``_kept_here``)
        return Part(name, kept, part.offset, part.total, 0.0, spec)
    run = part.run
    return Part(name, lambda progress: cache.run(key, name, spec, lambda: fresh(run, progress), outputs),
                part.offset, part.total, part.weight, spec)


def fresh(run: Callable, *args) -> list[Check]:
    """``run(*args)`` with none of the models compiled for graphs before
    (``compiled.forget_graphs``): what a part's runs evaluate by compiled code is then traced
    within the part, and recorded by the gate's cache as what the part ran. Without the cache
    nothing is recorded, and the parts of a worker share the models of equal graphs (the same
    verdicts: a model is keyed by its graph, rules, properties and model functions)."""
    forget_graphs()
    return run(*args)


def _plain_spec(spec: dict) -> str:
    return " ".join(f"{k}={sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v}"
                    for k, v in sorted(spec.items()))
