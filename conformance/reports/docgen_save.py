"""Generated parts of docs/design-atomic-graph-work-save.md, and the checks that keep it true.

Tables that restate code are generated from the code and live between the
marker lines ``<!-- generated:NAME:begin -->`` and ``<!-- generated:NAME:end -->``:

- ``edges``: the SaveTransaction's legal main-line edges (``model.vocab.EDGES``);
- ``phases``: the main-line phases in order (``model.vocab.Phase``, ``PRE_EFFECT_PHASES``);
- ``authority`` and ``actors``: which actor may send which request kind
  (``model.vocab.AUTHORITY``, ``NEEDS_CAPABILITY``, ``TRANSACTION_KINDS``);
- ``dag``: the implementation plan's tasks (docs/plans/atomic-graph-work-save-dag.json).

The mutation/read inventory is written by hand (it explains what each function
does) and checked against the repository-wide searches the document lists:
``inventory_from_searches`` re-runs them and maps every hit to its enclosing
function with ``ast``.

Refresh the generated blocks: ``python -m wgk.conformance.reports.docgen_save --write``;
``--check`` exits 1 and prints a diff when the document is out of date.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

if TYPE_CHECKING:
    import networkx as nx

from wgk.model.vocab import (
    AUTHORITY, EDGES, NEEDS_CAPABILITY, PRE_EFFECT_PHASES, TRANSACTION_KINDS, Actor, Kind, Phase,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "design-atomic-graph-work-save.md"

# --- generated tables -----------------------------------------------------------------------


def edges_table() -> str:
    """The legal main-line edges, one row per request kind, in phase order."""
    rows = ["| request kind | from phase(s) | to phase |", "| --- | --- | --- |"]
    for kind, (sources, target) in EDGES.items():
        froms = " \\| ".join(f"`{p.label}`" for p in sources)
        rows.append(f"| `{kind.label}` | {froms} | `{target.label}` |")
    return "\n".join(rows)


def authority_table() -> str:
    """Actor authority per request kind, with the K and CAS columns."""
    rows = ["| request kind | actors | K | CAS |", "| --- | --- | --- | --- |"]
    for kind in Kind:
        actors = AUTHORITY[kind]
        who = "any" if actors == frozenset(Actor) else ", ".join(
            a.label for a in sorted(actors, key=lambda a: a.label))
        rows.append(f"| `{kind.label}` | {who} | {'yes' if kind in NEEDS_CAPABILITY else '-'} "
                    f"| {'yes' if kind in TRANSACTION_KINDS else '-'} |")
    return "\n".join(rows)


def actor_table() -> str:
    """Per actor, the request kinds it may send (the authority table read the other way).

    ``message`` and ``ownership-contention`` (any actor) are left out of every row."""
    rows = ["| actor | may send |", "| --- | --- |"]
    for actor in Actor:
        kinds = [k.label for k in Kind if actor in AUTHORITY[k] and AUTHORITY[k] != frozenset(Actor)]
        rows.append(f"| `{actor.label}` | {', '.join(f'`{k}`' for k in kinds) or '-'} |")
    return "\n".join(rows)


def phases_table() -> str:
    """The main-line phases in order, the kind that enters each, and whether an operator
    may still abandon the transaction there with its work preserved."""
    entered = {target: kind for kind, (_, target) in EDGES.items()}
    rows = ["| # | phase | entered by | abandon keeps work (pre-effect) |", "| --- | --- | --- | --- |"]
    for phase in Phase:
        kind = entered.get(phase)
        rows.append(f"| {int(phase)} | `{phase.label}` | {f'`{kind.label}`' if kind else '-'} "
                    f"| {'yes' if phase in PRE_EFFECT_PHASES else '-'} |")
    return "\n".join(rows)


PLAN = ROOT / "docs" / "plans" / "atomic-graph-work-save-dag.json"


def load_plan(path: Path = PLAN) -> dict:
    """The machine-readable implementation plan (``wgk-plan/1``)."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DocError(f"{path}:{e.lineno}: {e.msg}") from None


