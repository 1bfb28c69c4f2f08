"""The traceability matrix, generated from the code.

For every ``always`` invariant of the registry (``wgk.model.invariants``) one
row with a column per kind of evidence:

- **model rule**: the predicate in ``model/`` that states it, and the
  transitions of the model that can affect it (those with a frame the solver
  has to decide: a transition that changes nothing the invariant reads
  preserves it by construction);
- **z3 proof**: the inductive proof of every (transition x invariant) frame,
  run now (``wgk.conformance.z3.prove``);
- **traces**: the traces that exercise the invariant: replayed through the
  model, one of their states (a step, for a step property) satisfies the
  invariant's antecedent (``trace_support``), whatever incident they are tagged
  with; every replay checks every invariant after every step. Up to
  ``LISTED`` of them are listed (those tagged with one of its incidents first);
- **crash test**: the crash cuts of the listed traces that passed (each a case
  of ``wgk replay --crash-cuts``, in-process): run here, or taken from the
  gate's crash-cuts section when the gate builds the matrix;
- **runtime guard**: the code in ``impl/`` that enforces it, marked by a
  comment ``# guards: <id>[, <id> ...]`` directly above the statement.

Environment assumptions (kind ``assume``) have a row too, marked as such: the
environment provides them, not the kernel, so no runtime guard is asked of
them; their proof column is the check that the model's own steps keep them.

WG's ten retained obligations (its recovery baseline, ``OBLIGATIONS``) each name the
invariants that state them; an obligation naming an unknown invariant, or one whose row
lacks a column, is a finding too.

The killing mutants of the catalogue are shown too. A row with an empty
column, a proof that is not complete, or a guard marker that names no known
invariant or sits on no statement is a finding; ``wgk trace-matrix --check``
fails on any finding.
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from wgk.model.invariants import Property, always, assumptions

ROOT = Path(__file__).resolve().parents[2]
GUARD = re.compile(r"^\s*#\s*guards:\s*(.*?)\s*$")
BEGIN, END = "<!-- trace-matrix:begin -->", "<!-- trace-matrix:end -->"
DOCUMENT = ROOT / "docs" / "design-atomic-graph-work-save.md"
COLUMNS = ("model rule", "z3 proof", "traces", "crash test", "runtime guard")

#: WG's recovery baseline (../shared/fixtures/wg/docs/control-plane-recovery-equivalence-
#: baseline-2026-08-07.md, "Retained semantic obligations"): the ten obligations any rewrite
#: must keep, each with the invariants that state it here. An obligation is traced when
#: every invariant it names has a row with every column (``Obligation.missing``).
OBLIGATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1, "exact attempt/fence checking", ("attempt-fencing", "receipts-fenced")),
    (2, "identical idempotency key plus digest returns the original response",
     ("idempotent-replay",)),
    (3, "conflicting reuse is rejected", ("idempotency-conflict-holds",)),
    (4, "first terminal intent wins", ("first-terminal-wins",)),
    (5, "success requires an exact immutable completion/publication receipt",
     ("done-iff-graphsave", "promotion-needs-review-of-exact-candidate")),
    (6, "observations cannot infer success or terminalize directly",
     ("evidence-cannot-terminalize-live-owner", "legacy-never-satisfies")),
    (7, "exact exit without terminal intent issues one stable reconciliation effect",
     ("no-dead-owner-in-progress-without-action", "exactly-one-way-forward")),
    (8, "terminal attempts never reopen without an explicit next-attempt request",
     ("terminal-never-resurrects",)),
    (9, "review and publication remain bound to one immutable manifest",
     ("promotion-needs-review-of-exact-candidate", "candidate-built-on-attempt-base",
      "review-publication-bound-to-exact-reviews", "review-changed-manifest-invalidates")),
    (10, "graph, registry, telemetry, and TUI are rebuildable projections",
     ("done-iff-graphsave", "ready-iff-dispatch-admitted")),
)


@dataclass(frozen=True)
class Guard:
    """One ``# guards:`` marker: where it is and what it guards."""

    path: str                  # relative to the repository root
    line: int                  # the line of the guarded statement
    function: str              # the enclosing def (Class.method), a module-level name, or "<module>"
    ids: tuple[str, ...]

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "function": self.function}


