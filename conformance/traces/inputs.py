"""What a trace file may hold beyond its schema: sane JSON values and names in the grammar.

A trace is input from outside, and every system it is replayed through (the
model, the implementation on SQLite or PostgreSQL, an external process) must
receive values each of them can hold. ``decode`` turns the bytes of a file into a
JSON document or one line naming the problem and where it is; ``value_problem``
walks a parsed document (without recursion) for what JSON allows and no store
does: strings that are not Unicode text (lone UTF-16 surrogates, ``\\u0000``),
integers outside 64 bits, nesting deeper than ``MAX_DEPTH``. ``name_problems``
checks the trace's own names (its graph id, tasks, dependencies, principals, the
tasks it seeds and the content ids of its graph, seeds and environment steps)
against the one grammar (``wgk.model.names``). The names inside requests are
not checked here: a request naming something outside the grammar is wire input,
answered ``rejected/bad-name`` by the model and the implementation alike.
``semantic_errors`` checks what the schema cannot say (tasks named exist, the
graph is a DAG).
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from wgk.model.names import broken_rule, is_name
from wgk.model.protected import pattern_problem
from wgk.model.state import Graph, GraphError

MAX_DEPTH = 64
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1
GRAMMAR = "1 to 64 of a-z 0-9 . _ -, starting with a letter or a digit"


def short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis says it was cut)."""
    return text if len(text) <= limit else text[:limit] + "…"


def decode(raw: bytes) -> tuple[Any, str | None]:
    """``(document, None)``, or ``(None, problem)`` naming the line and column (or byte) of
    invalid UTF-8, invalid JSON or JSON nested too deeply to parse."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        return None, f"invalid UTF-8 at byte {e.start} (line {line}): {e.reason}"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as e:
        return None, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as e:                 # an integer literal too long to convert
        return None, f"invalid JSON: {short(str(e).split(':')[0])}"


def value_problem(doc: Any) -> tuple[list, str] | None:
    """``(path, problem)`` of the first value no store can hold, or ``None``."""
    stack: list[tuple[list, Any]] = [([], doc)]
    while stack:
        path, v = stack.pop()
        if len(path) > MAX_DEPTH:
            return path[:MAX_DEPTH], f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(v, str):
            problem = text_problem(v)
            if problem:
                return path, problem
        elif isinstance(v, bool) or v is None:
            continue
        elif isinstance(v, int):
            if not INT_MIN <= v <= INT_MAX:
                return path, f"an integer of {v.bit_length()} bits is outside 64 bits"
        elif isinstance(v, dict):
            for k in v:
                problem = text_problem(k)
                if problem:
                    return path + [k.encode("utf-8", "backslashreplace").decode()], \
                        f"key: {problem}"
            stack += [(path + [k], x) for k, x in reversed(list(v.items()))]
        elif isinstance(v, list):
            stack += [(path + [n], x) for n, x in reversed(list(enumerate(v)))]
    return None


def text_problem(s: str) -> str | None:
    """Why a string is not text every store holds (a lone surrogate, a NUL), or ``None``."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"not Unicode text: a lone surrogate U+{ord(s[e.start]):04X} at position {e.start}"
    if "\0" in s:
        return f"a NUL character at position {s.index(chr(0))}"
    return None


def name_problems(doc: dict) -> Iterator[tuple[list, str]]:
    """``(path, problem)`` for every name of the trace's own outside the grammar."""
    for path, what, value in _names(doc):
        if not is_name(value):
            shown = short(json.dumps(value, ensure_ascii=True))
            yield path, f"{what} {shown}: rule {broken_rule(value)} (a name is {GRAMMAR})"


