"""The complexity budget of the single attempt-control kernel, measured from the code.

Every figure is computed here from the registries (``wgk.model.vocab``,
``wgk.model.rules``, ``wgk.model.env``) or from the source with ``ast`` and
``tokenize``; nothing is typed in by hand except the limits (``BUDGET``, one
place, one reason each) and the peer's audited baseline, which is read from
the deletion-map traces the repository holds (``traces/peers/wg/deletion-map``,
translated from the peer's deletion audit by ``wgk import-wg``).

``measure()`` returns a ``Measurement`` (typed data); ``cmd_complexity`` prints it.
"""
from __future__ import annotations

import ast
import io
import json
import re
import sqlite3
import tokenize
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

from wgk.model.env import EnvKind
from wgk.model.rules import RULES
from wgk.model.vocab import AUTHORITY, Actor, Kind

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model", "impl", "conformance")
#: The operator's command line and the demo live with the implementation but are not the
#: kernel: the kernel's figures (processes, writers, reducers, its lines) leave them out;
#: ``loc-total`` counts them.
IMPL_TOOLS = ("impl/cli", "impl/demo")
AUDIT_DIR = "traces/peers/wg/deletion-map"

#: The budget: figure -> (limit, why). ``wgk complexity --check`` fails when a
#: measured figure exceeds its limit. Raising a limit is a reviewed change here.
BUDGET: dict[str, tuple[int, str]] = {
    "actors": (13, "one actor per role named by the design; a new role is a design change"),
    "authority-pairs": (82, "each actor x request-kind grant is a way to change state; no new grant unreviewed"),
    "request-kinds": (37, "one kind per transition; the wire vocabulary is closed"),
    "env-step-kinds": (7, "the environment the kernel is checked against is closed"),
    "rule-functions": (37, "exactly one guard-then-update rule per request kind"),
    "reducers": (1, "one reducer decides every request at run time (impl/rules.py:decide, via Kernel.handle)"),
    "model-reducers": (1, "the normative specification has one reducer too (model/kernel.py:decide_fresh, via decide)"),
    "kernel-public-methods": (28, "the implementation's API surface (requests go through handle, "
                                  "or handle_batch for group commit)"),
    "terminal-writers-model": (7, "rules that can make an attempt terminal, all reached through decide"),
    "terminal-writers-impl": (8, "the same seven rules plus the migration seed of an explicit state"),
    "stores-of-record": (1, "only the hash-linked ledger is authoritative; every other table is rebuilt from it"),
    "journals": (2, "the ledger and the idempotency journal, committed in one transaction"),
    "databases": (1, "one SQLite file per graph; no second store to keep in step"),
    "helper-processes": (0, "no long-lived helper: convergence and observation run in the caller"),
    "child-commands": (3, "short-lived git invocations only (argument lists, no shell)"),
    "loc-model": (2400, "the normative model stays small enough to read in a sitting"),
    "loc-impl": (3500, "the reference implementation: store, ledger, rules, git, /proc"),
    "loc-conformance": (10000, "checkers, adapters and the command line"),
    "loc-total": (15000, "model + impl + conformance"),
}


@dataclass(frozen=True)
class Baseline:
    """What the peer's deletion audit states for a figure (``value`` None: not stated)."""

    value: int | None
    counted: str


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


# --- source helpers ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def parse(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(), filename=rel)


def sources(package: str) -> list[Path]:
    """The Python files of a package (for ``impl``: the kernel's, without ``IMPL_TOOLS``)."""
    tools = [ROOT / t for t in IMPL_TOOLS] if package == "impl" else []
    return sorted(p for p in (ROOT / package).rglob("*.py")
                  if not any(p.is_relative_to(t) for t in tools))


def docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers occupied by module, class and function docstrings."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.update(range(body[0].lineno, body[0].end_lineno + 1))
    return out


_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENCODING, tokenize.ENDMARKER}


def code_lines(text: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    doc = docstring_lines(ast.parse(text))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in _NOT_CODE:
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - doc)


@lru_cache(maxsize=None)
def _file_lines(path: str, mtime_ns: int, size: int) -> int:
    return code_lines(Path(path).read_text())


def loc(package: str) -> int:
    """Code lines of a package (each file counted again only when it changes); ``package`` may
    also be one of ``IMPL_TOOLS``."""
    total = 0
    files = sorted((ROOT / package).rglob("*.py")) if package in IMPL_TOOLS else sources(package)
    for p in files:
        st = p.stat()
        total += _file_lines(str(p), st.st_mtime_ns, st.st_size)
    return total


def calls(tree: ast.AST) -> Iterable[ast.Call]:
    return (n for n in ast.walk(tree) if isinstance(n, ast.Call))


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


# --- transition APIs --------------------------------------------------------------------------

def public_methods(rel: str, cls: str) -> list[str]:
    for node in parse(rel).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            names = [f.name for f in node.body
                     if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and not f.name.startswith("_")]
            return list(dict.fromkeys(names))     # a property and its setter are one name
    raise LookupError(f"{rel}: no class {cls}")


