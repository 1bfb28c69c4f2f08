"""The guide's table of every planted bug, in process and through the protocol, is the
catalogue's: one row per mutant, in its order, the section that killed it in process, and
through the protocol the section that killed it over it (measured), the listing as needing
access inside the process, or the survivor's explanation."""
from __future__ import annotations

import re
from pathlib import Path

from wgk.conformance.oracle.impl_mutants import CATEGORY_TITLES
from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS, IN_PROCESS_ONLY
from wgk.conformance.oracle.impl_mutants_kills import (
    KILLED_IN_PROCESS, KILLED_OVER_PROTOCOL, SURVIVED_OVER_PROTOCOL,
)
from wgk.conformance.reports.gate_external import OVER_PROTOCOL

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "gate-your-kernel.md"
HEADING = "### Every planted bug, both ways"


def rows(text: str) -> list[list[str]]:
    part = text.split(HEADING, 1)[1].split("\n#", 1)[0]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in part.splitlines() if line.startswith("| `")]


def expected(m) -> list[str]:
    inproc = f"`{m.killed_in_process[0]}`" if m.killed_in_process else "survives"
    measured = m.name in SURVIVED_OVER_PROTOCOL
    if m.name in KILLED_OVER_PROTOCOL:
        over = f"killed by `{KILLED_OVER_PROTOCOL[m.name]}`"
    elif m.in_process:
        over = "in process only" + ("" if measured else " (not measured)")
    elif m.survives:
        over = "survives" + ("" if measured else " (not measured)")
    else:
        over = "not measured"
    return [f"`{m.name}`", CATEGORY_TITLES[m.category], inproc, over]


def test_the_guides_table_has_one_row_per_mutant_as_the_catalogue_says():
    got = rows(GUIDE.read_text())
    assert [r[0] for r in got] == [f"`{m.name}`" for m in IMPL_MUTANTS]
    for m, row in zip(IMPL_MUTANTS, got):
        assert row == expected(m), (m.name, row)


def test_the_guides_counts_are_the_tables():
    text = GUIDE.read_text()
    over = len(KILLED_OVER_PROTOCOL)
    listed = sum(bool(m.in_process) for m in IMPL_MUTANTS)
    assert f"{over} killed over the protocol" in text
    assert f"{listed} listed as needing access inside the process" in text


def test_a_mutant_killed_over_the_protocol_is_not_listed_as_needing_the_process():
    """A listing that hides a gap would say the protocol cannot show a bug it shows."""
    assert not set(KILLED_OVER_PROTOCOL) & set(IN_PROCESS_ONLY)
    assert not set(KILLED_OVER_PROTOCOL) & SURVIVED_OVER_PROTOCOL
    unexplained = [m.name for m in IMPL_MUTANTS
                   if m.name in SURVIVED_OVER_PROTOCOL and not m.explained(external=True)]
    assert unexplained == [], "a survivor through the protocol needs its reason"
    assert set(KILLED_OVER_PROTOCOL) <= set(KILLED_IN_PROCESS)
    assert set(KILLED_OVER_PROTOCOL.values()) <= set(OVER_PROTOCOL)


def test_the_table_check_fails_on_a_row_out_of_step():
    text = GUIDE.read_text()
    m = next(m for m in IMPL_MUTANTS if m.name in KILLED_OVER_PROTOCOL)
    row = "| " + " | ".join(expected(m)) + " |"
    assert row in text
    broken = text.replace(row, row.replace("killed by", "in process only"))
    assert [r for r in rows(broken) if r[0] == f"`{m.name}`"] != [expected(m)]