def dag_table() -> str:
    """The plan's tasks: id, phase, dependencies and owned files (the same rows as the JSON)."""
    rows = ["| id | phase | depends on | owned files |", "| --- | --- | --- | --- |"]
    for t in load_plan()["tasks"]:
        deps = ", ".join(f"`{d}`" for d in t["depends_on"]) or "-"
        files = ", ".join(f"`{f}`" for f in t["owned_files"])
        rows.append(f"| `{t['id']}` | {t['phase']} | {deps} | {files} |")
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "edges": edges_table,
    "authority": authority_table,
    "actors": actor_table,
    "phases": phases_table,
    "dag": dag_table,
}


def _block_pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- generated:{re.escape(name)}:begin -->\n)(.*?)(<!-- generated:{re.escape(name)}:end -->)",
                      re.S)


class DocError(ValueError):
    """The document lacks a marker pair or a block it must have."""


def refreshed(text: str, generators: dict[str, Callable[[], str]] = GENERATORS) -> str:
    """The document with every generated block replaced by its generator's output."""
    for name, gen in generators.items():
        pattern = _block_pattern(name)
        if not pattern.search(text):
            raise DocError(f"{DOC.name}: no marker pair for generated block {name!r}")
        text = pattern.sub(lambda m: m.group(1) + gen() + "\n" + m.group(3), text, count=1)
    return text


def doc_diff(path: Path = DOC) -> str:
    """A unified diff from the document to its refreshed form ('' when up to date)."""
    text = path.read_text()
    new = refreshed(text)
    return "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                        str(path), f"{path} (generated)"))


# --- the mutation/read inventory ---------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Entry:
    """One inventory row: a search category, a file and the function a hit lies in."""

    category: str
    file: str
    function: str

    def describe(self) -> str:
        return f"{self.category}: {self.file} {self.function}"


@lru_cache(maxsize=None)
def _definitions(path: str) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, qualified name) of every def and every assignment outside a
    def; classes are kept, nested defs fold into the outermost one (``Kernel.handle``)."""
    tree = ast.parse((ROOT / path).read_text(), filename=path)
    out: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((first, child.end_lineno or child.lineno, prefix + child.name))
            elif isinstance(child, (ast.Assign, ast.AnnAssign)) and _assigned_name(child):
                # a table of lambdas at module or class level is named by the table
                out.append((child.lineno, child.end_lineno or child.lineno,
                            prefix + _assigned_name(child)))
            else:
                visit(child, prefix)

    visit(tree, "")
    return tuple(out)


def _assigned_name(node: ast.Assign | ast.AnnAssign) -> str | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None


def enclosing_function(path: str, line: int) -> str:
    """The function (``Class.method``) or module-level table (``WAY_CONDITIONS``) whose
    definition contains ``line``; ``(module)`` for any other module-level line."""
    for first, last, name in _definitions(path):
        if first <= line <= last:
            return name
    return "(module)"


def parse_searches(text: str) -> list[tuple[str, str]]:
    """(category, command) from the document's ``inventory-searches`` fenced block."""
    m = re.search(r"```inventory-searches\n(.*?)```", text, re.S)
    if not m:
        raise DocError(f"{DOC.name}: no ```inventory-searches block")
    out = []
    for n, line in enumerate(m.group(1).splitlines(), 1):
        if not line.strip():
            continue
        category, sep, command = line.partition(": ")
        if not sep or not command.startswith("git grep "):
            raise DocError(f"{DOC.name}: inventory search line {n}: expected 'category: git grep ...'")
        out.append((category.strip(), command.strip()))
    return out


def run_search(command: str) -> list[tuple[str, int]]:
    """(file, line) of every hit of one ``git grep -n`` command, run in the repository."""
    argv = shlex.split(command)
    if argv[:2] != ["git", "grep"] or "-n" not in argv:
        raise DocError(f"not a 'git grep -n' command: {command}")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise DocError(f"{command}: {done.stderr.strip()}")
    hits = []
    for row in done.stdout.splitlines():
        file, line, _ = row.split(":", 2)
        hits.append((file, int(line)))
    return hits


