"""The incremental gate: ``wgk gate --quick --cache DIR`` cold and warm, side by side.

The checkout's ``model``, ``impl``, ``conformance`` and ``traces`` are copied into a
temporary ``wgk/`` put first on ``PYTHONPATH`` (nothing is installed, the checkout is never
edited), and the gate of that copy runs with a fresh cache folder:

- cold: the first run, the cache empty (target 20 s on two idle cores);
- warm, nothing changed: every check reused;
- warm after a change to one rule (a statement added to a rule function of
  ``model/rules_attempt.py``) and after a change to one implementation module (a statement
  added to every function of ``impl/decisions/pauses.py``): the binding target, 10 s;
- not ``--quick``: the default gate cold (target 60 s) beside them.

``--module-only`` leaves out the run after the rule change (the cold run and the warm one
with nothing changed stay: the warm runs start from them).

Each figure is printed with its target and the factor still to gain (ours / target, met
at 1 or below). Every run must pass and report the same checks with the same verdicts as
the cold one (the report minus the cache's line and the timings); the warm runs must reuse
checks, the unchanged one all of them.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, BenchResult, Check, Figure, main, run_process, say, settle  # noqa: E402

NAME = "cache"
#: seconds on two idle cores (the issue's targets; the warm one is binding)
TARGETS = {"cold": 20.0, "warm": 10.0, "default cold": 60.0}
RULE = ("model/rules_attempt.py", None)        # the first rule function of the file
MODULE = "impl/decisions/pauses.py"
#: ``--rule-only``: the cold run and the warm run after one rule changed, no other
WHY_RULE = ("the proofs re-run only the changed rule's frames and the init frames (each frame "
            "is kept under a key of the rule-file functions its transition can run); each model "
            "mutant re-runs only when its kill read the rule (its proof walked that rule's "
            "frames, an incident trace it replays sends that kind, its exploration ran the rule, "
            "or it patches the kernel or a reducer, so its set-up reads every rule), and then "
            "checks again only the frames of its proof's walk whose key changed (the rule's "
            "kind's; the set-up kept kind by kind, found again for that kind alone); each "
            "exploration re-runs only when it ran the rule; the coverage's witnesses' replays "
            "(a part per trace they start from, beside the other sections' parts) re-run when "
            "they ran the rule, whether the witnesses are stale (a part of its own) when the "
            "model's text stops being the one the witnesses were searched on (the witnesses "
            "current while the cells, the unreachable cells' proofs and each witness's cells "
            "are as they were; each unreachable cell's proof kept under what it ran, proved "
            "again only when it ran the rule), its counting when the cells read it; a replay (and the two kernels' "
            "replay) re-runs only when the model's run of its trace gives other decisions, "
            "projections, verdicts or coverage cells; the other traced sections, the "
            "contract, the races and the tamper section (with what their child processes ran) "
            "re-run only the parts that ran the rule")
WHY_MODULE = ("the fuzzing and the probes run again (every one of their parts ran the "
              "changed module), each system they make (a fuzz example, a probed trace) "
              "answered call by call from the cache until its first call that ran the module, "
              "then run for real from a fresh system sent its earlier calls again; a probed "
              "trace's result is given again without its model's side when the "
              "implementation answers every call it sent as before, and so is a fuzz shape's "
              "passing run (Hypothesis's generation, the model's steps and the oracle skipped) "
              "when every example's system does; the coverage's witnesses' replays likewise "
              "(their model side skipped), its counting reused (it ran nothing of the "
              "implementation); the contract, the races and the tamper "
              "section re-run only if they or their child processes ran the module")
WHY_COLD = ("every check is run: see the gate benchmark for where the cold gate's time goes "
            "(the proofs, the crash cuts, the exploration, the fuzzing); the cache adds the "
            "recording of the functions each traced part runs")


def _copy(tmp: Path) -> Path:
    top = tmp / "src"
    for part in ("model", "impl", "conformance", "traces"):
        # traces/counterexamples/ is bundled data (the coverage witnesses start from its
        # traces); a counterexamples folder elsewhere is a gate run's output
        skip = ("__pycache__", "*.pyc") + (() if part == "traces" else ("counterexamples",))
        shutil.copytree(ROOT / part, top / "wgk" / part, ignore=shutil.ignore_patterns(*skip))
    return top


def _functions(path: Path) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.FunctionDef) and n.body[0].lineno > n.lineno]


def _touch(path: Path, only_first_rule: bool) -> str:
    """Add ``_changed = 1`` at the start of a function's body (the first one decorated as a
    rule, or every function); the text before."""
    text = path.read_text()
    found = _functions(path)
    if only_first_rule:
        found = [n for n in found if any("rule" in ast.unparse(d) for d in n.decorator_list)][:1]
    lines = text.splitlines(keepends=True)
    for n in sorted(found, key=lambda n: -n.body[0].lineno):
        body = lines[n.body[0].lineno - 1]
        indent = body[:len(body) - len(body.lstrip())]
        lines.insert(n.body[0].lineno - 1, f"{indent}_changed = 1\n")
    path.write_text("".join(lines))
    return text


def _plain(data: dict) -> dict:
    """A gate's JSON report without what may differ between two runs of the same checks: the
    timings (the report's, each section's, each check's and the one a check's data holds), the
    scratch folder and the cache's line."""
    out = json.loads(json.dumps(data))
    for k in ("seconds", "scratch", "cache"):
        out.pop(k, None)
    for s in out.get("sections", {}).values():
        s.pop("seconds", None)
        for c in s.get("checks", []):
            c.pop("seconds", None)
            if isinstance(c.get("data"), dict):
                c["data"].pop("seconds", None)
    return out