def reducers(package: str) -> list[str]:
    """Functions that decide a request of any kind: they dispatch through a rules table
    (a subscript of a name ending in ``RULES``)."""
    found = []
    for path in sources(package):
        rel = str(path.relative_to(ROOT))
        for name, fn in functions(parse(rel)):
            if any(isinstance(n, ast.Subscript) and dotted(n.value).upper().endswith("RULES")
                   for n in ast.walk(fn)):
                found.append(f"{rel}:{name}")
    return found


# --- terminal writers -------------------------------------------------------------------------

MODEL_TERMINAL = {"SUCCEEDED", "FAILED", "LOST", "ABANDONED", "SUPERSEDED"}
IMPL_TERMINAL = {"succeeded", "failed", "lost", "abandoned", "superseded"}


ENUM_ALIASES = {"AS", "AttemptState"}


def _terminal_value(v: ast.expr) -> bool:
    """Whether ``attempt_state=v`` can store a terminal state."""
    if isinstance(v, ast.Constant):
        return v.value in IMPL_TERMINAL
    if isinstance(v, ast.Attribute) and dotted(v.value) in ENUM_ALIASES:
        return v.attr in MODEL_TERMINAL
    return True              # a value known only at run time (a migration seed)


def _writes_terminal(fn: ast.FunctionDef) -> bool:
    for call in calls(fn):
        if dotted(call.func) == "close_attempt":
            return True
        if any(kw.arg == "attempt_state" and _terminal_value(kw.value) for kw in call.keywords):
            return True
    return False


def functions(tree: ast.Module) -> Iterable[tuple[str, ast.FunctionDef]]:
    """Module-level functions and class methods (nested functions belong to their parent)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    yield f"{node.name}.{sub.name}", sub


def terminal_writers(package: str) -> list[str]:
    """Functions that can make an attempt terminal: they call ``close_attempt`` or pass
    ``attempt_state=`` a terminal value or a value known only at run time. The helper
    ``close_attempt`` itself only passes its caller's outcome through; persistence
    (``store.save``) and ledger replay write what a decision decided and take no
    ``attempt_state=`` keyword."""
    out = []
    for path in sources(package):
        rel = str(path.relative_to(ROOT))
        out += [f"{rel}:{name}" for name, fn in functions(parse(rel))
                if name != "close_attempt" and _writes_terminal(fn)]
    return sorted(out)


# --- stores -----------------------------------------------------------------------------------

def impl_tables() -> dict[str, list[str]]:
    """table -> columns, by running the implementation's migrations on an empty database."""
    from wgk.impl.store import MIGRATIONS
    conn = sqlite3.connect(":memory:")
    try:
        for version in sorted(MIGRATIONS):
            conn.executescript(MIGRATIONS[version])
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: [r[1] for r in conn.execute(f"PRAGMA table_info({n})")] for n in sorted(names)}
    finally:
        conn.close()


def stores_of_record() -> list[str]:
    """Tables the ledger does not rebuild (``store.PROJECTED_TABLES``), the schema table aside."""
    from wgk.impl.store import PROJECTED_TABLES
    return [t for t in impl_tables() if t not in PROJECTED_TABLES and t != "meta"]


def journals() -> list[str]:
    """Tables that record requests by idempotency key in commit order: a ``key`` and a ``seq``."""
    return [t for t, cols in impl_tables().items() if "key" in cols and "seq" in cols]


def call_sites(package: str, names: set[str]) -> list[str]:
    out = []
    for path in sources(package):
        rel = str(path.relative_to(ROOT))
        for call in calls(parse(rel)):
            if dotted(call.func) in names:
                out.append(f"{rel}:{call.lineno} {dotted(call.func)}")
    return out


HELPER_SPAWNS = {"subprocess.Popen", "os.fork", "os.spawnv", "os.spawnl", "os.posix_spawn",
                 "multiprocessing.Process", "threading.Thread", "Thread", "Process", "Popen"}
CHILD_COMMANDS = {"subprocess.run", "subprocess.check_output", "subprocess.call",
                  "subprocess.check_call"}


# --- the peer's audited baseline --------------------------------------------------------------

_HISTORY = re.compile(r"(?:Historical trace: |; )\d+\. ([^:;]+?): ")
_EVIDENCE = re.compile(r"(?:Source evidence: |; )(\S+[/.]\S+) (.+?) (\d+-\d+(?:,\d+-\d+)*): ")


@dataclass(frozen=True)
class AuditEntry:
    trace: str
    path: str
    symbol: str
    lines: tuple[tuple[int, int], ...]

    @property
    def span(self) -> int:
        return sum(b - a + 1 for a, b in self.lines)


