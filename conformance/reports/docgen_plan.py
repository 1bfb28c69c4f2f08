"""The implementation plan of the atomic save (``docs/plans/atomic-graph-work-save-dag.json``):
its structure, ownership and validation commands, and the table the document shows of it."""
from __future__ import annotations

import ast
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

from wgk.conformance.reports.docgen_save_doc import DOC, ROOT, DocError, block_pattern


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
    argv = shlex.split(command)
    if argv[:3] == ["python", "-m", "pytest"]:
        tests = [a for a in argv[3:] if a.endswith(".py")]
        if not tests:
            return f"{command}: names no test file"
        gone = [a for a in tests if not (root / a).is_file()]
        return f"{command}: no test file {', '.join(gone)}" if gone else None
    if argv[:1] == ["wgk"]:
        sub = argv[1] if len(argv) > 1 else ""
        if sub not in wgk_commands(root):
            return f"{command}: {sub!r} is not a wgk subcommand"
        return None
    if argv[:2] == ["python", "-m"] and len(argv) > 2:
        return None if importlib.util.find_spec(argv[2]) else f"{command}: no module {argv[2]}"
    return f"{command}: neither pytest on a test file, a wgk subcommand nor python -m MODULE"


def wgk_commands(root: Path = ROOT) -> set[str]:
    """The subcommands ``conformance/cli/main.py`` registers whose module file exists, read from
    its source (a report never imports the command line)."""
    tree = ast.parse((root / "conformance" / "cli" / "main.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "COMMANDS":
            table = ast.literal_eval(node.value)
            return {name for name, module in table.items()
                    if (root / Path(*module.split(".")[1:])).with_suffix(".py").is_file()}
    return set()


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
    m = block_pattern("dag").search(text)
    if not m:
        raise DocError(f"{DOC.name}: no marker pair for generated block 'dag'")
    rows = {}
    for row in m.group(2).splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        names = lambda cell: tuple(x.strip().strip("`") for x in cell.split(",") if x.strip() not in ("", "-"))
        rows[cells[0].strip("`")] = (cells[1], names(cells[2]), names(cells[3]))
    return rows
