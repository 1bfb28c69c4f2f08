"""The child process of one mutant run: ``python -m wgk.conformance.reports.impl_mutant_child
SPEC_JSON RESULT_FILE``, started with the mutated copy first on ``PYTHONPATH``.

It refuses to run unless ``wgk.impl`` is imported from that copy, runs the named gate
sections on the named budget and pytest node ids, if any (first when ``tests_first``: a
mutant's own tests), stops at the first one that does not pass when asked to, and writes
its report as JSON to RESULT_FILE:
``{"verdict": "killed" | "survived", "section", "check", "detail", "sections": [...]}``.
Nothing is printed.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def _first_bad(section) -> tuple[str, str]:
    """The name and the first line of the detail of the section's first check not passed."""
    for c in section.checks:
        if c.verdict not in ("pass", "skip"):
            return c.name, (c.detail.splitlines() or [c.verdict])[0][:400]
    return "", ""


def fresh() -> dict:
    return {"verdict": "survived", "sections": []}


def named_trace(check: str, loaded: list):
    """The loaded trace a check names (its id, or its id followed by a space or a colon and
    what was checked on it), or None."""
    ids = [t for t in loaded if check == t.id or check.startswith((t.id + " ", t.id + ":"))]
    return max(ids, key=lambda t: len(t.id)) if ids else None


def run_first(first: dict, loaded: list, out: dict, run) -> bool:
    """The check ``first`` names (the one that killed the mutant in process), its section on
    the one trace of ``loaded`` it names, or on all of them: True when it killed the mutant."""
    trace = named_trace(first["check"], loaded)
    subset = [trace] if trace is not None else loaded
    section = run(first["section"], subset)
    out["first"] = {"section": first["section"], "check": first["check"],
                    "trace": trace.id if trace is not None else None,
                    "killed": section.verdict not in ("pass", "skipped")}
    out["sections"].append({"name": first["section"], "first": True, "verdict": section.verdict,
                            "checks": len(section.checks), "seconds": round(section.seconds, 2)})
    if out["first"]["killed"]:
        check, detail = _first_bad(section)
        out.update({"verdict": "killed", "section": first["section"], "check": check,
                    "detail": detail})
    return out["first"]["killed"]


def run_sections(spec: dict, out: dict | None = None) -> dict:
    """The named sections, after what ``out`` already says (the named tests, when they run
    first): nothing more once it is a kill and the run stops at the first. With
    ``spec["first"]``, that check first, and the rest of the gate only if it does not kill."""
    out = out or fresh()
    if not spec["sections"] or (out["verdict"] == "killed" and spec.get("stop_at_first", True)):
        return out
    from wgk.conformance.reports import gate
    from wgk.conformance.traces.format import load_traces
    sources = spec.get("traces") or [str(gate.bundled_traces())]
    loaded = load_traces(sources)
    external = None
    if spec.get("external"):                    # served by the command, on this copy
        from wgk.conformance.oracle.external_runs import Kernel
        external = Kernel(spec["external"]["command"], spec["external"]["timeout"])
    backend = spec.get("backend")               # a PostgreSQL DSN: the sections run there too
    from wgk.conformance.oracle import impl_system
    impl_system.use_backend(backend)

    def run(name: str, traces: list):
        return gate.run_section(name, spec["budget"], None, loaded=traces, sources=sources,
                                counterexamples=spec["counterexamples"], external=external,
                                backend=backend)
    if spec.get("first") and run_first(spec["first"], loaded, out, run) \
            and spec.get("stop_at_first", True):
        return out
    for name in spec["sections"]:
        section = run(name, loaded)
        row = {"name": name, "verdict": section.verdict, "checks": len(section.checks),
               "seconds": round(section.seconds, 2)}
        out["sections"].append(row)
        if section.verdict not in ("pass", "skipped") and out["verdict"] == "survived":
            check, detail = _first_bad(section)
            out.update({"verdict": "killed", "section": name, "check": check, "detail": detail})
            if spec.get("stop_at_first", True):
                return out
    return out


def run_tests(spec: dict, out: dict) -> dict:
    """The named pytest node ids, on the same copy (the environment is inherited), in one
    process: the project's own options (workers per core) are not read, so the run does not
    depend on which pytest plugins are installed."""
    tests = spec.get("tests") or []
    if not tests or (out["verdict"] == "killed" and spec.get("stop_at_first", True)):
        return out
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-o", "addopts=",
                        "-p", "no:xdist", "-p", "no:cacheprovider", *tests], capture_output=True)
    verdict = "pass" if p.returncode == 0 else "fail"
    out["sections"].append({"name": "tests", "verdict": verdict, "checks": len(tests),
                            "seconds": round(time.perf_counter() - t0, 2)})
    if verdict == "fail" and out["verdict"] == "survived":
        lines = p.stdout.decode(errors="replace").strip().splitlines()
        failed = [ln for ln in lines if ln.startswith("FAILED") or ln.startswith("ERROR")]
        out.update({"verdict": "killed", "section": "tests",
                    "check": (failed[0].split()[1] if failed else " ".join(tests)),
                    "detail": (failed or lines[-1:] or ["pytest failed"])[0][:400]})
    return out


def main(argv: list[str]) -> int:
    spec, result = json.loads(argv[1]), Path(argv[2])
    import wgk.impl
    copy = Path(spec["copy"]).resolve()
    where = Path(wgk.impl.__file__).resolve()
    if copy not in where.parents:
        sys.stderr.write(f"wgk.impl was imported from {where}, not from the mutated copy "
                         f"under {copy}\n")
        return 2
    if spec.get("tests_first"):           # a mutant's own tests: cheaper than any section
        out = run_sections(spec, run_tests(spec, fresh()))
    else:
        out = run_tests(spec, run_sections(spec))
    result.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
