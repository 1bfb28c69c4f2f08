"""The quick gate of this checkout against another revision's, back to back.

    python bench/gate_against.py main                 # two rounds, the order alternating
    python bench/gate_against.py main --rounds 3 --args --quick --workers 1

The other revision is exported with ``git archive`` into ``bench/.cache/`` (git-ignored)
and run from there with this interpreter: a directory holding ``wgk/{model,impl,
conformance,traces}`` as links to the export goes first on ``PYTHONPATH``, so nothing is
installed. Each run's wall time, its CPU time (user + system of the gate and its workers)
and the 1-minute load average before and after are printed and written to
``bench/results/gate-against-<date>.json``. Both gates must pass and report the same
checks with the same verdicts, else the exit code is 1.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PARTS = ("model", "impl", "conformance", "traces")


def export(rev: str) -> tuple[str, Path, Path]:
    """(commit, the exported tree, the directory to put on PYTHONPATH)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = BENCH / ".cache" / f"against-{sha[:12]}"
    shim = BENCH / ".cache" / f"against-{sha[:12]}-path"
    if not tree.exists():
        tmp = tree.with_name(tree.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        tmp.rename(tree)
    (shim / "wgk").mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        link = shim / "wgk" / part
        if not link.exists():
            link.symlink_to(tree / part)
    return sha, tree, shim


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def gate(args: list[str], cwd: Path, path: Path | None, keep: Path | None = None) -> dict:
    """One gate run: wall and CPU seconds, loads, verdict and checks (``keep``: its report,
    the gate's ``--json``, written there)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    load0, cpu0, t0 = os.getloadavg()[0], cpu_of_children(), time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "wgk.conformance", "gate", *args, "--json"],
                       cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, cpu_of_children() - cpu0
    if keep is not None:
        keep.write_text(p.stdout)
    try:
        data = json.loads(p.stdout)
    except ValueError:
        data = {"verdict": f"no report (exit {p.returncode}): {p.stderr.strip()[-200:]}"}
    checks = [(name, c["name"], c["verdict"]) for name, sec in data.get("sections", {}).items()
              for c in sec.get("checks", [])]
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "load": [round(load0, 2),
            round(os.getloadavg()[0], 2)], "verdict": data.get("verdict"), "exit": p.returncode,
            "checks": checks,
            "sections": {n: round(s.get("seconds", 0.0), 2) for n, s in data.get("sections", {}).items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the revision to measure against (e.g. main)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of both gates (default 2)")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    ap.add_argument("--reports", type=Path, help="a folder where each run's report (its --json) "
                    "is written, as <round>-<this|rev>.json")
    ap.add_argument("--args", nargs=argparse.REMAINDER, default=["--quick"],
                    help="the gate's arguments (default --quick)")
    a = ap.parse_args(argv)
    sha, tree, shim = export(a.rev)
    ours = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    runs = []
    for n in range(a.rounds):
        order = [("this", ROOT, None), (a.rev, tree, shim)]
        for label, cwd, path in (order if n % 2 == 0 else order[::-1]):
            if a.reports is not None:
                a.reports.mkdir(parents=True, exist_ok=True)
            r = gate(a.args, cwd, path, a.reports / f"{n + 1}-{label.replace('/', '-')}.json"
                     if a.reports is not None else None)
            r.update(round=n + 1, which=label)
            runs.append(r)
            print(f"round {n + 1}  {label:<10} wall {r['wall']:7.2f} s  cpu {r['cpu']:7.2f} s  "
                  f"load {r['load'][0]:.2f} -> {r['load'][1]:.2f}  {r['verdict']}", flush=True)
    ok = all(r["verdict"] == "pass" and r["exit"] == 0 for r in runs)
    same = len({tuple(map(tuple, r["checks"])) for r in runs}) == 1
    print(f"every gate passed: {ok}; the same checks and verdicts in every run: {same} "
          f"({len(runs[0]['checks'])} checks)")
    for label in ("this", a.rev):
        mine = [r for r in runs if r["which"] == label]
        print(f"{label:<10} mean wall {sum(r['wall'] for r in mine) / len(mine):7.2f} s  "
              f"mean cpu {sum(r['cpu'] for r in mine) / len(mine):7.2f} s")
    if not a.no_save:
        now = datetime.now(timezone.utc)
        out = BENCH / "results" / f"gate-against-{now.date().isoformat()}.json"
        out.write_text(json.dumps({
            "date": now.isoformat(timespec="seconds"), "args": a.args, "this": ours,
            "against": {"rev": a.rev, "commit": sha}, "cores": os.cpu_count(),
            "passed": ok, "same-checks": same,
            "runs": [{k: v for k, v in r.items() if k != "checks"} for r in runs]}, indent=2) + "\n")
        print(f"results written to {out.relative_to(ROOT)}")
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