def inventory_from_searches(searches: Iterable[tuple[str, str]]) -> set[Entry]:
    return {Entry(category, file, enclosing_function(file, line))
            for category, command in searches for file, line in run_search(command)}


def parse_inventory(text: str) -> set[Entry]:
    """The rows of the document's inventory table (category, file, function, ...)."""
    m = re.search(r"<!-- inventory:begin -->\n(.*?)<!-- inventory:end -->", text, re.S)
    if not m:
        raise DocError(f"{DOC.name}: no inventory marker pair")
    entries = set()
    for row in m.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("category", "") or set(cells[0]) <= {"-", " "}:
            continue
        entries.add(Entry(*(c.strip("`") for c in cells[:3])))
    return entries


def inventory_differences(documented: set[Entry], found: set[Entry]) -> list[str]:
    """``missing`` (found by a search, not in the table) and ``extra`` (in the table, not found)."""
    return ([f"missing from the inventory: {e.describe()}" for e in sorted(found - documented)]
            + [f"in the inventory but not found: {e.describe()}" for e in sorted(documented - found)])


# --- the implementation plan ---------------------------------------------------------------------

KERNEL_GATE, ADAPTER, FOUNDATION, SYNTHESIS = "kernel-gate", "adapter", "foundation", "synthesis"


def plan_graph(plan: dict) -> "nx.DiGraph":
    """Edges dependency -> dependent (unknown dependencies become nodes of their own)."""
    import networkx as nx
    g = nx.DiGraph()
    for t in plan["tasks"]:
        g.add_node(t["id"])
        for d in t["depends_on"]:
            g.add_edge(d, t["id"])
    return g


def _one(plan: dict, phase: str) -> tuple[str | None, list[str]]:
    ids = [t["id"] for t in plan["tasks"] if t["phase"] == phase]
    if len(ids) != 1:
        return None, [f"expected exactly one {phase} task, found {len(ids)}: {', '.join(ids) or 'none'}"]
    return ids[0], []


def structure_problems(plan: dict) -> list[str]:
    """Shape: a DAG; foundations, then one kernel gate before every adapter, then one
    synthesis gate after everything; known phases and dependencies, unique ids."""
    import networkx as nx
    fields = ("id", "title", "phase", "depends_on", "owned_files", "non_goals", "validation")
    problems = [f"task {n}: no field {f!r}" for n, t in enumerate(plan.get("tasks", []), 1)
                for f in fields if f not in t]
    if problems or not plan.get("tasks"):
        return problems or ["the plan has no tasks"]
    ids = [t["id"] for t in plan["tasks"]]
    problems += [f"duplicate task id {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for t in plan["tasks"]:
        if t["phase"] not in (FOUNDATION, KERNEL_GATE, ADAPTER, SYNTHESIS):
            problems.append(f"{t['id']}: unknown phase {t['phase']!r}")
        problems += [f"{t['id']}: depends on unknown task {d}" for d in t["depends_on"] if d not in ids]
        for key in ("title", "owned_files", "non_goals", "validation"):
            if not t.get(key):
                problems.append(f"{t['id']}: no {key}")
    g = plan_graph(plan)
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        return problems + ["not a DAG: " + " -> ".join([a for a, _ in cycle] + [cycle[0][0]])]
    gate, p1 = _one(plan, KERNEL_GATE)
    final, p2 = _one(plan, SYNTHESIS)
    problems += p1 + p2
    for t in plan["tasks"]:
        tid, phase = t["id"], t["phase"]
        if gate and phase == FOUNDATION and tid not in nx.ancestors(g, gate):
            problems.append(f"{tid}: a foundation that the kernel gate does not depend on")
        if gate and phase in (ADAPTER, SYNTHESIS) and gate not in nx.ancestors(g, tid):
            problems.append(f"{tid}: does not follow the kernel gate {gate}")
        if final and tid != final and tid not in nx.ancestors(g, final):
            problems.append(f"{tid}: the synthesis gate {final} does not follow it")
    return problems


def parallel_pairs(plan: dict) -> list[tuple[str, str]]:
    """Pairs of tasks neither of which reaches the other (they may run at the same time)."""
    import networkx as nx
    g = plan_graph(plan)
    reach = {n: nx.descendants(g, n) for n in g}
    ids = [t["id"] for t in plan["tasks"]]
    return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]
            if b not in reach[a] and a not in reach[b]]


