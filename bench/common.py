"""What every benchmark shares: figures and results as data, the machine
description, the results file, the table, and the command line of a single
benchmark.

A benchmark is a module ``bench/bench_<name>.py`` exposing

    def run(quick: bool = False) -> BenchResult

and ending with ``if __name__ == "__main__": sys.exit(main("<name>", run))`` so
that it also runs alone. ``bench/run.py`` finds every such module.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
LOAD_AT_START = os.getloadavg()     # other work on the machine when the benchmarks began


# --- results as data ----------------------------------------------------------

@dataclass
class Figure:
    """One measured figure, with the peer's figure for the same work when there is one.

    ``ratio`` is how many times better ours is: ours / peer for a rate
    (``higher_is_better``), peer / ours for a time.
    """

    name: str
    value: float | None
    unit: str
    peer: str | None = None
    peer_value: float | None = None
    higher_is_better: bool = True
    target: float | None = None       # the ratio the brief asks for
    note: str = ""
    why: str = ""                     # where the time goes when the target is missed

    @property
    def ratio(self) -> float | None:
        if self.value is None or self.peer_value is None or not self.value or not self.peer_value:
            return None
        return self.value / self.peer_value if self.higher_is_better else self.peer_value / self.value

    @property
    def meets_target(self) -> bool | None:
        r = self.ratio
        return None if r is None or self.target is None else r >= self.target

    @property
    def short_by(self) -> float | None:
        """How many times better ours must become to meet the target (None: met or no target)."""
        r = self.ratio
        return None if self.meets_target is not False else round(self.target / r, 2)

    def to_json(self) -> dict:
        out = asdict(self)
        out["ratio"] = None if self.ratio is None else round(self.ratio, 3)
        out["meets_target"] = self.meets_target
        out["short_by"] = self.short_by
        if self.meets_target is not False:
            out.pop("why")
        return out


@dataclass
class Check:
    """A precondition of a comparison (e.g. both tools reached the same states)."""

    name: str
    passed: bool
    detail: str = ""


#: statuses of a benchmark result
OK = "ok"                        # measured, every check passed, every peer available
PEER_UNAVAILABLE = "peer-unavailable"  # ours measured; a peer could not be installed or run
FAILED = "failed"                # a check failed: the comparison is not valid
ERROR = "error"                  # the benchmark raised
MISSING = "missing"              # the benchmark module does not exist


@dataclass
class BenchResult:
    name: str
    status: str
    figures: list[Figure] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    detail: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 2),
                "detail": self.detail,
                "checks": [asdict(c) for c in self.checks],
                "figures": [f.to_json() for f in self.figures],
                "notes": self.notes}


def settle(name: str, figures: list[Figure], checks: list[Check], notes: list[str],
           peers_missing: list[str], t0: float) -> BenchResult:
    """The result's status from its checks and the peers that were unavailable."""
    failed = [c for c in checks if not c.passed]
    if failed:
        status, detail = FAILED, "; ".join(f"{c.name}: {c.detail}" for c in failed)
    elif peers_missing:
        status, detail = PEER_UNAVAILABLE, "; ".join(peers_missing)
    else:
        status, detail = OK, ""
    return BenchResult(name, status, figures, checks, notes, time.perf_counter() - t0, detail)


# --- measuring ----------------------------------------------------------------

def say(message: str) -> None:
    """Progress on stderr (stdout may carry JSON)."""
    print(message, file=sys.stderr, flush=True)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


@dataclass
class Proc:
    returncode: int
    stdout: str
    stderr: str
    seconds: float       # wall time, process start included
    peak_rss: int | None = None     # the process's peak resident set, bytes (wait4)


