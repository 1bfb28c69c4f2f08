"""A gate section of this checkout against another revision's, back to back on the same traces.

    python bench/section_against.py main                   # crash cuts, the gate's traces, two rounds
    python bench/section_against.py main --traces traces/incidents/0*.json --rounds 3
    python bench/section_against.py main --section batches --scratch /tmp

The other revision is exported as ``gate_against`` does (``git archive`` into
``bench/.cache/``, put first on ``PYTHONPATH``). Each run is a fresh interpreter that
loads the traces, then runs the section on them as the quick gate does (``run_section``,
in this one process) with its temporary files under ``--scratch`` (default: the RAM
file system when there is one, as the gate; the same for both revisions). Printed per run:
the checks, their wall time and the CPU time (user + system, of the process and its
children) for the section alone (imports and loading excluded), and the 1-minute load
average. Both revisions must report the same checks with the same verdicts, every one
passing, else the exit code is 1.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gate_against import BENCH, ROOT, export  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_traces
section, files = sys.argv[1], sys.argv[2:]
traces = load_traces(files)
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))
c0, t0 = cpu(), time.perf_counter()
done = run_section(section, "quick", loaded=traces, sources=files)
print(json.dumps({"cpu": cpu() - c0, "wall": time.perf_counter() - t0,
                  "checks": [(c.section, c.name, c.verdict) for c in done.checks]}))
"""


def section_run(section: str, files: list[str], scratch: str | None, path: Path | None) -> dict:
    env = dict(os.environ)
    if scratch:
        env["TMPDIR"] = scratch
    if path is not None:
        env["PYTHONPATH"] = str(path) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    load0 = os.getloadavg()[0]
    p = subprocess.run([sys.executable, "-c", CHILD, section, *files], cwd=ROOT if path is None else path,
                       env=env, capture_output=True, text=True, check=False)
    try:
        data = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"no result (exit {p.returncode}): {p.stderr.strip()[-400:]}") from None
    data["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return data


def gate_traces() -> list[str]:
    from wgk.conformance.reports.gate_budget import bundled_traces
    from wgk.conformance.traces.format import load_traces
    return [str(t.path) for t in load_traces([str(bundled_traces())])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the revision to measure against (e.g. main)")
    ap.add_argument("--traces", nargs="+", help="trace files or globs (default: the gate's)")
    ap.add_argument("--section", default="crash-cuts",
                    help="the gate section run on the quick budget (default crash-cuts; also "
                         "batches, replay, two-kernels, ...)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of both (default 2)")
    ap.add_argument("--scratch", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                    help="the temporary directory of both (default /dev/shm when writable)")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    a = ap.parse_args(argv)
    files = ([os.path.abspath(f) for g in a.traces for f in sorted(glob.glob(g)) or [g]] if a.traces
             else gate_traces())
    sha, _, shim = export(a.rev)
    runs = []
    for n in range(a.rounds):
        order = [("this", None), (a.rev, shim)]
        for label, path in (order if n % 2 == 0 else order[::-1]):
            r = section_run(a.section, files, a.scratch, path)
            r.update(round=n + 1, which=label)
            runs.append(r)
            failed = sum(v != "pass" for _, _, v in r["checks"])
            print(f"round {n + 1}  {label:<10} {len(r['checks'])} checks ({failed} failed)  "
                  f"wall {r['wall']:7.2f} s  cpu {r['cpu']:7.2f} s  "
                  f"{1000 * r['cpu'] / max(1, len(r['checks'])):5.2f} ms cpu/check  "
                  f"load {r['load'][0]:.2f} -> {r['load'][1]:.2f}", flush=True)
    ok = all(v == "pass" for r in runs for _, _, v in r["checks"])
    same = len({tuple(map(tuple, r["checks"])) for r in runs}) == 1
    print(f"every check passed: {ok}; the same checks and verdicts in every run: {same} "
          f"({len(runs[0]['checks'])} checks of {a.section} on {len(files)} traces, "
          f"scratch {a.scratch or 'TMPDIR'})")
    means = {}
    for label in ("this", a.rev):
        mine = [r for r in runs if r["which"] == label]
        means[label] = (sum(r["wall"] for r in mine) / len(mine), sum(r["cpu"] for r in mine) / len(mine))
        print(f"{label:<10} mean wall {means[label][0]:7.2f} s  mean cpu {means[label][1]:7.2f} s")
    print(f"this / {a.rev}: wall {means['this'][0] / means[a.rev][0]:.2f}x, "
          f"cpu {means['this'][1] / means[a.rev][1]:.2f}x")
    if not a.no_save:
        now = datetime.now(timezone.utc)
        out = BENCH / "results" / f"section-against-{a.section}-{now.date().isoformat()}.json"
        ours = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        out.write_text(json.dumps({
            "date": now.isoformat(timespec="seconds"), "this": ours, "section": a.section,
            "against": {"rev": a.rev, "commit": sha}, "traces": len(files), "scratch": a.scratch,
            "passed": ok, "same-checks": same,
            "runs": [{k: (len(v) if k == "checks" else v) for k, v in r.items()} for r in runs]},
            indent=2) + "\n")
        print(f"results written to {out.relative_to(ROOT)}")
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
