"""What a reopen changes for the other tasks of the graph, read from the stored tables: a
dependent's attempt opened before a dependency's newer generation, and a dependent whose
effect is already prepared or Done (docs/vocabulary.md, "Reopening a Done task")."""
from __future__ import annotations

from ..contract.vocabulary import COMMITTED_PHASES


def deps_reopened(k, name: str) -> bool:
    """A dependency opened a generation (a reset or a reopen) after the current attempt of
    ``name`` opened: that attempt ran on the dependency's old generation."""
    t = k.record(name)
    return t.fence != 0 and k.conn.execute(
        "SELECT 1 FROM attempts a JOIN edges e ON e.task = a.task "
        "JOIN generations g ON g.task = e.dep "
        "WHERE a.task = ? AND a.fence = ? AND g.opened_seq > a.opened_seq LIMIT 1",
        (k.task_id(name), t.fence)).fetchone() is not None


def dependents_committed(k, name: str) -> bool:
    """A dependent of ``name`` is Done or has an effect row prepared or committed."""
    rows = k.conn.execute("SELECT t.name FROM edges e JOIN tasks t ON t.id = e.task "
                          "WHERE e.dep = ?", (k.task_id(name),)).fetchall()
    return any(k.record(n).phase in COMMITTED_PHASES or k.record(n).effect_done
               for (n,) in rows)
