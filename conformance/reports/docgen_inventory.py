"""The mutation/read inventory of the atomic-save design document: written by hand, checked
against the repository-wide searches the document lists (every hit mapped to its enclosing
function with ``ast``)."""
from __future__ import annotations

import ast
import re
import shlex
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from wgk.conformance.reports.docgen_save_doc import DOC, ROOT, DocError


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