@dataclass
class Row:
    invariant: str
    scope: str
    doc: str
    incidents: tuple[int, ...]
    predicate: str                              # module.function
    predicate_at: str                           # path:line
    transitions: list[str] = field(default_factory=list)
    frames: int = 0
    proved: int = 0
    proof_failures: list[str] = field(default_factory=list)
    proof_kind: str = ""                        # "for every graph (cutoff theorem)" | "bounded ..."
    traces: list[str] = field(default_factory=list)       # the listed supporting traces
    supporting: int = 0                                    # how many traces support it
    crash_cuts: int = 0                                    # passed cuts of the listed traces
    guards: list[Guard] = field(default_factory=list)
    mutants: list[str] = field(default_factory=list)
    kind: str = "always"                        # "always" | "assume"

    def missing(self) -> list[str]:
        """The columns this row lacks."""
        out = []
        if not self.predicate_at.startswith("model/"):
            out.append("model rule")
        if not self.frames or self.proof_failures or self.proved != self.frames:
            out.append("z3 proof")
        if not self.traces:
            out.append("traces")
        if not self.crash_cuts:
            out.append("crash test")
        if not self.guards and self.kind != "assume":
            out.append("runtime guard")
        return out

    def to_json(self) -> dict:
        return {
            "invariant": self.invariant, "kind": self.kind, "scope": self.scope, "doc": self.doc,
            "incidents": list(self.incidents),
            "model_rule": {"predicate": self.predicate, "at": self.predicate_at,
                           "transitions": self.transitions},
            "z3_proof": {"frames": self.frames, "proved": self.proved,
                         "failures": self.proof_failures, "kind": self.proof_kind,
                         "command": f"wgk prove --invariant {self.invariant}"},
            "traces": self.traces, "supporting_traces": self.supporting,
            "crash_test": {"passed_cuts": self.crash_cuts,
                           "command": "wgk replay TRACE --system both --crash-cuts"},
            "runtime_guard": [g.to_json() for g in self.guards],
            "mutants": self.mutants,
            "missing": self.missing(),
        }


@dataclass
class Obligation:
    """One retained obligation of WG's recovery baseline and the rows of its invariants."""

    number: int
    text: str
    invariants: tuple[str, ...]
    rows: list[Row] = field(default_factory=list)

    def missing(self) -> list[str]:
        """What keeps the obligation from being traced: an invariant it names that has no
        row, or a column one of its rows lacks."""
        if not self.invariants:
            return ["no invariant"]
        known = {r.invariant: r for r in self.rows}
        out = [f"{i}: no such invariant" for i in self.invariants if i not in known]
        out += [f"{r.invariant}: no {c}" for r in self.rows for c in r.missing()]
        return out

    def to_json(self) -> dict:
        return {"obligation": self.number, "text": self.text,
                "invariants": list(self.invariants),
                "traces": sorted({t for r in self.rows for t in r.traces}),
                "crash_cuts": sum(r.crash_cuts for r in self.rows),
                "runtime_guard": sorted({g.path for r in self.rows for g in r.guards}),
                "missing": self.missing()}


def obligations(rows: dict[str, Row],
                table: Iterable[tuple[int, str, tuple[str, ...]]] = OBLIGATIONS) -> list[Obligation]:
    """The retained obligations, each with the rows of the invariants it names."""
    return [Obligation(n, t, tuple(ids), [rows[i] for i in ids if i in rows])
            for n, t, ids in table]


@dataclass
class Matrix:
    rows: list[Row]
    tasks: int
    findings: list[str]            # problems that are not a missing column (bad markers)
    obligations: list[Obligation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not self.findings and not any(r.missing() for r in self.rows)
                and not any(o.missing() for o in self.obligations))

    def problems(self) -> list[str]:
        out = [f"{r.invariant}: no {c}" for r in self.rows for c in r.missing()]
        out += [f"{r.invariant}: {f}" for r in self.rows for f in r.proof_failures]
        out += [f"obligation {o.number}: {m}" for o in self.obligations for m in o.missing()]
        return out + self.findings

    def to_json(self) -> dict:
        return {"ok": self.ok, "tasks": self.tasks, "columns": list(COLUMNS),
                "rows": [r.to_json() for r in self.rows],
                "obligations": [o.to_json() for o in self.obligations],
                "problems": self.problems()}


# --- the columns ----------------------------------------------------------------


