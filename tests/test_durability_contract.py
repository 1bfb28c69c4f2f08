"""The environment contract's durability over every connection the kernel opens
(``wgk.conformance.oracle.durability``, the contract section's store case): it holds on the
implementation, it sees the command line's connections as well as the library's, and it
fails on a command line that opens its kernel with synchronous NORMAL (the catalogue's
``cli-kernel-synchronous-normal``, planted in a copy) where the check of the library's own
connection alone passes."""
from __future__ import annotations

import json
import subprocess
import sys

from wgk.conformance.oracle.contract import STORE_CASES, contract_results
from wgk.conformance.oracle.durability import OWN, durability, durability_problems
from wgk.conformance.oracle.impl_mutants import child_env, materialize
from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)


def test_every_connection_of_the_command_line_and_the_library_is_durable():
    got = durability()
    assert set(got["codes"].values()) == {0}
    vias = {c["via"] for c in got["settings"] if c["db"].rsplit("/", 1)[-1] in OWN}
    assert {"wgk kernel init", "wgk kernel status", "wgk kernel dispatch",
            "the library (Kernel)"} <= vias
    assert len({c["connection"] for c in got["settings"]}) > len(got["codes"])
    assert durability_problems() == []


def test_the_contract_section_runs_it_as_a_store_case():
    assert "every connection the kernel opens commits durably" in STORE_CASES
    rows = [r for r in contract_results() if r.contract == "store"]
    assert {r.case for r in rows} == set(STORE_CASES) and all(r.ok for r in rows)


def _on_copy(name: str, tmp_path, call: str):
    copy = materialize(MUTANTS_BY_NAME[name].patches, tmp_path / "copy", name)
    p = subprocess.run([sys.executable, "-c", f"import json\n{call}"], env=child_env(copy),
                       capture_output=True, text=True, timeout=300)
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_command_line_kernel_with_synchronous_normal_is_caught(tmp_path):
    problems = _on_copy("cli-kernel-synchronous-normal", tmp_path,
                        "from wgk.conformance.oracle.durability import durability_problems\n"
                        "print(json.dumps(durability_problems()))")
    assert problems and all("synchronous 1" in p and p.startswith("wgk kernel ") for p in problems)
    assert all(len(p.splitlines()) == 1 for p in problems)
    # the check of the library's own connection alone does not see it
    main_only = _on_copy("cli-kernel-synchronous-normal", tmp_path / "again",
                         "import tempfile\n"
                         "from wgk.conformance.oracle.contract import commits_reach_the_disk\n"
                         "with tempfile.TemporaryDirectory() as t:\n"
                         "    commits_reach_the_disk(t)\n"
                         "print(json.dumps('held'))")
    assert main_only == "held"


def test_every_postgresql_connection_commits_durably_and_off_is_caught(pg_dsn, tmp_path):
    assert durability_problems(pg_dsn) == []
    rows = [r for r in contract_results(dsn=pg_dsn) if r.backend == "postgresql"]
    assert [r.ok for r in rows] == [True]
    problems = _on_copy("pg-synchronous-commit-off", tmp_path,
                        "from wgk.conformance.oracle.durability import durability_problems\n"
                        f"print(json.dumps(durability_problems({pg_dsn!r})))")
    assert problems and all("synchronous_commit off" in p for p in problems)
