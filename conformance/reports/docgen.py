"""Generated blocks of docs/design-wg-single-attempt-control-kernel.md.

Every table in the document that restates a fact living in code is generated
here, from the registries (``AUTHORITY``, ``EDGES``, ``Kind``, ``EnvKind``,
``Code``), from the rule functions' source (``ast``), and from the complexity
measurement. The document holds each block between the lines
``<!-- generated:NAME:begin -->`` and ``<!-- generated:NAME:end -->``.

    wgk docs --check    # exit 1 with a diff when a block is stale
    wgk docs --write    # refresh the blocks in place (``conformance/cli/cmd_docs.py``)
"""
from __future__ import annotations

import ast
import difflib
import inspect
import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from wgk.model.env import EnvKind
from wgk.model.rules import RULES
from wgk.model.vocab import (
    AUTHORITY, EDGES, EVIDENCE_KINDS, NEEDS_CAPABILITY, TRANSACTION_KINDS, AttemptState, Code,
    Exit, Kind, OwnerSeen, Phase,
)

from wgk.conformance.reports import complexity
from wgk.conformance.reports.complexity import ROOT, dotted, functions, parse

DOC = "docs/design-wg-single-attempt-control-kernel.md"
REFRESH = "wgk docs --write"
_BLOCK = re.compile(r"(<!-- generated:([a-z-]+):begin -->\n)(.*?)(<!-- generated:\2:end -->)", re.S)

# --- what each rule writes, from its source --------------------------------------------------

#: field -> (enum, the names it is imported as in the rule modules, the helper that
#: takes it positionally as its second argument)
FIELDS = {
    "attempt_state": (AttemptState, {"AS", "AttemptState"}, "close_attempt"),
    "exit": (Exit, {"Exit"}, "leave_main_line"),
    "owner_seen": (OwnerSeen, {"OwnerSeen"}, None),
}
#: The updates the rules share (``close_attempt``, ``leave_main_line``, ...), read with them.
SHARED_UPDATES_FILE = "model/updates.py"


def rule_files() -> tuple[str, ...]:
    """Every module a rule of ``RULES`` is defined in (``model/rules_*.py``), and the shared
    updates: the files whose functions are read as one namespace."""
    files = {Path(inspect.getsourcefile(fn)).resolve().relative_to(ROOT).as_posix()
             for fn in RULES.values()}
    return tuple(sorted(files | {SHARED_UPDATES_FILE}))


@lru_cache(maxsize=None)
def _module_functions() -> dict[str, ast.FunctionDef]:
    """Every module-level function of the rule files by name (a name defined twice is refused:
    a helper call would be ambiguous)."""
    out: dict[str, ast.FunctionDef] = {}
    for rel in rule_files():
        for name, fn in functions(parse(rel)):
            if name in out:
                raise ValueError(f"{rel}: function {name} is also defined in another rule module")
            out[name] = fn
    return out


def _members(expr: ast.AST, fn: ast.FunctionDef, aliases: set[str], seen: frozenset) -> set[str]:
    """Enum members an expression can evaluate to: literals, local names, helper returns."""
    out: set[str] = set()
    helpers = _module_functions()
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and dotted(node.value) in aliases:
            out.add(node.attr)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            for a in ast.walk(fn):
                if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                                     for t in a.targets):
                    out |= _members(a.value, fn, aliases, seen)
        elif isinstance(node, ast.Call) and dotted(node.func) in helpers \
                and dotted(node.func) not in seen:
            h = helpers[dotted(node.func)]
            for r in ast.walk(h):
                if isinstance(r, ast.Return) and r.value is not None:
                    out |= _members(r.value, h, aliases, seen | {h.name})
    return out


def writes(name: str, field: str, seen: frozenset = frozenset()) -> set[str]:
    """Members of ``field``'s enum that function ``name`` (or a helper it calls) can store."""
    _, aliases, positional = FIELDS[field]
    helpers = _module_functions()
    fn = helpers[name]
    out: set[str] = set()
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        callee = dotted(call.func)
        for kw in call.keywords:
            if kw.arg == field:
                out |= _members(kw.value, fn, aliases, seen | {name})
        if callee == positional and len(call.args) > 1:
            out |= _members(call.args[1], fn, aliases, seen | {name})
        if callee in helpers and callee not in seen and callee != name:
            out |= writes(callee, field, seen | {name})
    return out


def entered_by(field: str) -> dict[str, list[Kind]]:
    """member label -> the request kinds whose rule can store it."""
    enum = FIELDS[field][0]
    table: dict[str, list[Kind]] = {m.label: [] for m in enum}
    for kind, rule in RULES.items():
        for member in sorted(writes(rule.__name__, field), key=lambda m: enum[m]):
            table[enum[member].label].append(kind)
    return table