def predicate_of(p: Property) -> tuple[str, str]:
    fn = p.pred
    path = Path(inspect.getsourcefile(fn)).resolve()
    line = inspect.getsourcelines(fn)[1]
    return f"invariants.{fn.__name__}", f"{_rel(path)}:{line}"


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def proof_column(rows: dict[str, Row], tasks: int, progress: Callable[[str], None],
                 frames: list[tuple[str, str, str, bool]] | None = None) -> None:
    """Fill transitions, frames and failures from the inductive proof of every frame: run
    here, or ``frames`` ``(invariant, transition, status, solved)`` proved on the same chain
    by the caller (used only when it covers every row)."""
    if frames is None or not set(rows) <= {f[0] for f in frames}:
        frames = list(_prove_frames(rows, tasks, progress))
    for invariant, transition, status, solved in frames:
        row = rows.get(invariant)
        if row is None:
            continue
        row.frames += 1
        if status == "proved":
            row.proved += 1
        else:
            row.proof_failures.append(f"{status} after {transition}")
        if solved:
            row.transitions.append(transition)


def _prove_frames(rows: dict[str, Row], tasks: int, progress: Callable[[str], None]):
    from wgk.model.actions import Instance
    from wgk.conformance.z3.prove import Prover
    prover = Prover(Instance.proof(tasks=tasks))
    for transition in prover.groups:
        for p in [q for q in prover.properties if q.id in rows]:
            result = prover.check(p, transition)
            yield p.id, transition, result.status, result.solved
        progress(f"  proved frames of {transition}")


#: How many supporting traces a row lists (and whose crash cuts it counts).
LISTED = 3


def trace_column(rows: dict[str, Row], trace_paths: Iterable[Path]) -> dict[str, Path]:
    """Link every trace to the invariants whose antecedent holds in one of its states; each
    row lists up to ``LISTED`` of them (those of its incidents first). Returns the listed
    traces by relative path."""
    from wgk.conformance.reports.trace_support import supported
    from wgk.conformance.traces.format import load_trace
    from wgk.model.invariants import REGISTRY
    props = [REGISTRY[i] for i in rows]
    support: dict[str, list[tuple[bool, str, Path]]] = {i: [] for i in rows}
    for path in trace_paths:
        trace = load_trace(path)
        incident = (trace.source or {}).get("incident")
        for i in supported(trace, props):
            support[i].append((incident not in rows[i].incidents, _rel(path.resolve()), path))
    listed: dict[str, Path] = {}
    for i, row in rows.items():
        chosen = sorted(support[i], key=lambda x: x[:2])
        row.supporting = len(chosen)
        row.traces = [rel for _, rel, _ in chosen[:LISTED]]
        listed.update({rel: path for _, rel, path in chosen[:LISTED]})
    return listed


def crash_column(rows: dict[str, Row], traces: dict[str, Path],
                 progress: Callable[[str], None],
                 passed: dict[str, int] | None = None) -> None:
    """Count the crash cuts that pass (in-process) for every listed trace: ``passed`` maps a
    trace id to its count when the gate's crash-cuts section already ran them."""
    from wgk.conformance.oracle.crashcuts import crash_cuts
    from wgk.conformance.traces.format import load_trace
    cuts = {}
    for rel, path in sorted(traces.items()):
        trace = load_trace(path)
        if passed is not None and trace.id in passed:
            cuts[rel] = passed[trace.id]
        else:
            result = crash_cuts(trace)
            cuts[rel] = sum(c.verdict == "pass" for c in result.cuts)
        progress(f"  {rel}: {cuts[rel]} crash cuts passed")
    for row in rows.values():
        row.crash_cuts = sum(cuts[t] for t in row.traces)


def guards(root: Path = ROOT / "impl") -> tuple[list[Guard], list[str]]:
    """Every ``# guards:`` marker under ``root`` and the problems with them."""
    found, problems = [], []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        marks = [(n, m.group(1)) for n, text in enumerate(lines, 1) if (m := GUARD.match(text))]
        if not marks:
            continue
        tree = ast.parse("\n".join(lines), str(path))
        statements = _statement_lines(tree)
        for n, ids_text in marks:
            where = f"{_rel(path.resolve())}:{n}"
            ids = tuple(x.strip() for x in ids_text.split(",") if x.strip())
            if not ids:
                problems.append(f"{where}: a guard marker names no invariant")
                continue
            if n + 1 not in statements:
                problems.append(f"{where}: a guard marker must sit directly above a statement")
                continue
            found.append(Guard(_rel(path.resolve()), n + 1, _enclosing(tree, n + 1), ids))
    return found, problems


