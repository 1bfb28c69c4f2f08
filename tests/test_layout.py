"""The architecture as a test: which way imports run (docs/architecture.md).

Every import of every module is read with ``ast`` (function-local ones too,
so a cycle cannot hide inside a function body), resolved to the module it
names, and the graph is held to the house rules: no cycle anywhere, the model
imports nothing, the implementation imports neither the model nor the harness,
the wings of ``conformance/`` import one way, no library module imports the
command line or prints.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = {"model": "model", "impl": "impl", "conformance": "conformance"}
DATA = {"traces"}  # data packages (wgk.traces): listed in the distribution, no code

#: The wings of wgk.conformance, lowest first: a wing imports only wings before it.
WINGS = ("traces", "check", "z3", "oracle", "view", "reports", "cli")
#: Entry files allowed directly in conformance/ (everything else lives in a wing).
ENTRY_FILES = {"__init__.py", "__main__.py", "pytest_plugin.py"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "wgk." + ".".join(parts)


def modules() -> dict[str, Path]:
    out = {}
    for top in TOPS:
        for p in sorted((ROOT / top).rglob("*.py")):
            out[module_name(p)] = p
    return out


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The wgk modules ``name`` imports anywhere in its body."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                if node.level > 1:
                    base = base[:-(node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph() -> nx.DiGraph:
    mods = modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        for t in imported(name, path, set(mods)):
            # a package's __init__ importing its own submodules is not a dependency of the wing
            g.add_edge(name, t)
    return g


def cycles(g: nx.DiGraph) -> list[list[str]]:
    """Import cycles, ignoring a package and the modules inside it (``pkg/__init__`` re-exports)."""
    h = nx.DiGraph((u, v) for u, v in g.edges
                   if not (v.startswith(u + ".") or u.startswith(v + ".")))
    return [c for c in nx.simple_cycles(h)]


def wing(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "conformance" and parts[2] in WINGS else None


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph()


def test_the_cycle_detector_sees_a_cycle():
    g = nx.DiGraph([("wgk.impl.a", "wgk.impl.b"), ("wgk.impl.b", "wgk.impl.a"),
                    ("wgk.impl", "wgk.impl.a")])
    assert cycles(g) and all(set(c) == {"wgk.impl.a", "wgk.impl.b"} for c in cycles(g))


def test_no_import_cycle_anywhere(graph):
    assert cycles(graph) == []


def test_the_model_imports_neither_the_implementation_nor_the_harness(graph):
    bad = [(u, v) for u, v in graph.edges if u.startswith("wgk.model") and not v.startswith("wgk.model")]
    assert bad == []


def test_the_model_does_no_io():
    io = {"sqlite3", "subprocess", "socket", "shutil", "tempfile", "os", "pathlib", "z3"}
    bad = []
    for p in sorted((ROOT / "model").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            bad += [f"{p.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in io]
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("open", "print"):
                bad.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.func.id}()")
    assert bad == []


def test_the_model_holds_no_checker():
    names = {p.stem for p in (ROOT / "model").rglob("*.py")}
    assert not names & {"explore", "simulate", "interning", "driver", "bmc", "prove", "fuzz"}


def test_the_implementation_imports_neither_the_model_nor_the_harness(graph):
    bad = [(u, v) for u, v in graph.edges if u.startswith("wgk.impl") and not v.startswith("wgk.impl")]
    assert bad == []


def test_conformance_holds_only_wings_and_entry_files():
    top = ROOT / "conformance"
    files = {p.name for p in top.iterdir() if p.is_file() and p.suffix == ".py"}
    dirs = {p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert files <= ENTRY_FILES, files - ENTRY_FILES
    assert dirs <= set(WINGS), dirs - set(WINGS)


def test_wings_import_one_way(graph):
    bad = []
    for u, v in graph.edges:
        wu, wv = wing(u), wing(v)
        if wu and wv and WINGS.index(wv) > WINGS.index(wu):
            bad.append(f"{u} -> {v}")
    assert bad == []


def test_no_library_module_imports_the_command_line(graph):
    bad = [f"{u} -> {v}" for u, v in graph.edges
           if v.startswith("wgk.conformance.cli") and not u.startswith("wgk.conformance.cli")
           and u not in ("wgk.conformance.__main__",)]
    assert bad == []


def test_library_modules_do_not_print():
    """Only the command-line modules print; everything else returns data."""
    edges = [ROOT / "conformance" / "cli", ROOT / "conformance" / "__main__.py"]
    cli_like = [p for p in (ROOT / "impl").rglob("*.py") if {"cli", "demo"} & set(p.parts)]
    allowed = {p for e in edges for p in ([e] if e.is_file() else e.rglob("*.py"))} | set(cli_like)
    bad = []
    for top in ("model", "impl", "conformance"):
        for p in sorted((ROOT / top).rglob("*.py")):
            if p in allowed or "__main__" in p.name:
                continue
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert bad == []


def test_every_package_is_in_the_distribution():
    """A package missing from pyproject's list would vanish from a (non-editable) install."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {module_name(p) for top in (*TOPS, *DATA) for p in (ROOT / top).rglob("__init__.py")}
    assert found - listed == set()