def _names(doc: dict) -> Iterator[tuple[list, str, Any]]:
    graph = doc.get("graph", {})
    yield ["graph", "id"], "graph id", graph.get("id", "g")
    if graph.get("target") is not None:
        yield ["graph", "target"], "content id", graph["target"]
    for n, t in enumerate(graph.get("tasks", [])):
        yield ["graph", "tasks", n, "name"], "task", t.get("name")
        for m, d in enumerate(t.get("deps", [])):
            yield ["graph", "tasks", n, "deps", m], "task", d
    for n, p in enumerate(graph.get("principals", [])):
        yield ["graph", "principals", n, "name"], "principal", p.get("name")
    for name, seed in (doc.get("initial") or {}).items():
        yield ["initial", name], "task", name
        attempt = seed.get("attempt") if isinstance(seed, dict) else None
        for f in ("worktree", "origin"):
            if isinstance(attempt, dict) and attempt.get(f):
                yield ["initial", name, "attempt", f], "content id", attempt[f]
    for n, step in enumerate(doc.get("steps", [])):
        if "env" in step and step.get("content") is not None:
            yield ["steps", n, "content"], "content id", step["content"]
        if "env" in step and step.get("onto") is not None:
            yield ["steps", n, "onto"], "content id", step["onto"]


def semantic_errors(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """What the schema cannot say: task names must exist in the graph, the graph must be a DAG,
    a revoked principal must be declared."""
    out: list[tuple[str, str]] = []
    tasks = doc["graph"]["tasks"]
    names = [t["name"] for t in tasks]
    try:
        Graph.build(names, {t["name"]: t.get("deps", []) for t in tasks}, graph_id=doc["graph"]["id"])
    except GraphError as e:
        out.append(("/graph/tasks", str(e)))
    known = set(names)
    declared = {p.get("name") for p in doc["graph"].get("principals", [])}
    for name in doc.get("initial", {}):
        if name not in known:
            out.append((_pointer(["initial", name]), f"unknown task {name!r}"))
    out += protected_path_errors(doc)
    for n, step in enumerate(doc["steps"]):
        if "env" in step and step.get("task") and step["task"] not in known:
            out.append((_pointer(["steps", n, "task"]), f"unknown task {step['task']!r}"))
        if step.get("env") == "revoke" and step.get("principal") not in declared:
            out.append((_pointer(["steps", n, "principal"]),
                        f"revoke names undeclared principal {step.get('principal')!r}"))
        for where, facts in (("expect-facts", step.get("expect-facts")),):
            out += _fact_task_errors(facts, ["steps", n, where], known)
    out += _fact_task_errors(doc.get("expect"), ["expect"], known)
    out += _fact_task_errors((doc.get("historical") or {}).get("expect"), ["historical", "expect"], known)
    return out


def protected_path_errors(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The graph's protected path patterns in the grammar (``wgk.model.protected``); an
    edit's paths relative, inside the worktree, never into ``.git``; paths only on an edit."""
    out: list[tuple[str, str]] = []
    for n, p in enumerate(doc["graph"].get("protected-paths", [])):
        bad = pattern_problem(p)
        if bad is not None:
            out.append((_pointer(["graph", "protected-paths", n]), bad))
    for n, step in enumerate(doc["steps"]):
        if "paths" not in step:
            continue
        if step.get("env") != "edit":
            out.append((_pointer(["steps", n, "paths"]), "only an edit writes paths"))
            continue
        for k, path in enumerate(step["paths"]):
            if not edit_path_ok(path):
                out.append((_pointer(["steps", n, "paths", k]),
                            f"{path!r} is not a relative path inside the worktree (no empty, "
                            "'.', '..' or '.git' component, no NUL)"))
    return out


def edit_path_ok(path: str) -> bool:
    """A relative path whose components stay inside a worktree (never into ``.git``)."""
    return "\0" not in path and all(c not in ("", ".", "..") and c.lower() != ".git"
                                    for c in path.split("/"))


def _fact_task_errors(facts: Any, at: list, known: set[str]) -> list[tuple[str, str]]:
    if not isinstance(facts, dict):
        return []
    return [(_pointer(at + ["tasks", name]), f"unknown task {name!r}")
            for name in facts.get("tasks", {}) if name not in known]


def _pointer(parts) -> str:
    """A JSON pointer (RFC 6901) for a path of keys and indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts) or "/"