def _statement_lines(tree: ast.AST) -> set[int]:
    return {node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.stmt) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _enclosing(tree: ast.AST, line: int) -> str:
    """The qualified name of the innermost def or class around ``line``."""
    scopes: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if child.lineno <= line <= (child.end_lineno or child.lineno):
                    scopes.append((child.lineno, name))
            visit(child, name)
    visit(tree, "")
    if scopes:
        return max(scopes)[1]
    named = [t.id for n in getattr(tree, "body", []) if isinstance(n, ast.Assign) and n.lineno == line
             for t in n.targets if isinstance(t, ast.Name)]
    return named[0] if named else "<module>"     # a module-level table: its name


def guard_column(rows: dict[str, Row], root: Path = ROOT / "impl") -> list[str]:
    found, problems = guards(root)
    for g in found:
        for id in g.ids:
            if id in rows:
                rows[id].guards.append(g)
            else:
                problems.append(f"{g.path}:{g.line - 1}: a guard marker names {id!r}, "
                                f"which is no invariant of the registry")
    return problems


def mutant_column(rows: dict[str, Row]) -> None:
    from wgk.conformance.z3.mutants import MUTANTS
    for m in MUTANTS.values():
        if m.kills in rows:
            rows[m.kills].mutants.append(m.name)


def proof_kind_column(rows: dict[str, Row], progress: Callable[[str], None],
                      claims: dict[str, dict] | None = None) -> None:
    """Which kind of proof each invariant has: for every graph (the cutoff theorem holds and
    its proof at the cutoff graph is complete), or bounded to the tasks of the chain
    (``claims``: the cutoff theorem's claims as JSON by property, when the caller has them)."""
    if claims is None:
        from wgk.conformance.z3.unbounded import model_report
        rep = model_report(progress=lambda m: progress(f"  {m}"))
        claims = {c.property: c.to_json() for c in rep.claims}
    for r in rows.values():
        c = claims.get(r.invariant)
        if c is not None and c["graphs"] == "every graph":
            r.proof_kind = f"for every graph (cutoff theorem), evidence ids {c['evidence_ids']}"
        else:
            r.proof_kind = "bounded: " + (c["reasons"][0] if c is not None else "not in the report")


# --- the matrix -----------------------------------------------------------------


def default_traces() -> list[Path]:
    from wgk.conformance.traces.format import trace_files
    return trace_files([ROOT / "traces"])


def build(tasks: int = 3, trace_paths: Iterable[Path] | None = None,
          guard_root: Path = ROOT / "impl",
          progress: Callable[[str], None] = lambda _: None,
          passed_cuts: dict[str, int] | None = None,
          frames: list[tuple[str, str, str, bool]] | None = None,
          claims: dict[str, dict] | None = None) -> Matrix:
    """The matrix; ``passed_cuts`` (trace id -> crash cuts passed in-process) spares running
    the cuts of traces the caller has already cut, ``frames`` and ``claims`` the proofs
    the caller has already run (``proof_column``, ``proof_kind_column``)."""
    rows: dict[str, Row] = {}
    for p in always() + assumptions("state"):
        predicate, at = predicate_of(p)
        rows[p.id] = Row(p.id, p.scope, p.doc, p.incidents, predicate, at, kind=p.kind)
    progress("z3 proof of every frame ...")
    proof_column(rows, tasks, progress, frames)
    progress("z3 proof for every graph (cutoff theorem) ...")
    proof_kind_column(rows, progress, claims)
    linked = trace_column(rows, default_traces() if trace_paths is None else trace_paths)
    progress("crash cuts of the linked traces ...")
    crash_column(rows, linked, progress, passed_cuts)
    findings = guard_column(rows, guard_root)
    mutant_column(rows)
    return Matrix(list(rows.values()), tasks, findings, obligations(rows))


# --- rendering ------------------------------------------------------------------


def _short_trace(rel: str) -> str:
    return Path(rel).stem


