"""The implementation's layout: an acyclic import graph, nothing from the model or the
harness, and imports at module level except the declared lazy ones.

The walk reads every module under impl/ with ``ast`` (nothing is imported), resolves
relative imports to module names (``from . import audit`` is the module
``wgk.impl.front.audit``), and looks for a cycle among the modules of ``wgk.impl``. The
implicit import of a parent package is not an edge (every submodule would otherwise
close a cycle with its package's ``__init__``). An import inside a function (a lazy one:
what a start of the kernel does not need is imported where it is first used) is an edge
like any other, so the cycle, the rooms and the independence hold for it too; each one is
declared in ``LAZY`` with its reason, and one not declared (or declared and gone) fails.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

IMPL = Path(__file__).resolve().parent.parent / "impl"
PACKAGE = "wgk.impl"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ``root`` (packages by __init__)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _top_level(body: list[ast.stmt]):
    """Import statements at module level (also inside a module-level if/try, never in a def)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try)):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *[h.body for h in getattr(node, "handlers", [])]):
                yield from _top_level(block)


def _in_functions(tree: ast.Module):
    """The import statements inside function and class bodies."""
    return {n for scope in ast.walk(tree)
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for n in ast.walk(scope) if isinstance(n, (ast.Import, ast.ImportFrom))}


def _statements(tree: ast.Module, where: str):
    if where == "top":
        return list(_top_level(tree.body))
    if where == "nested":
        return list(_in_functions(tree))
    return [*_top_level(tree.body), *_in_functions(tree)]


def imported(name: str, path: Path, modules: set[str], where: str = "all") -> set[str]:
    """The modules the module ``name`` (file ``path``) imports (``where``: ``top`` at module
    level, ``nested`` inside functions and classes, ``all`` both)."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in _statements(ast.parse(path.read_text(), str(path)), where):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
            continue
        if node.module == "__future__":
            continue
        base = here
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
        for a in node.names:
            sub = f"{target}.{a.name}"
            out.add(sub if sub in modules else target)
    return out


def import_graph(root: Path, package: str, where: str = "all") -> dict[str, set[str]]:
    """Module -> every module it imports (inside the package or not; ``where``: see
    ``imported``; by default the lazy imports inside functions too)."""
    files = module_names(root, package)
    return {name: imported(name, path, set(files), where) for name, path in files.items()}


def lazy_edges(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules it imports inside functions (its lazy imports)."""
    return {m: e for m, e in import_graph(root, package, "nested").items() if e}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle ``a -> b -> ... -> a`` among the graph's own nodes, or None."""
    state: dict[str, int] = {}
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root] & graph.keys()))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt] & graph.keys())))
    return None