def profile(data: dict) -> str:
    """Each section run again (its own seconds, summed over its parts, at least 0.05) with its
    checks reused of all, the slowest first; then how many sections were reused whole."""
    by = (data.get("cache") or {}).get("sections") or {}
    ran, whole = [], 0
    for name, s in data.get("sections", {}).items():
        n, seconds = len(s.get("checks", [])), s.get("seconds", 0.0)
        if n and by.get(name, 0) >= n:
            whole += 1
        elif seconds >= 0.05 or by.get(name, 0) < n:
            ran.append((seconds, f"{name} {seconds:.1f} s ({by.get(name, 0)} of {n} reused)"))
    return ("sections run again: " + (", ".join(t for _, t in sorted(ran, reverse=True)) or "none")
            + f"; {whole} reused whole")


def _first_difference(a, b, at: str = "") -> str | None:
    """Where two JSON values first differ (None: equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{at}/{k} (only in {'the run' if k in a else 'the cold run'})"
            found = _first_difference(a[k], b[k], f"{at}/{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for n, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{at}[{n}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{at} ({len(a)} items against {len(b)})"
    return None if a == b else f"{at} ({str(a)[:80]!r} against {str(b)[:80]!r})"


def run(quick: bool = False, module_only: bool = False, rule_only: bool = False) -> BenchResult:
    t0 = time.perf_counter()
    figures: list[Figure] = []
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="wgk-bench-cache-") as tmp:
        top = _copy(Path(tmp))
        env = dict(os.environ, PYTHONPATH=str(top) + (os.pathsep + os.environ["PYTHONPATH"]
                                                      if os.environ.get("PYTHONPATH") else ""))
        cache = Path(tmp) / "cache"
        walls: dict[int, float] = {}     # each run's wall time, by its report's id

        def gate(label: str, *args: str) -> dict | None:
            say(f"  {label} ...")
            p = run_process([sys.executable, "-m", "wgk.conformance", "gate", *args,
                             "--cache", str(cache), "--json"], cwd=tmp, env=env, timeout=3600)
            try:
                data = json.loads(p.stdout)
            except ValueError:
                checks.append(Check(f"{label} ran", False,
                                    f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"))
                return None
            c = data.get("cache") or {}
            checks.append(Check(f"{label} passes", p.returncode == 0 and data["verdict"] == "pass",
                                f"verdict {data['verdict']}, exit {p.returncode}"))
            walls[id(data)] = p.seconds      # beside the report: a time is no part of it
            for name, s in data.get("sections", {}).items():
                for one in s.get("checks", []):
                    if one.get("verdict") not in ("pass", "skip"):
                        say(f"    {one.get('verdict')}: {name}: {one.get('name')}: "
                            f"{str(one.get('detail'))[:160]}")
            say(f"    {p.seconds:.1f} s; {c.get('reused')} of {c.get('checks')} checks reused; "
                f"load {os.getloadavg()[0]:.1f}")
            say("    " + profile(data))
            return data

        def figure(label: str, data: dict | None, target: float, why: str = "") -> None:
            if data is None:
                return
            c = data.get("cache") or {}
            wall = walls[id(data)]
            factor = wall / target
            say(f"    {label}: {wall:.1f} s, target {target:.0f} s, "
                + ("met" if factor <= 1 else f"{factor:.1f}x still to gain"))
            figures.append(Figure(f"{label}, wall time", wall, "s",
                                  peer="target, two idle cores", peer_value=target,
                                  higher_is_better=False, target=1.0, why=why,
                                  note=f"{c.get('reused')} of {c.get('checks')} checks reused; "
                                       f"load {os.getloadavg()[0]:.1f}"))

        cold = gate("cold", "--quick")
        figure("wgk gate --quick, cold", cold, TARGETS["cold"], WHY_COLD)
        warm = None if rule_only else gate("warm, nothing changed", "--quick")
        figure("wgk gate --quick, warm, nothing changed", warm, TARGETS["warm"])
        runs = {"warm, nothing changed": warm}
        for label, rel, first_rule, why in (
                (("warm after one rule changed", RULE[0], True, WHY_RULE),) * (not module_only)
                + (("warm after one implementation module changed", MODULE, False, WHY_MODULE),)
                * (not rule_only)):
            path = top / "wgk" / rel
            before = _touch(path, first_rule)
            try:
                runs[label] = gate(label, "--quick")
            finally:
                path.write_text(before)
            figure(f"wgk gate --quick, {label}", runs[label], TARGETS["warm"], why)
        if cold is not None:
            for label, data in runs.items():
                if data is None:
                    continue
                c = data.get("cache") or {}
                where = _first_difference(_plain(data), _plain(cold))
                checks.append(Check(f"{label}: the report of the cold run", where is None,
                                    "checks, verdicts, details" if where is None else
                                    f"first difference at {where}"))
                everything = label == "warm, nothing changed"
                checks.append(Check(f"{label}: checks reused",
                                    c.get("reused") == c.get("checks") if everything else
                                    0 < (c.get("reused") or 0) < (c.get("checks") or 0),
                                    f"{c.get('reused')} of {c.get('checks')}"))
        if not quick and not rule_only:
            shutil.rmtree(cache, ignore_errors=True)
            full = gate("default, cold")
            figure("wgk gate, cold", full, TARGETS["default cold"], WHY_COLD)
    return settle(NAME, figures, checks, [], [], t0)


if __name__ == "__main__":
    ONLY = {"--module-only", "--rule-only"}
    sys.exit(main(NAME, lambda quick: run(quick, "--module-only" in sys.argv[1:], "--rule-only" in sys.argv[1:]),
                  [a for a in sys.argv[1:] if a not in ONLY]))