def rejections() -> dict[str, list[str]]:
    """code label -> where it is decided: a generic check of the reducer, or rule kinds."""
    table: dict[str, list[str]] = {c.label: [] for c in Code if c != Code.NONE}
    for name, fn in functions(parse("model/kernel.py")):
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and dotted(n.value) == "Code" and n.attr != "NONE":
                entry = f"generic check in `{name}`"
                if entry not in table[Code[n.attr].label]:
                    table[Code[n.attr].label].append(entry)
    helpers = _module_functions()
    for kind, rule in RULES.items():
        names = {rule.__name__} | {dotted(c.func) for c in ast.walk(helpers[rule.__name__])
                                   if isinstance(c, ast.Call) and dotted(c.func) in helpers}
        codes = {n.attr for h in names for n in ast.walk(helpers[h])
                 if isinstance(n, ast.Attribute) and dotted(n.value) == "Code" and n.attr != "NONE"}
        for c in sorted(codes, key=lambda c: Code[c]):
            table[Code[c].label].append(f"`{kind.label}`")
    return table


# --- rendering --------------------------------------------------------------------------------

def actors(kind: Kind) -> str:
    return ", ".join(a.label for a in sorted(AUTHORITY[kind]))


def with_actors(kinds: list[Kind]) -> str:
    return "; ".join(f"`{k.label}` ({actors(k)})" for k in kinds) or "—"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def block_kinds() -> str:
    rows = []
    for k in Kind:
        cls = "transaction" if k in TRANSACTION_KINDS else "evidence" if k in EVIDENCE_KINDS else "control"
        edge = ""
        if k in EDGES:
            sources, to = EDGES[k]
            edge = " or ".join(p.label for p in sources) + f" → {to.label}"
        rows.append([f"`{k.label}`", actors(k), "yes" if k in NEEDS_CAPABILITY else "no", cls, edge])
    return table(["request kind", "who may send it (`AUTHORITY`)", "carries K", "class",
                  "main-line edge (`EDGES`)"], rows)


def block_phases() -> str:
    enter = {p: [k for k, (_, to) in EDGES.items() if to == p] for p in Phase}
    leave = {p: [k for k, (src, _) in EDGES.items() if p in src] for p in Phase}
    rows = [[f"`{p.label}`", with_actors(enter[p]), with_actors(leave[p])] for p in Phase]
    return table(["phase", "entered by", "left by (main line)"], rows)


def block_exits() -> str:
    enter = entered_by("exit")
    rows = [[f"`{e.label}`", with_actors(enter[e.label])] for e in Exit]
    return table(["exit", "stored by (the rule can set it)"], rows)


def block_attempt_states() -> str:
    enter = entered_by("attempt_state")
    rows = [[f"`{s.label}`", "terminal" if s not in (AttemptState.NONE, AttemptState.RUNNING) else "",
             with_actors(enter[s.label])] for s in AttemptState]
    return table(["attempt state", "", "entered by"], rows)


def block_owner_seen() -> str:
    enter = entered_by("owner_seen")
    rows = [[f"`{o.label}`", with_actors(enter[o.label])] for o in OwnerSeen]
    return table(["owner seen", "stored by"], rows)


def env_comments() -> dict[str, str]:
    """EnvKind member -> its trailing comment in model/env.py."""
    text = (ROOT / "model/env.py").read_text()
    out, last = {}, None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string in EnvKind.__members__:
            last = tok.string
        elif tok.type == tokenize.COMMENT and last and last not in out:
            out[last] = tok.string.lstrip("# ").strip()
        elif tok.type == tokenize.NEWLINE:
            last = None
    return out


def block_env_steps() -> str:
    notes = env_comments()
    rows = [[f"`{e.label}`", notes.get(e.name, "")] for e in EnvKind]
    return table(["environment step (no decision, no actor)", "what happens"], rows)


#: Codes the model answers at the wire, before ``decide``: where, instead of a rule.
WIRE_CODES = {"bad-name": "the wire, before `decide`: a name outside `wgk.model.names`"}


def block_codes() -> str:
    rows = [[f"`{c}`", ", ".join(where) or WIRE_CODES.get(c, "— (not decided by the model)")]
            for c, where in rejections().items()]
    return table(["rejection code", "decided by"], rows)


def block_budget() -> str:
    m = complexity.measure()
    rows = []
    for f in m.figures:
        here = "run the command" if f.group == "lines of code" else str(f.value)
        peer = f.baseline.counted if f.baseline.value is None else f"{f.baseline.value} ({f.baseline.counted})"
        rows.append([f"`{f.name}`", f.group, here, str(f.limit), f.reason, peer])
    return table(["figure", "group", "here", "limit", "why this limit", "peer (deletion audit)"], rows)


def block_audit() -> str:
    audit = complexity.load_audit()
    rows = []
    for e in audit.evidence:
        where = REPLACED[(Path(e.trace).name[:2], e.symbol)]
        rows.append([Path(e.trace).name[:2], f"`{e.path}` {e.symbol}", where])
    return table(["audit", "peer path", "the one place here"], rows)