def run_process(argv: Sequence[str], *, cwd: Path | str | None = None, timeout: float = 3600,
                env: dict | None = None) -> Proc:
    """Run ``argv`` to its end (``subprocess.TimeoutExpired`` after ``timeout`` seconds, the
    process killed); its output, wall time and peak resident set."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)    # reaped here, not by Popen
        seconds = time.perf_counter() - t0
        if seconds >= timeout:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
    return Proc(p.returncode, texts[0], texts[1], seconds, usage.ru_maxrss * 1024)


def wgk(*args: str, timeout: float = 3600) -> Proc:
    """Run the ``wgk`` command line of this checkout with this interpreter."""
    return run_process([sys.executable, "-m", "wgk.conformance", *args], cwd=ROOT, timeout=timeout)


# --- the machine ----------------------------------------------------------------

def _first_line(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr).strip()
    return text.splitlines()[0] if text else None


def machine() -> dict:
    """What the figures were measured on."""
    cpu = platform.processor() or None
    try:
        info = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    memory = None
    try:
        m = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        memory = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB" if m else None
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _first_line(["java", "-version"]),
        "node": _first_line(["node", "--version"]),
        # 1, 5 and 15 minute load averages: other work sharing the cores
        "load_average_at_start": [round(x, 2) for x in LOAD_AT_START],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


# --- results file and table -----------------------------------------------------

def write_results(name: str, results: list[BenchResult], quick: bool,
                  peers: dict | None = None) -> Path:
    """bench/results/<name>[-quick]-<date>.json (a later run the same day replaces it)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc)
    path = RESULTS / f"{name}{'-quick' if quick else ''}-{now:%Y-%m-%d}.json"
    data = {"name": name, "quick": quick, "date": now.isoformat(timespec="seconds"),
            "machine": machine(), "peers": peers or {},
            "benchmarks": [r.to_json() for r in results]}
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    return f"{x:.4f}"


def table(results: list[BenchResult]) -> str:
    rows = [("benchmark", "figure", "ours", "peer", "peer value", "ratio", "target")]
    for r in results:
        if not r.figures:
            rows.append((r.name, f"[{r.status.upper()}] {r.detail}"[:70], "", "", "", "", ""))
        for f in r.figures:
            ratio = "-" if f.ratio is None else f"{f.ratio:,.2f}x"
            target = "" if f.target is None else (
                f">= {f.target:g}x " + ("ok" if f.meets_target else
                                        f"BELOW, {f.short_by:g}x short" if f.meets_target is False
                                        else "n/a"))
            rows.append((r.name, f.name, f"{_num(f.value)} {f.unit}", f.peer or "",
                         _num(f.peer_value) if f.peer else "", ratio, target))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.figures and r.status != OK:
            lines.append(f"{r.name}: {r.status.upper()}: {r.detail}")
        for c in r.checks:
            lines.append(f"{r.name}: check {'passed' if c.passed else 'FAILED'}: {c.name}"
                         + (f" ({c.detail})" if c.detail else ""))
        for f in r.figures:
            if f.note:
                lines.append(f"{r.name}: {f.name}: {f.note}")
            if f.meets_target is False and f.why:
                lines.append(f"{r.name}: {f.name}: {f.short_by:g}x short of the target: {f.why}")
        for n in r.notes:
            lines.append(f"{r.name}: {n}")
    return "\n".join(lines)


def exit_code(results: list[BenchResult]) -> int:
    """1 when a benchmark failed or raised; a missing one or an unavailable peer is reported only."""
    return 1 if any(r.status in (FAILED, ERROR) for r in results) else 0


def main(name: str, run: Callable[[bool], BenchResult], argv: Sequence[str] | None = None) -> int:
    """The command line of one benchmark run alone."""
    p = argparse.ArgumentParser(prog=f"bench_{name}.py",
                                description=f"the {name} benchmark (see bench/README.md)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = p.parse_args(argv)
    result = guarded(name, run, args.quick)
    return report(name, [result], args.quick, args.json, save=not args.no_save)


def guarded(name: str, run: Callable[[bool], BenchResult], quick: bool) -> BenchResult:
    """Run one benchmark; an exception becomes an ``error`` result naming it."""
    t0 = time.perf_counter()
    try:
        return run(quick)
    except Exception as e:  # noqa: BLE001 - a failing benchmark is reported, never hidden
        return BenchResult(name, ERROR, seconds=time.perf_counter() - t0,
                           detail=f"{type(e).__name__}: {e}".splitlines()[0][:300])


def report(name: str, results: list[BenchResult], quick: bool, as_json: bool, *, save: bool) -> int:
    from peer_tools import describe_peers
    peers = describe_peers()
    path = write_results(name, results, quick, peers) if save else None
    if as_json:
        print(json.dumps({"machine": machine(), "peers": peers,
                          "benchmarks": [r.to_json() for r in results],
                          "results_file": str(path.relative_to(ROOT)) if path else None}, indent=2))
    else:
        print(table(results))
        if path:
            print(f"results written to {path.relative_to(ROOT)}")
    return exit_code(results)
