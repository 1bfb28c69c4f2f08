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

Refresh the generated blocks: ``wgk docs --write``; ``wgk docs --check`` exits 1 and
prints a diff when the document is out of date. The inventory is checked in
``docgen_inventory``, the plan in ``docgen_plan``; this module re-exports both.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Callable

from wgk.model.vocab import (
    AUTHORITY, EDGES, NEEDS_CAPABILITY, PRE_EFFECT_PHASES, TRANSACTION_KINDS, Actor, Kind, Phase,
)

from wgk.conformance.reports.docgen_save_doc import (  # noqa: F401 (re-exported)
    DOC, PLAN, ROOT, DocError, block_pattern, load_plan,
)
from wgk.conformance.reports.docgen_inventory import (  # noqa: F401 (re-exported)
    Entry, enclosing_function, inventory_differences, inventory_from_searches, parse_inventory,
    parse_searches, run_search,
)
from wgk.conformance.reports.docgen_plan import (  # noqa: F401 (re-exported)
    command_problem, ownership_problems, parallel_pairs, parse_dag_table, plan_graph, plan_problems,
    structure_problems, validation_problems,
)


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



def refreshed(text: str, generators: dict[str, Callable[[], str]] = GENERATORS) -> str:
    """The document with every generated block replaced by its generator's output."""
    for name, gen in generators.items():
        pattern = block_pattern(name)
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