#: (deletion-map trace number, audited symbol) -> the one place here that does it now.
#: Every dotted name in backticks must resolve (a test imports it).
REPLACED: dict[tuple[str, str], str] = {
    ("01", "handle_worker_request"): "`wgk.model.kernel.decide` journal check; impl: `wgk.impl.front.kernel.Kernel.handle` (one `BEGIN IMMEDIATE`)",
    ("01", "begin_request/complete_request"): "the `journal` table, written in the same transaction as the effect (`wgk.impl.storage.store`)",
    ("02", "detect_dead_reason"): "`wgk.model.rules.heartbeat_timeout` (suspicion only)",
    ("02", "cleanup_dead_agents"): "`wgk.model.rules.probe_owner` then `wgk.model.rules.declare_lost` (proven death only)",
    ("02", "AgentEntry/heartbeat"): "heartbeats are evidence rows (`wgk.model.rules.heartbeat`); liveness is pid + birth (`wgk.impl.world.proc`)",
    ("03", "ProviderHealthStatus::record_failure"): "`wgk.model.rules.provider_failure` (counted once by event id)",
    ("03", "track_provider_health"): "`wgk.model.rules.provider_failure`",
    ("03", "append_record_at"): "the evidence table keyed by (task, kind, id); the ledger is the one record",
    ("04", "PiWatchdog::ingest_native_value"): "`wgk.model.rules.compaction` (each occurrence id once)",
    ("04", "needs_finalization/emit_completion_prompt"): "`wgk.model.rules.compaction` earns one continuation; `wgk.model.rules.ack_continuation` records its delivery",
    ("04", "observe_live/translate_finished_stream"): "the wrapper sends `compaction` / `ack-continuation` requests; no action is computed outside the reducer",
    ("05", "generated Pi wrapper"): "the wrapper is an adapter: `observe-eof`, `fail` and `submit` requests only",
    ("05", "Observation::PipeEof/ProcessExited"): "`wgk.model.rules.observe_eof` (suspicion, one probe)",
    ("05", "process_exit"): "`wgk.model.rules.probe_owner` (exact birth) and daemon convergence (`wgk.impl.front.converge`)",
    ("06", "validate_worker_capability"): "`wgk.model.kernel.capability_matches` (one check, every kind that carries K)",
    ("06", "check_expectation/require_running_attempt"): "`wgk.model.kernel.generic_checks`",
    ("06", "exact_owner/reduce"): "`wgk.model.kernel.decide` (the one reducer; `wgk.impl.decisions.rules.decide` implements it)",
    ("07", "scaffold_assign_task"): "`wgk.model.rules.assign`: an admission fact, no graph task",
    ("07", "build_auto_assign_tasks"): "`wgk.model.rules.assign` (daemon), visible in the ledger; no synthetic Done",
    ("07", "committed spawn audit"): "`wgk.model.rules.dispatch` refuses `assignment-required` until the receipt exists",
    ("07", "Observed Behavior"): "(a report, not code) replayed by `traces/peers/wg/deletion-map/07-assignment-plumbing-completion.json`",
    ("08", "run/commit_done"): "`wgk.model.rules.save_graph`: Done is the projection of a GraphSave (`wgk.model.projections.status`)",
    ("08", "replay_pending_completion"): "a `duplicate` answered from the journal; nothing re-executes (`wgk.model.kernel.decide`)",
    ("08", "handle_worker_request"): "`wgk.model.kernel.decide`: journal first, then authority and K, for every kind alike",
}


BLOCKS = {
    "kinds": block_kinds,
    "phases": block_phases,
    "exits": block_exits,
    "attempt-states": block_attempt_states,
    "owner-seen": block_owner_seen,
    "env-steps": block_env_steps,
    "codes": block_codes,
    "deletion": block_audit,
    "budget": block_budget,
}


@dataclass(frozen=True)
class Stale:
    name: str
    diff: str


def render(text: str) -> str:
    """The document with every generated block replaced by its fresh text."""
    return _BLOCK.sub(lambda m: m.group(1) + BLOCKS[m.group(2)]() + m.group(4), text)


def check(path: Path | None = None) -> list[Stale]:
    """Every block of the document that differs from its fresh text (or is missing)."""
    path = path or ROOT / DOC
    text = path.read_text()
    present = {m.group(2): m.group(3) for m in _BLOCK.finditer(text)}
    out = []
    for name, make in BLOCKS.items():
        fresh = make()
        old = present.get(name)
        if old is None:
            out.append(Stale(name, f"block {name} is missing from {path}"))
        elif old != fresh:
            diff = "".join(difflib.unified_diff(old.splitlines(True), fresh.splitlines(True),
                                                f"{DOC} ({name})", f"generated ({name})"))
            out.append(Stale(name, diff))
    unknown = sorted(set(present) - set(BLOCKS))
    out += [Stale(n, f"block {n} is not generated by wgk.conformance.reports.docgen") for n in unknown]
    return out