def markdown(m: Matrix) -> str:
    """The matrix as the markdown table the design document carries."""
    head = ("| invariant | model rule | z3 proof | traces | crash test | runtime guard |\n"
            "| --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for r in m.rows:
        rule = f"`{r.predicate}` ({r.scope}{', environment assumption' if r.kind == 'assume' else ''})"
        proof = (f"{r.proved}/{r.frames} frames proved at {m.tasks} tasks, "
                 f"{len(r.transitions)} by the solver" if r.frames else "none")
        proof += f"; {r.proof_kind}" if r.proof_kind else ""
        traces = "<br>".join(f"`{_short_trace(t)}`" for t in r.traces) or "none"
        if r.supporting > len(r.traces):
            traces += f"<br>({r.supporting} traces in all)"
        crash = f"{r.crash_cuts} cuts passed" if r.crash_cuts else "none"
        places = dict.fromkeys(f"`{Path(g.path).name}` {g.function}" for g in r.guards)
        guard = "<br>".join(places) or ("not asked (assumed)" if r.kind == "assume" else "none")
        lines.append(f"| `{r.invariant}` | {rule} | {proof} | {traces} | {crash} | {guard} |")
    lines += ["", "A frame is (transition x invariant). Frames \"by the solver\" are those a "
              "transition can affect; the others change nothing the invariant reads and are "
              "preserved by construction. A trace is listed when the invariant's antecedent "
              "holds in one of its states (or steps), replayed through the model; crash cuts "
              "are the passed cuts (in-process) of the traces listed; every replay checks "
              "every invariant after every step."]
    if m.obligations:
        lines += ["", "WG's retained obligations (its recovery baseline), each by the invariants "
                  "that state it; their rows above carry its proof, traces, crash cuts and "
                  "runtime guards.", "",
                  "| obligation | invariants | traces | crash test | runtime guard |",
                  "| --- | --- | --- | --- | --- |"]
        for o in m.obligations:
            traces = len({t for r in o.rows for t in r.traces})
            guard = ", ".join(dict.fromkeys(f"`{Path(g.path).name}`" for r in o.rows
                                            for g in r.guards)) or "none"
            lines.append(f"| {o.number}. {o.text} | "
                         + ", ".join(f"`{i}`" for i in o.invariants)
                         + f" | {traces} traces | {sum(r.crash_cuts for r in o.rows)} cuts passed"
                         f" | {guard} |")
    return "\n".join(lines) + "\n"


def text(m: Matrix) -> str:
    """A terse human report: one line per invariant, then the problems."""
    out = []
    for r in m.rows:
        miss = r.missing()
        out.append(f"{'MISSING' if miss else 'ok':7} {r.invariant}: "
                   f"{len(r.transitions)} transitions, {r.proved}/{r.frames} proved, "
                   f"{r.supporting} traces, {r.crash_cuts} crash cuts passed, {len(r.guards)} guards"
                   + (f"  (no {', '.join(miss)})" if miss else ""))
    for o in m.obligations:
        miss = o.missing()
        out.append(f"{'MISSING' if miss else 'ok':7} obligation {o.number} ({o.text}): "
                   + ", ".join(o.invariants)
                   + f"; {len({t for r in o.rows for t in r.traces})} traces, "
                   f"{sum(r.crash_cuts for r in o.rows)} crash cuts passed, "
                   f"{len({g.path for r in o.rows for g in r.guards})} guarded files")
    problems = m.problems()
    out.append(f"{len(m.rows)} invariants, {sum(not r.missing() for r in m.rows)} fully traced"
               + (f"; {len(problems)} problems" if problems else ""))
    out += [f"  {p}" for p in problems]
    return "\n".join(out) + "\n"


def document_block(path: Path = DOCUMENT) -> str | None:
    """The generated block of the design document (between the markers), or None."""
    if not path.exists():
        return None
    body = path.read_text()
    if BEGIN not in body or END not in body:
        return None
    return body.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write_document(m: Matrix, path: Path = DOCUMENT) -> None:
    body = path.read_text()
    if BEGIN not in body or END not in body:
        raise ValueError(f"{_rel(path)}: the markers {BEGIN} and {END} are missing")
    before, rest = body.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    path.write_text(f"{before}{BEGIN}\n{markdown(m)}{END}{after}")


__all__ = ["Guard", "Row", "Matrix", "Obligation", "OBLIGATIONS", "obligations", "build",
           "markdown", "text", "guards", "document_block", "write_document"]
