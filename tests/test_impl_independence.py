"""The implementation is written in its own words, not copied from the model.

Two checks, both read the sources with ``ast`` and ``tokenize`` (nothing is imported):

- no comment or docstring line under impl/ shares a run of eight or more words, word for
  word, with a comment or docstring of model/ (a copied sentence carries the model's
  reasoning into the implementation, where lockstep can no longer see a shared mistake);
- no record class under impl/ (a dataclass, a NamedTuple, a class with ``__slots__`` or
  annotated fields) carries the field list of the model's ``TaskState``: it shares 40 % of
  its fields or more, or ten or more of them in the model's order.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMPL = ROOT / "impl"
MODEL = ROOT / "model"
RUN = 8                 # words in a row that make a shared line
SHARE = 0.4             # of TaskState's fields, held by one record
ORDERED_RUN = 10        # TaskState's fields in its order, held by one record

WORD = re.compile(r"[A-Za-z0-9_']+")


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of a module."""
    source = path.read_text()
    out: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string.lstrip("#").strip()))
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                first = body[0].lineno
                for i, line in enumerate(body[0].value.value.splitlines()):
                    out.append((first + i, line.strip()))
    return out


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def runs(ws: list[str], n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)}


def model_runs() -> set[tuple[str, ...]]:
    """Every run of RUN words in the model's comments and docstrings (joined per block, so a
    sentence wrapped over lines is still one run)."""
    out: set[tuple[str, ...]] = set()
    for path in sorted(MODEL.rglob("*.py")):
        lines = prose(path)
        out |= runs(words(" ".join(text for _, text in lines)))
        for _, text in lines:
            out |= runs(words(text))
    return out


def shared_lines(root: Path, against: set[tuple[str, ...]]) -> list[str]:
    """``path:line: text`` for each comment or docstring line of ``root`` holding a run."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, text in prose(path):
            if runs(words(text)) & against:
                found.append(f"{_rel(path)}:{line}: {text}")
    return found


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def task_state_fields() -> list[str]:
    """TaskState's fields, in order, read from model/state.py's source."""
    tree = ast.parse((MODEL / "state.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "TaskState":
            return [s.target.id for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise AssertionError("model/state.py defines no TaskState")


def record_fields(cls: ast.ClassDef) -> list[str]:
    """The fields a class declares: annotated names and the names in ``__slots__``."""
    out = [s.target.id for s in cls.body
           if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    for s in cls.body:
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                             for t in s.targets):
            if isinstance(s.value, (ast.Tuple, ast.List)):
                out += [e.value for e in s.value.elts if isinstance(e, ast.Constant)]
    return out


def longest_ordered_run(fields: list[str], model: list[str]) -> int:
    """The longest run of consecutive ``fields`` that are model fields in the model's order."""
    position = {f: i for i, f in enumerate(model)}
    best = run = 0
    last = -1
    for f in fields:
        if f in position and position[f] > last:
            run, last = run + 1, position[f]
        elif f in position:
            run, last = 1, position[f]
        else:
            run, last = 0, -1
        best = max(best, run)
    return best


def state_shaped(root: Path, model: list[str]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = record_fields(node)
            shared = set(fields) & set(model)
            ordered = longest_ordered_run(fields, model)
            if len(shared) >= SHARE * len(model) or ordered >= ORDERED_RUN:
                found.append(f"{_rel(path)}:{node.lineno}: {node.name} holds "
                             f"{len(shared)} of TaskState's {len(model)} fields "
                             f"({ordered} in its order)")
    return found


def test_no_comment_or_docstring_line_is_copied_from_the_model():
    copied = shared_lines(IMPL, model_runs())
    assert not copied, "lines of impl/ that share eight words in a row with model/:\n" + \
        "\n".join(copied)


def test_no_record_of_the_implementation_carries_task_states_field_list():
    shaped = state_shaped(IMPL, task_state_fields())
    assert not shaped, "records of impl/ shaped like the model's TaskState:\n" + "\n".join(shaped)


# --- the checks can fail -----------------------------------------------------------------------


def test_a_copied_line_is_found(tmp_path):
    (tmp_path / "m.py").write_text('"""Kernel state as frozen dataclasses of one task graph here."""\n')
    against = runs(words("Kernel state as frozen dataclasses of one task graph here, and more"))
    assert shared_lines(tmp_path, against) and not shared_lines(tmp_path, runs(words(
        "state as frozen records, a task graph of its own")))


@pytest.mark.parametrize("body, shaped", [
    ("    " + "\n    ".join(f"{f}: int = 0" for f in ["generation", "attempt", "fence",
                                                       "lease_epoch", "attempt_state", "token",
                                                       "owner_pid", "owner_birth", "session",
                                                       "wrapper_epoch"]), True),
    ("    __slots__ = (" + ", ".join(repr(f) for f in ["phase", "exit", "reason", "revision",
                                                      "candidate", "base", "version",
                                                      "disposition", "receipts",
                                                      "deadline"]) + ")", True),
    ("    pid: int = 0\n    birth: int = 0\n    seen: str = ''", False),
])
def test_a_record_shaped_like_task_state_is_found(tmp_path, body, shaped):
    (tmp_path / "r.py").write_text(f"class Row:\n{body}\n")
    assert bool(state_shaped(tmp_path, task_state_fields())) is shaped