@dataclass(frozen=True)
class Audit:
    """What the deletion audit states, parsed from the translated deletion-map traces."""

    traces: tuple[str, ...]
    authorities: tuple[str, ...]
    evidence: tuple[AuditEntry, ...]
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def source_entries(self) -> list[AuditEntry]:
        unique = {(e.path, e.symbol, e.lines): e for e in self.evidence if e.path.startswith("src/")}
        return list(unique.values())       # an entry cited by two traces counts once

    @property
    def source_files(self) -> list[str]:
        return sorted({e.path for e in self.source_entries})

    @property
    def audited_lines(self) -> int:
        return sum(e.span for e in self.source_entries)


def load_audit(root: Path = ROOT) -> Audit:
    traces, authorities, evidence, descriptions = [], set(), [], {}
    for path in sorted((root / AUDIT_DIR).glob("*.json")):
        text = json.loads(path.read_text())["description"]
        rel = str(path.relative_to(root))
        traces.append(rel)
        descriptions[rel] = text
        history = text.split("Historical trace: ", 1)[1].split(". Contradiction: ", 1)[0]
        authorities.update(a.strip() for a in _HISTORY.findall("Historical trace: " + history))
        cited = text.split("Source evidence: ", 1)[1].rsplit(". Invariants: ", 1)[0]
        for p, sym, ranges in _EVIDENCE.findall("Source evidence: " + cited):
            spans = tuple(tuple(int(x) for x in r.split("-")) for r in ranges.split(","))
            evidence.append(AuditEntry(rel, p, sym, spans))
    return Audit(tuple(traces), tuple(sorted(authorities)), tuple(evidence), descriptions)


#: Audit facts that are classifications of cited entries, each with the exact
#: symbol the audit names; a test checks every one appears in its trace.
AUDIT_TERMINAL_PATHS: tuple[tuple[str, str, str], ...] = (
    ("08-completion-response-replay.json", "run/commit_done", "Done written directly to graph.jsonl"),
    ("08-completion-response-replay.json", "replay_pending_completion", "re-runs completion_done to rebuild a lost Done response"),
    ("07-assignment-plumbing-completion.json", "build_auto_assign_tasks", "marks the synthetic assignment task Done"),
    ("07-assignment-plumbing-completion.json", "committed spawn audit", "creates an already-Done assignment receipt"),
    ("02-live-pid-missing-heartbeat.json", "cleanup_dead_agents", "HeartbeatTimeout marks Dead and requests AttemptLost"),
    ("05-child-exit-observer-eof.json", "wrapper fallback", "a still-in-progress check may call wg fail"),
)
AUDIT_STORES: tuple[tuple[str, str], ...] = (
    ("01-lost-ipc-response-after-durable-mutation.json", "worker-capabilities.json"),
    ("02-live-pid-missing-heartbeat.json", "registry.json"),
    ("03-duplicate-provider-event.json", "provider_health.json"),
    ("03-duplicate-provider-event.json", "provider-telemetry.jsonl"),
    ("08-completion-response-replay.json", "graph.jsonl"),
)
AUDIT_REDUCERS = ("06-stale-capability.json", "three reducers")


def audit_file(audit: Audit, name: str) -> str:
    return f"{AUDIT_DIR}/{name}"


def baselines(audit: Audit) -> dict[str, Baseline]:
    none = lambda what: Baseline(None, f"not stated ({what})")
    return {
        "actors": Baseline(len(audit.authorities),
                           "distinct authorities named in the audit's historical traces"),
        "authority-pairs": none("the audit names authorities, not their grants"),
        "request-kinds": none("the audit does not enumerate the peer's requests"),
        "env-step-kinds": none("no environment model in the audit"),
        "rule-functions": Baseline(len({(e.path, e.symbol) for e in audit.source_entries}),
                                   "distinct source symbols (files x symbols) the audit cites"),
        "reducers": Baseline(3, "'implemented in three reducers' (deletion-map 06)"),
        "model-reducers": none("the peer's formal model is outside the audit"),
        "kernel-public-methods": none("the peer's API surface is not counted"),
        "terminal-writers-model": Baseline(len(AUDIT_TERMINAL_PATHS),
                                           "cited paths that write a terminal state (listed in the document)"),
        "terminal-writers-impl": Baseline(len(AUDIT_TERMINAL_PATHS), "as above"),
        "stores-of-record": Baseline(len(AUDIT_STORES), "separately persisted files the audit names"),
        "journals": Baseline(len(AUDIT_STORES), "as above: each is written on its own"),
        "databases": none("file stores, see stores-of-record"),
        "helper-processes": none("the audit names a wrapper, an observer, a watchdog and a "
                                 "stream bridge, not which run as their own process"),
        "child-commands": none("not counted by the audit"),
        "loc-model": none("no model in the audited baseline"),
        "loc-impl": Baseline(audit.audited_lines,
                             "lines spanned by the cited source symbols (a lower bound; total not stated)"),
        "loc-conformance": none("no conformance suite in the audited baseline"),
        "loc-total": none("the peer's production LOC is not stated"),
    }


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
        f("kernel-public-methods", "transition APIs", public_methods("impl/kernel.py", "Kernel")),
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
