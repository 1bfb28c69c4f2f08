"""Implementation mutants as data, planted in a copy of ``wgk.impl``.

A mutant is a realistic bug written as exact-text replacements (``Patch``) in
the implementation's source files. It is never applied to the installed
source: ``materialize`` copies the package ``wgk.impl`` into a fresh folder
as ``<folder>/wgk/impl`` and patches the copy there; a child process started
with that folder first on ``PYTHONPATH`` imports the mutated copy as
``wgk.impl`` (and so do the processes it starts in turn), while ``wgk.model``
and ``wgk.conformance`` stay the installed ones.

Every anchor must match exactly once in its file: an anchor that no longer
matches (the source drifted) or matches twice fails loudly with an
``AnchorError`` naming the mutant, the file and the count, so a catalogue
cannot rot silently into mutants that change nothing.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

#: The areas of the implementation a mutant is planted in (where the bug lives).
AREAS = ("storage", "concurrency", "git", "processes", "planner", "readiness",
         "group-commit", "digests", "idempotency", "ledger", "audit", "convergence",
         "rules", "authority", "files")
#: The categories the catalogue is filed by (what kind of promise the bug breaks), each
#: with its title; every category holds at least ``PER_CATEGORY`` mutants.
CATEGORY_TITLES = {
    "authority": "authority",
    "k-exactness": "exactness of K",
    "evidence": "evidence",
    "durability-batching": "durability and batching",
    "dependency-aggregation": "aggregation over dependencies",
    "stored-history": "integrity of stored history",
    "git-effects": "effects on git",
    "file-system": "file system",
    "postgresql-concurrency": "PostgreSQL concurrency",
}
CATEGORIES = tuple(CATEGORY_TITLES)
PER_CATEGORY = 3


class AnchorError(ValueError):
    """A patch's anchor text does not occur exactly once in its file."""


@dataclass(frozen=True)
class Patch:
    """Replace the text ``old`` (which must occur exactly once) in ``impl/<path>`` by ``new``."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class ImplMutant:
    """One planted bug: what it is, what it breaks, how it is planted, and (for a mutant the
    gate's sections are known not to see) why they cannot, or which section should."""

    name: str
    area: str                       # where the bug lives (``AREAS``)
    doc: str                        # the realistic bug, in one sentence
    breaks: str                     # the invariant id or the promise it breaks
    patches: tuple[Patch, ...]
    survives: str = ""              # why the gate cannot see it / which section should
    #: pytest node ids (from the project root) that see the bug where no gate section can:
    #: a file's mode, a planted file or symlink, a credential no trace carries. They run
    #: first, on the mutated copy.
    tests: tuple[str, ...] = ()
    category: str = ""              # what it breaks (``CATEGORIES``)
    #: why only access inside the gate's process shows it (through the conformance protocol,
    #: ``--external``, it survives for that reason; "" where the protocol shows it too)
    in_process: str = ""
    #: the section and the check that killed it in process on the quick budget (measured by
    #: ``wgk mutants --impl``; () for a mutant the sections do not kill): a run through the
    #: protocol tries that check first (``reports.impl_mutants.first_pass``)
    killed_in_process: tuple[str, str] | tuple = ()

    def explained(self, external: bool = False) -> str:
        """Why it may survive a run (through the protocol when ``external``), or ""."""
        return self.survives or (self.in_process if external else "")

    def to_json(self) -> dict:
        out = {"name": self.name, "category": self.category, "area": self.area, "doc": self.doc,
               "breaks": self.breaks,
               "patches": [{"path": f"impl/{p.path}", "old": p.old, "new": p.new}
                           for p in self.patches]}
        if self.survives:
            out["survives"] = self.survives
        if self.tests:
            out["tests"] = list(self.tests)
        if self.in_process:
            out["in-process"] = self.in_process
        if self.killed_in_process:
            out["killed-in-process"] = {"section": self.killed_in_process[0],
                                        "check": self.killed_in_process[1]}
        return out


#: The "mutant" that changes nothing: the machinery must report it as survived.
IDENTITY = ImplMutant("identity", "rules", "changes nothing (the unmutated implementation)",
                      "nothing", (), survives="nothing is changed: there is nothing to see",
                      category="authority")


def impl_root() -> Path:
    """The folder of the installed (or editable) ``wgk.impl`` package."""
    import wgk.impl
    return Path(wgk.impl.__file__).resolve().parent


def apply_patch(text: str, patch: Patch, where: str) -> str:
    """``text`` with ``patch`` applied; ``AnchorError`` unless the anchor occurs exactly once."""
    n = text.count(patch.old)
    if n != 1:
        first = patch.old.strip().splitlines()[0] if patch.old.strip() else "(empty)"
        raise AnchorError(f"{where}: impl/{patch.path}: the anchor {first!r} occurs {n} times "
                          "(it must occur exactly once: the source drifted, update the catalogue)")
    return text.replace(patch.old, patch.new)


def patched_sources(patches: tuple[Patch, ...], name: str,
                    root: Path | None = None) -> dict[str, str]:
    """The patched text of every file the patches touch (nothing is written)."""
    root = root or impl_root()
    out: dict[str, str] = {}
    for p in patches:
        path = root / p.path
        if not path.is_file():
            raise AnchorError(f"{name}: impl/{p.path}: no such file")
        text = out.get(p.path)
        out[p.path] = apply_patch(path.read_text() if text is None else text, p, name)
    return out


def check_anchors(mutants, root: Path | None = None) -> list[str]:
    """Every anchor problem of a catalogue (empty: every anchor matches exactly once), and
    every patch that leaves its file unchanged or not valid Python."""
    problems = []
    for m in mutants:
        try:
            sources = patched_sources(m.patches, m.name, root)
        except AnchorError as e:
            problems.append(str(e))
            continue
        if m.patches and all((root or impl_root()).joinpath(p).read_text() == text
                             for p, text in sources.items()):
            problems.append(f"{m.name}: its patches change nothing")
        for path, text in sources.items():
            try:
                compile(text, f"impl/{path}", "exec")
            except SyntaxError as e:
                problems.append(f"{m.name}: impl/{path}: the patched file does not compile ({e})")
    return problems


def materialize(patches: tuple[Patch, ...], dest: Path, name: str = "mutant") -> Path:
    """Copy ``wgk.impl`` to ``dest/wgk/impl``, apply ``patches`` there; ``dest`` goes first
    on ``PYTHONPATH`` (see ``child_env``)."""
    sources = patched_sources(patches, name)            # AnchorError before anything is copied
    target = dest / "wgk" / "impl"
    shutil.copytree(impl_root(), target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path, text in sources.items():
        (target / path).write_text(text)
    return dest


def child_env(dest: Path, base: dict | None = None) -> dict:
    """The environment of a process that imports the copy under ``dest`` as ``wgk.impl``."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(dest) + (os.pathsep + rest if rest else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


__all__ = ["AREAS", "AnchorError", "CATEGORIES", "CATEGORY_TITLES", "PER_CATEGORY", "IDENTITY", "ImplMutant", "Patch", "apply_patch",
           "check_anchors", "child_env", "impl_root", "materialize", "patched_sources"]