def nested_imports(root: Path) -> list[str]:
    """``file:line`` of every import inside a function or class body."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for scope in ast.walk(tree):
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out += [f"{path.relative_to(root)}:{n.lineno}" for n in ast.walk(scope)
                        if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(out))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(IMPL, PACKAGE)


def test_the_walk_sees_the_package_and_its_edges(graph):
    assert {"wgk.impl", "wgk.impl.front.kernel", "wgk.impl.storage.apply", "wgk.impl.contract.errors", "wgk.impl.front.audit",
            "wgk.impl.cli.kernel", "wgk.impl.demo.story"} <= set(graph)
    assert "wgk.impl.storage.apply" in graph["wgk.impl.front.audit"]
    assert {"wgk.impl.front.audit", "wgk.impl.front.converge", "wgk.impl.front.legacy"} <= graph["wgk.impl.front.kernel"]
    assert "wgk.impl.front.kernel" in graph["wgk.impl.cli.kernel_open"]      # from ..kernel import
    assert "wgk.impl.demo.world" in graph["wgk.impl.demo.story"]       # from .world import
    assert sum(len(v & graph.keys()) for v in graph.values()) > 60


def test_the_import_graph_of_impl_is_acyclic(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


#: The imports made inside a function, and why: each is what a start of the served kernel
#: (``python -m wgk.impl.serve``, twice per crash cut over the protocol) does not need.
LAZY = {
    "wgk.impl.front.kernel": {
        "wgk.impl.front.audit",             # rebuild and audit only, not the request path
        "wgk.impl.front.legacy",            # a legacy import only
    },
    "wgk.impl.storage.backends": {"wgk.impl.storage.pg"},       # a DSN opened (psycopg with it)
    "wgk.impl.storage.store": {"tempfile"},                     # a large database's rebuild
    "wgk.impl.protocol.serve": {
        "wgk.impl.storage.pg",              # served with --postgres only
        "wgk.impl.world.named_git",         # the real world only (git, /proc, subprocess)
    },
}


def test_every_import_is_at_module_level_or_a_declared_lazy_one():
    assert lazy_edges(IMPL, PACKAGE) == LAZY


def test_a_lazy_import_is_an_edge_of_the_graph(graph):
    for module, lazy in LAZY.items():
        assert lazy <= graph[module]


def test_nothing_imports_the_model_or_the_harness(graph):
    bad = {m: sorted(i for i in imports if i.split(".")[:2] in (["wgk", "model"],
                                                              ["wgk", "conformance"]))
           for m, imports in graph.items()}
    assert {m: i for m, i in bad.items() if i} == {}


#: The rooms of impl/ (docs/architecture.md, "The rooms of the implementation"), lowest first:
#: a module imports its own room and the rooms before it, never one after it.
ROOMS = ("contract", "world", "storage", "decisions", "front")
#: The rooms on top: each imports any room of ``ROOMS``, and only the top rooms listed here.
TOP = {"protocol": set(), "demo": set(), "cli": {"demo"}}
#: The package's own modules outside every room: its front door and the ``-m`` path's shim.
DOORS = {"wgk.impl", "wgk.impl.serve"}


def room_of(module: str) -> str | None:
    """``wgk.impl.<room>.<module>`` -> the room (None: not in a room)."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[2] in (*ROOMS, *TOP) else None


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Every import between rooms that runs against their order, and every module of the
    package that is in no room and is not one of its doors."""
    out = []
    for src, imports in sorted(graph.items()):
        rs = room_of(src)
        if rs is None:
            if src not in DOORS:
                out.append(f"{src}: in no room")
            continue
        for dst in sorted(i for i in imports if i.startswith(PACKAGE + ".") or i == PACKAGE):
            rd = room_of(dst)
            if rd == rs:
                continue
            below = (rd in ROOMS and (rs in TOP or ROOMS.index(rd) < ROOMS.index(rs))
                     or rs in TOP and rd in TOP[rs])
            if not below:
                out.append(f"{src} -> {dst}: {rs} may not import {rd or 'the package door'}")
    return out


def test_every_module_lives_in_a_room_and_imports_only_the_rooms_below_it(graph):
    assert {room_of(m) for m in graph} >= {*ROOMS, *TOP}
    assert wrong_way(graph) == []


def test_an_import_against_the_rooms_order_is_found(graph):
    assert wrong_way({"wgk.impl.storage.store": {"wgk.impl.front.kernel"}}) == [
        "wgk.impl.storage.store -> wgk.impl.front.kernel: storage may not import front"]
    assert wrong_way({"wgk.impl.demo.story": {"wgk.impl.cli.output"}})
    assert wrong_way({"wgk.impl.decisions.rules": {"wgk.impl"}})
    assert wrong_way({"wgk.impl.loose": set()}) == ["wgk.impl.loose: in no room"]
    assert wrong_way({"wgk.impl.cli.kernel": {"wgk.impl.demo.story", "wgk.impl.front.kernel",
                                              "wgk.impl.contract.names"}}) == []


def test_a_cycle_and_a_nested_import_are_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from __future__ import annotations\nfrom .sub.b import B\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..c import C\nB = 2\n")
    (pkg / "c.py").write_text("import json\nfrom . import a\n\ndef f():\n    import os\n")
    g = import_graph(pkg, "x")
    assert g["x.c"] == {"json", "x.a", "os"} and g["x.sub.b"] == {"x.c"}
    assert find_cycle(g) == ["x.a", "x.sub.b", "x.c", "x.a"]
    assert nested_imports(pkg) == ["c.py:5"]
    assert lazy_edges(pkg, "x") == {"x.c": {"os"}}
    (pkg / "c.py").write_text("C = 3\n")
    assert find_cycle(import_graph(pkg, "x")) is None
    (pkg / "c.py").write_text("def f():\n    from . import a\n")      # a lazy import closes it
    assert find_cycle(import_graph(pkg, "x")) == ["x.a", "x.sub.b", "x.c", "x.a"]
    assert lazy_edges(pkg, "x") == {"x.c": {"x.a"}}


#: What a start of the served kernel on SQLite and the in-memory world does not load: the
#: package's door imports a name when it is first used, and the modules of ``LAZY`` wait for
#: what needs them (PostgreSQL, the real world, a rebuild, an audit, a legacy import).
NOT_AT_START = ("wgk.impl.front.client", "wgk.impl.front.audit", "wgk.impl.front.legacy",
                "wgk.impl.storage.pg", "wgk.impl.storage.pg_conn",
                "wgk.impl.world.named_git", "wgk.impl.world.git", "psycopg", "subprocess",
                "tempfile")


def _loaded(code: str) -> set[str]:
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport json, sys\n"
                          "print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_package_door_imports_nothing_until_a_name_is_used():
    loaded = _loaded("import wgk.impl")
    assert sorted(m for m in loaded if m.startswith(PACKAGE + ".")) == []
    import wgk.impl
    import importlib
    for name in wgk.impl.__all__:
        module = importlib.import_module(f"{PACKAGE}.{wgk.impl.WHERE[name]}")
        assert getattr(wgk.impl, name) is getattr(module, name)
    assert set(dir(wgk.impl)) >= set(wgk.impl.__all__)
    with pytest.raises(AttributeError):
        wgk.impl.NoSuchName


def test_the_served_kernel_starts_without_what_it_does_not_use():
    loaded = _loaded("import wgk.impl.serve")
    assert "wgk.impl.front.kernel" in loaded and "wgk.impl.protocol.serve" in loaded
    assert sorted(loaded & set(NOT_AT_START)) == []
