"""The tamper section: a kernel database edited behind the kernel's back is reported, a
closed kernel stays closed, and every file the kernel writes is 0600."""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME
from wgk.conformance.oracle.probes import closed_copy
from wgk.conformance.oracle.tamper import COLUMNS, tamper_trace
from wgk.conformance.reports.impl_mutants import run_patches
from wgk.conformance.traces.format import load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "incidents" / "acceptance-reset-retry.json"


def test_every_tamper_of_an_unmutated_kernel_is_reported_and_it_stays_closed():
    r = tamper_trace(closed_copy(load_trace(TRACE)))
    assert not r.problems and not r.failures, [t.to_json() for t in r.failures] or r.problems
    made = {t.name for t in r.made}
    tables = {name.split()[1].split(".")[0] for name in made if name.startswith("edit ")}
    assert tables == {table for table, _, _ in COLUMNS}, tables
    assert "drop the later half of the write-ahead log" in made
    assert len(r.made) >= 25
    assert all(t.reported and t.closed and t.lines for t in r.made)


def test_a_ledger_column_left_out_of_the_hash_chain_is_caught():
    m = MUTANTS_BY_NAME["ledger-key-unhashed"]
    r = run_patches(m.name, m.patches, budget="quick", sections=["tamper"], traces=[str(TRACE)],
                    timeout=300)
    assert r["verdict"] == "killed" and r["section"] == "tamper", r
    assert "ledger.key" in r["check"] and "not reported" in r["detail"], r


def test_file_modes_hold_under_both_umasks_and_a_credential_file_left_to_the_umask_is_caught(
        tmp_path, monkeypatch):
    from wgk.conformance.oracle.file_modes import mode_problems
    from wgk.conformance.oracle.impl_mutants import child_env, materialize
    assert mode_problems(0o022) == [] and mode_problems(0o077) == []
    m = MUTANTS_BY_NAME["secret-file-umask-mode"]
    copy = materialize(m.patches, tmp_path / "copy", m.name)
    monkeypatch.setenv("PYTHONPATH", child_env(copy)["PYTHONPATH"])
    problems = mode_problems(0o022)
    assert any("credential has mode 644" in p for p in problems), problems
    assert mode_problems(0o077) == []          # 077 hides it: why 022 is the one the quick gate runs


def test_the_tamper_checks_of_a_trace_read_the_same_in_two_processes():
    """Each process mints new secrets for the trace's principals, and the ledger's hashes
    cover them: what the section reports must not carry them (a report reused from the
    gate's cache is then the one a fresh run gives)."""
    import json
    import subprocess
    import sys
    script = ("import json, sys\n"
              "from wgk.conformance.reports.gate_tamper import trace_checks\n"
              "from wgk.conformance.traces.format import load_trace\n"
              "print(json.dumps([[c.name, c.verdict, c.detail, c.data]\n"
              "                  for c in trace_checks(load_trace(sys.argv[1]))]))\n")
    runs = [json.loads(subprocess.run([sys.executable, "-c", script, str(TRACE)], check=True,
                                      capture_output=True, text=True, timeout=300).stdout)
            for _ in range(2)]
    assert len(runs[0]) >= 25 and all(v == "pass" for _, v, _, _ in runs[0])
    for one, other in zip(*runs):
        assert one == other
    assert len(runs[0]) == len(runs[1])
    assert any("links to <hash>" in d for _, _, d, _ in runs[0])
