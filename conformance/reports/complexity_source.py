"""Facts read from the source for the complexity budget: lines of code, reducers, public
methods, terminal writers, stores and process spawns (``ast`` and ``tokenize``)."""
from __future__ import annotations

import ast
import io
import sqlite3
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model", "impl", "conformance")
#: The operator's command line and the demo live with the implementation but are not the
#: kernel: the kernel's figures (processes, writers, reducers, its lines) leave them out;
#: ``loc-total`` counts them.
IMPL_TOOLS = ("impl/cli", "impl/demo")


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
    # the columns a step writes, as a dict (``transaction.Step.sets``)
    return any(isinstance(k, ast.Constant) and k.value == "attempt_state" and _terminal_value(v)
               for d in ast.walk(fn) if isinstance(d, ast.Dict) for k, v in zip(d.keys, d.values))


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
    ``attempt_state=`` (or a dict's ``"attempt_state"``) a terminal value or a value known
    only at run time. The helper
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
    from wgk.impl.storage.store import MIGRATIONS
    conn = sqlite3.connect(":memory:")
    try:
        for version in sorted(MIGRATIONS):
            conn.executescript(MIGRATIONS[version])
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: [r[1] for r in conn.execute(f"PRAGMA table_info({n})")] for n in sorted(names)}
    finally:
        conn.close()


def stores_of_record() -> list[str]:
    """Tables the ledger does not rebuild (``store.PROJECTED_TABLES``), the schema table
    aside."""
    from wgk.impl.storage.store import PROJECTED_TABLES
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
