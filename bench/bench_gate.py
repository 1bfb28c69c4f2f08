"""The gate's wall time: ``wgk gate --quick`` and the default ``wgk gate``.

Whatever sections the gate has when it runs are timed (their names and check
counts are noted with the figure). There is no peer; the figure is a time, so
lower is better. A gate that does not pass fails this benchmark: a time of a
failing gate is not the time of the gate.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchResult, Check, Figure, main, say, settle, wgk  # noqa: E402

NAME = "gate"
BUDGETS = (("wgk gate --quick", ("--quick",)), ("wgk gate", ()))


def failing(data: dict) -> list[str]:
    return [f"{name}: {c['name']}" for name, sec in data.get("sections", {}).items()
            for c in sec.get("checks", []) if c.get("verdict") != "pass"]


def sections(data: dict) -> str:
    parts = [f"{name} {len(sec['checks'])}" for name, sec in data.get("sections", {}).items()]
    return "sections: " + (", ".join(parts) if parts else "none")


def run(quick: bool = False) -> BenchResult:
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    for label, args in BUDGETS:
        say(f"  {label} ...")
        p = wgk("gate", *args, "--json")
        try:
            data = json.loads(p.stdout)
        except ValueError:
            checks.append(Check(f"{label} ran", False,
                                f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"))
            continue
        passed = p.returncode == 0 and data.get("verdict") == "pass"
        bad = failing(data)
        checks.append(Check(f"{label} passes", passed,
                            f"verdict {data.get('verdict')}, exit {p.returncode}"
                            + (f"; failing: {'; '.join(bad[:3])}" if bad else "")))
        figures.append(Figure(f"{label}, wall time", p.seconds, "s", higher_is_better=False,
                              note=f"{sections(data)}; the gate reports {data.get('seconds')} s "
                                   "(Python start excluded)"))
    return settle(NAME, figures, checks, [], [], t0)


if __name__ == "__main__":
    sys.exit(main(NAME, run))