def ownership_problems(plan: dict, root: Path = ROOT) -> list[str]:
    """Every owned file exists; no two tasks that may run in parallel own the same file."""
    owned = {t["id"]: set(t["owned_files"]) for t in plan["tasks"]}
    problems = [f"{tid}: owned file {f} does not exist"
                for tid, files in owned.items() for f in sorted(files) if not (root / f).is_file()]
    for a, b in parallel_pairs(plan):
        for f in sorted(owned[a] & owned[b]):
            problems.append(f"{a} and {b} may run in parallel and both own {f}")
    return problems


def command_problem(command: str, root: Path = ROOT) -> str | None:
    """Why a validation command does not run here (None when it names an existing test file,
    a real ``wgk`` subcommand or an importable module)."""
    import importlib.util
    from wgk.conformance.cli import main as cli
    argv = shlex.split(command)
    if argv[:3] == ["python", "-m", "pytest"]:
        tests = [a for a in argv[3:] if a.endswith(".py")]
        if not tests:
            return f"{command}: names no test file"
        gone = [a for a in tests if not (root / a).is_file()]
        return f"{command}: no test file {', '.join(gone)}" if gone else None
    if argv[:1] == ["wgk"]:
        sub = argv[1] if len(argv) > 1 else ""
        if sub not in cli.COMMANDS or cli._load(sub) is None:
            return f"{command}: {sub!r} is not a wgk subcommand"
        return None
    if argv[:2] == ["python", "-m"] and len(argv) > 2:
        return None if importlib.util.find_spec(argv[2]) else f"{command}: no module {argv[2]}"
    return f"{command}: neither pytest on a test file, a wgk subcommand nor python -m MODULE"


def validation_problems(plan: dict, root: Path = ROOT) -> list[str]:
    return [f"{t['id']}: {p}" for t in plan["tasks"] for c in t["validation"]
            if (p := command_problem(c, root))]


def plan_problems(plan: dict, root: Path = ROOT) -> list[str]:
    """Every reason the plan is not acceptable ([] when it is)."""
    problems = structure_problems(plan)
    if any(p.startswith("not a DAG") for p in problems):
        return problems
    return problems + ownership_problems(plan, root) + validation_problems(plan, root)


def parse_dag_table(text: str) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """id -> (phase, depends on, owned files) from the document's ``dag`` block."""
    m = _block_pattern("dag").search(text)
    if not m:
        raise DocError(f"{DOC.name}: no marker pair for generated block 'dag'")
    rows = {}
    for row in m.group(2).splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        names = lambda cell: tuple(x.strip().strip("`") for x in cell.split(",") if x.strip() not in ("", "-"))
        rows[cells[0].strip("`")] = (cells[1], names(cells[2]), names(cells[3]))
    return rows


# --- the command line ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wgk.conformance.reports.docgen_save",
                                description="Refresh or check the generated blocks of " + DOC.name)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when out of date")
    mode.add_argument("--inventory", action="store_true",
                      help="print the inventory rows the searches find (category | file | function)")
    args = p.parse_args(argv)
    try:
        text = DOC.read_text()
        if args.inventory:
            for e in sorted(inventory_from_searches(parse_searches(text))):
                print(f"| {e.category} | `{e.file}` | `{e.function}` |  |")
            return 0
        if args.write:
            new = refreshed(text)
            if new != text:
                DOC.write_text(new)
                print(f"{DOC.relative_to(ROOT)}: generated blocks refreshed")
            return 0
        diff = doc_diff()
    except (OSError, DocError) as e:
        print(f"docgen_save: {e}", file=sys.stderr)
        return 2
    if diff:
        sys.stdout.write(diff)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
