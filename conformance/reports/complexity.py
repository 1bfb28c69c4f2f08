"""The complexity budget of the single attempt-control kernel, measured from the code.

Every figure is computed here from the registries (``wgk.model.vocab``,
``wgk.model.rules``, ``wgk.model.env``) or from the source with ``ast`` and
``tokenize``; nothing is typed in by hand except the limits (``BUDGET``, one
place, one reason each) and the peer's audited baseline, which is read from
the deletion-map traces the repository holds (``traces/peers/wg/deletion-map``,
translated from the peer's deletion audit by ``wgk import-wg``).

``measure()`` returns a ``Measurement`` (typed data); ``cmd_complexity`` prints it. The
source facts are read in ``complexity_source``, the peer's baseline in ``complexity_audit``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from wgk.model.env import EnvKind
from wgk.model.rules import RULES
from wgk.model.vocab import AUTHORITY, Actor, Kind

from wgk.conformance.reports.complexity_audit import (  # noqa: F401 (re-exported)
    AUDIT_REDUCERS, AUDIT_STORES, AUDIT_TERMINAL_PATHS, Audit, AuditEntry, Baseline, audit_file, baselines,
    load_audit,
)
from wgk.conformance.reports.complexity_source import (  # noqa: F401 (re-exported)
    CHILD_COMMANDS, HELPER_SPAWNS, IMPL_TOOLS, PACKAGES, ROOT, call_sites, code_lines, dotted, functions, journals, loc,
    parse, public_methods, reducers, stores_of_record, terminal_writers,
)


#: The budget: figure -> (limit, why). ``wgk complexity --check`` fails when a
#: measured figure exceeds its limit. Raising a limit is a reviewed change here.
BUDGET: dict[str, tuple[int, str]] = {
    "actors": (13, "one actor per role named by the design; a new role is a design change"),
    "authority-pairs": (111, "each actor x request-kind grant is a way to change state; no new grant unreviewed (the operator confirms an archive, the daemon and cleanup archive; the worker or wrapper parks, the operator or daemon delivers, the daemon expires a wait; the operator reopens a Done task), the operator's pause and unpause, the review valve, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys"),
    "request-kinds": (57, "one kind per transition; the wire vocabulary is closed (confirm-archive and archive, park, deliver and expire-wait, reopen included), the operator's pause and unpause, the review valve, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys"),
    "env-step-kinds": (7, "the environment the kernel is checked against is closed"),
    "rule-functions": (57, "exactly one guard-then-update rule per request kind, the operator's pause and unpause, the review valve, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys"),
    "reducers": (1, "one reducer decides every request at run time (impl/decisions/rules.py:decide, via Kernel.handle)"),
    "model-reducers": (1, "the normative specification has one reducer too (model/kernel.py:decide_authenticated, via decide and decide_fresh)"),
    "kernel-public-methods": (33, "the implementation's API surface (requests go through handle, "
                                  "or handle_batch for group commit, or admit then handle_admitted "
                                  "when the caller reads the admitted request first; the graph policy's "
                                  "protected paths are read through protected_paths; one task "
                                  "looked up by its name: task_id, knows)"),
    "terminal-writers-model": (8, "rules that can make an attempt terminal, all reached through decide (park closes an attempt on an external wait)"),
    "terminal-writers-impl": (9, "the same eight rules plus the migration seed of an explicit state"),
    "stores-of-record": (1, "only the hash-linked ledger is authoritative; every other table is rebuilt from it"),
    "journals": (2, "the ledger and the idempotency journal, committed in one transaction"),
    "databases": (1, "one SQLite file per graph; no second store to keep in step"),
    "helper-processes": (0, "no long-lived helper: convergence and observation run in the caller"),
    "child-commands": (3, "short-lived git invocations only (argument lists, no shell)"),
    "loc-model": (3760, "the normative model stays small enough to read in a sitting (its rules and invariants in modules by what they decide; capability tokens and the intruder who lacks them; the protected-path grammar, the archive, external waits, the reopen of a Done task), the peer's daemon, runtime and planner-state importers and the historical planner ruleset, decision coverage and revocation, retries per generation, admission parity, pause and not-before, the review valve, the one request path, decisions by their writes, kept enumerations, crash cuts on the real world over the protocol, reopen order, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys"),
    "loc-impl": (7743, "the reference implementation: store (SQLite and PostgreSQL), ledger and its replay images, rules written from the contract's tables (each condition a named function), the planner as one query over the stored facts, writes conditional on the stamp their record was read with (a task missing its stamp refused in one line), principals and capability tokens, git (with a fixed identity for the environment's other committer, so a machine with no git identity runs it), /proc, protected paths, external waits, the reopen of a Done task, scratch schemas recycled on PostgreSQL, principals as ledger events and the tables that grant authority held to the chain, convergence that parks a task whose effect failed, a revise checked against the repository's history, secret files created never adopted and worktrees kept under their root, flat cost: one task's id by its name, a bounded record cache, the kernel served over the conformance protocol and the gate against any kernel, decision coverage and revocation, retries per generation, admission parity, pause and not-before, the request context and the implementation's rooms, the review valve, several external kernels on one storage and the real world over the protocol, the one request path, decisions by their writes, kept enumerations, crash cuts on the real world over the protocol, reopen order, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys, the crash cuts decided by equivalence, the proofs' small solver first, dispatch, submit and WorkSave decided by their writes and the one-pass parse, the reopen racing its dependents' effects, the gate's parts keyed by what their children ran, compiled models shared among equal graphs, the crash cuts' recovered states decided once, the effect and cleanup edges decided by their writes, replays kept under the model's run of their trace, the liveness facts compiled, the request's names matched once and its ledger body made from canonical text, the planner's rows and the authority check kept per database state, the request path's receipt bound in its one evolve and a closed kernel's key through one generated copy, PostgreSQL's round trips as pipelines of bound statements and migration 4's rows and one-row lock functions, the crash cuts on one held connection per trace, the proof's kinds handed out as processes come free and a heartbeat's ledger and journal written straight after its write, BEGIN and COMMIT prepared on PostgreSQL and the row count read by the lock function, the stamp as a column of its transaction's row and three tables keyed by their text key alone, each with its migration (2026-12-07), the lock function answering the journal read on PostgreSQL and a request's data version read once under its writer lock with a step's stamp in its own statement (2026-12-07)"),
    "loc-conformance": (25954, "checkers, adapters, the view, the unbounded proof (the intruder's journal namespace; the dependencies' generations a reopen reads), the command line, the real-world gate sections, the implementation's mutant catalogue (external waits, the reopen), the witnesses' recorded paths and the crash cuts' kept scratch, the guards of the writes' conditions, the explorer's worker processes, PostgreSQL's recycled scratch schemas, the explorer's time budget, the rules' conditions disabled in turn and the tests that see the defence-in-depth ones, the owner's rebase in traces and the recorder, the kernel's command line without the suite's extras, secret files created never adopted and worktrees kept under their root, the peer's daemon, runtime and planner-state importers and the historical planner ruleset, the kernel served over the conformance protocol and the gate against any kernel, decision coverage and revocation, retries per generation, admission parity, pause and not-before, probes of every K field and sender, the tamper section and the file modes, the catalogue by category, the land race and WG's obligations, the compiled model, the gate's cache, the review valve, several external kernels on one storage and the real world over the protocol, the dependency races, hostile inputs, every connection's durability and the proofs of unreachable cells, the proof shared among processes, the valve's guards, the one request path, decisions by their writes, kept enumerations, crash cuts on the real world over the protocol, reopen order, proof frames kept one by one, hostile credentials over the protocol, lazy imports of the served kernel, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys, the catalogue measured through the protocol, the crash cuts decided by equivalence, the proofs' small solver first, dispatch, submit and WorkSave decided by their writes and the one-pass parse, the reopen racing its dependents' effects, the gate's parts keyed by what their children ran, compiled models shared among equal graphs, the crash cuts' recovered states decided once, the effect and cleanup edges decided by their writes, replays kept under the model's run of their trace, the liveness facts compiled, the mutants' proofs on one set-up of the model's prover, task states interned by value in exploration and compiled code per shape, kernel databases from an image and model runs without invariants nothing reads, the intruder's held and unheld roles in templates of their own, witnesses current by behaviour and systems answered call by call from the cache, the model's small costs, the mutants' corpus listed once and the traces' schema checked on every core, fuzz runs kept whole and the coverage keyed by what its replays and its counting read, the crash cuts on one held connection per trace, the proof's kinds handed out as processes come free and a heartbeat's ledger and journal written straight after its write, the probes' journal-less projection, proof witnesses kept by the kinds their paths send and the held connection's restarts checked by the gate, the proof's terms built through a memo and z3's C functions, the mutants' walks and the model's set-up kept kind by kind (2026-12-07), the at-most-one built pairwise (2026-12-07), a trace's model run made once for the replay, the two kernels and the crash cuts, its parts placed on one worker (2026-12-07), the coverage's witnesses replayed in a part per trace and the init frames keyed as an environment step's (2026-12-07), a request with a key proved as one branch per answer of the journal (2026-12-07), the protocol's optional reset and the harness's kept processes (external.Spares), the unreachable cells' proofs kept cell by cell, the fuzz's constant pool emptied and the cutoff conditions built with z3's C functions, the explorer's workers send task states as their values"),
    "loc-total": (38548, "model + impl + conformance, with the kernel's command line and demo, the view, names, anchors, capability tokens, protected paths and the archive, external waits, the reopen of a Done task, the real-world gate, the gate's runner on every core, the witnesses' recorded paths and the rebuild's scratch in memory kept open across the crash cuts of a step, the planner as a query and the writes' conditions, the explorer's worker processes, PostgreSQL's recycled scratch schemas, the implementation's rules as the contract's tables of named conditions, the explorer's time budget, the kernel's command line without the suite's extras, secret files created never adopted and worktrees kept under their root, the peer's daemon, runtime and planner-state importers and the historical planner ruleset, flat cost: one task's id by its name, a bounded record cache, the kernel served over the conformance protocol and the gate against any kernel, decision coverage and revocation, retries per generation, admission parity, pause and not-before, probes of every K field and sender, the tamper section and the file modes, the catalogue by category, the land race and WG's obligations, the compiled model, the request context and the implementation's rooms, the gate's cache, the review valve, several external kernels on one storage and the real world over the protocol, the dependency races, hostile inputs, every connection's durability and the proofs of unreachable cells, the proof shared among processes, the valve's guards, the one request path, decisions by their writes, kept enumerations, crash cuts on the real world over the protocol, reopen order, proof frames kept one by one, hostile credentials over the protocol, lazy imports of the served kernel, the completion receipt, provider routes, the attempt's chat and the archive proposal, decisions by their writes on both stores, per-mutant cache keys, the catalogue measured through the protocol, the crash cuts decided by equivalence, the proofs' small solver first, dispatch, submit and WorkSave decided by their writes and the one-pass parse, the reopen racing its dependents' effects, the gate's parts keyed by what their children ran, compiled models shared among equal graphs, the crash cuts' recovered states decided once, the effect and cleanup edges decided by their writes, replays kept under the model's run of their trace, the liveness facts compiled, the mutants' proofs on one set-up of the model's prover, the request's names matched once and its ledger body made from canonical text, task states interned by value in exploration and compiled code per shape, the planner's rows and the authority check kept per database state, kernel databases from an image and model runs without invariants nothing reads, the intruder's held and unheld roles in templates of their own, witnesses current by behaviour and systems answered call by call from the cache, PostgreSQL's round trips as pipelines of bound statements and migration 4's rows and one-row lock functions, the model's small costs, the mutants' corpus listed once and the traces' schema checked on every core, fuzz runs kept whole and the coverage keyed by what its replays and its counting read, the crash cuts on one held connection per trace, the proof's kinds handed out as processes come free and a heartbeat's ledger and journal written straight after its write, BEGIN and COMMIT prepared on PostgreSQL and the row count read by the lock function, the probes' journal-less projection, proof witnesses kept by the kinds their paths send and the held connection's restarts checked by the gate, the proof's terms built through a memo and z3's C functions, the one-task search without kept contexts (2026-12-07), the mutants' walks and the model's set-up kept kind by kind (2026-12-07), the at-most-one built pairwise (2026-12-07), the lock function answering the journal read on PostgreSQL and a request's data version read once under its writer lock with a step's stamp in its own statement (2026-12-07), a trace's model run made once for the replay, the two kernels and the crash cuts, its parts placed on one worker (2026-12-07), the coverage's witnesses replayed in a part per trace and the init frames keyed as an environment step's (2026-12-07), a request with a key proved as one branch per answer of the journal (2026-12-07), the protocol's optional reset and the harness's kept processes (external.Spares), the unreachable cells' proofs kept cell by cell, the fuzz's constant pool emptied and the cutoff conditions built with z3's C functions, the explorer's workers send task states as their values"),
}


@dataclass(frozen=True)
class Figure:
    name: str
    group: str
    value: int
    limit: int | None
    reason: str
    baseline: Baseline
    items: tuple[str, ...] = ()

    @property
    def over(self) -> bool:
        return self.limit is not None and self.value > self.limit

    def to_json(self) -> dict:
        return {"name": self.name, "group": self.group, "value": self.value,
                "limit": self.limit, "reason": self.reason, "over": self.over,
                "baseline": {"value": self.baseline.value, "counted": self.baseline.counted},
                "items": list(self.items)}


@dataclass(frozen=True)
class Measurement:
    figures: tuple[Figure, ...]

    @property
    def over(self) -> list[Figure]:
        return [f for f in self.figures if f.over]

    @property
    def ok(self) -> bool:
        return not self.over

    def get(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"ok": self.ok, "over": [f.name for f in self.over],
                "figures": {f.name: f.to_json() for f in self.figures}}


# --- measuring --------------------------------------------------------------------------------

def _figure(name: str, group: str, items: list[str] | None, value: int | None,
            base: dict[str, Baseline], budget: Mapping[str, tuple[int, str]]) -> Figure:
    limit, reason = budget.get(name, (None, ""))
    return Figure(name, group, len(items) if value is None else value, limit, reason,
                  base.get(name, Baseline(None, "not stated")), tuple(items or ()))


def measure(budget: Mapping[str, tuple[int, str]] | None = None) -> Measurement:
    """Every figure of the budget, measured now. ``budget`` overrides ``BUDGET`` (tests)."""
    budget = BUDGET if budget is None else budget
    base = baselines(load_audit())
    grants = [f"{a.label}:{k.label}" for k, actors in AUTHORITY.items() for a in sorted(actors)]
    rule_names = sorted({fn.__name__ for fn in RULES.values()})
    f = lambda name, group, items=None, value=None: _figure(name, group, items, value, base, budget)
    lines = {p: loc(p) for p in PACKAGES}
    return Measurement((
        f("actors", "authorities", [a.label for a in Actor]),
        f("authority-pairs", "authorities", grants),
        f("request-kinds", "transition APIs", [k.label for k in Kind]),
        f("env-step-kinds", "transition APIs", [e.label for e in EnvKind]),
        f("rule-functions", "transition APIs", rule_names),
        f("reducers", "transition APIs", reducers("impl")),
        f("model-reducers", "transition APIs", reducers("model")),
        f("kernel-public-methods", "transition APIs", public_methods("impl/front/kernel.py", "Kernel")),
        f("terminal-writers-model", "terminal writers", terminal_writers("model")),
        f("terminal-writers-impl", "terminal writers", terminal_writers("impl")),
        f("stores-of-record", "journals", stores_of_record()),
        f("journals", "journals", journals()),
        f("databases", "journals", call_sites("impl", {"sqlite3.connect"})),
        f("helper-processes", "processes", call_sites("impl", HELPER_SPAWNS)),
        f("child-commands", "processes", call_sites("impl", CHILD_COMMANDS)),
        f("loc-model", "lines of code", value=lines["model"]),
        f("loc-impl", "lines of code", value=lines["impl"]),
        f("loc-conformance", "lines of code", value=lines["conformance"]),
        f("loc-total", "lines of code", value=sum(lines.values()) + sum(map(loc, IMPL_TOOLS))),
    ))
