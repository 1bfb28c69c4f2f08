"""The kernel installs and runs without the verification suite's extras.

A plain ``pip install wgk`` installs no solver, no fuzzer and no test framework:
``import wgk.impl``, ``wgk kernel`` and ``wgk demo`` need only the standard
library, and every command of the suite says which extra it needs. Each test runs
a fresh interpreter in which importing any of the extras fails, as it would in
such an install.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("z3", "hypothesis", "networkx", "jsonschema", "pytest", "_pytest")

BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys
    EXTRAS = {EXTRAS!r}
    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in EXTRAS:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    sys.meta_path.insert(0, NotInstalled())
    for m in list(sys.modules):
        if m.split(".")[0] in EXTRAS:
            del sys.modules[m]
""")

REPORT = textwrap.dedent("""
    import json, sys
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(EXTRAS))
    print(json.dumps({"loaded": loaded}), file=sys.stderr)
""")


def without_extras(body: str, cwd: Path) -> subprocess.CompletedProcess:
    code = BLOCKER + textwrap.dedent(body) + REPORT
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def loaded_extras(proc: subprocess.CompletedProcess) -> list[str]:
    return json.loads(proc.stderr.strip().splitlines()[-1])["loaded"]


def test_the_blocker_really_blocks_the_extras(tmp_path):
    # the harness's own check: with the blocker in place, the suite cannot be imported
    proc = without_extras("""
        try:
            import wgk.conformance.reports.gate
        except ModuleNotFoundError as e:
            print("blocked", e.name)
        else:
            print("imported")
    """, tmp_path)
    assert proc.stdout.split()[0] == "blocked"


def test_the_kernel_imports_without_the_extras(tmp_path):
    proc = without_extras("""
        import wgk.impl
        from wgk.impl import Kernel, MemoryWorld, TaskPolicy
        world = MemoryWorld.create(target="main-0")
        k = Kernel("k.db", world.environment())
        k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
        print(sorted(k.project()["tasks"]))
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['a', 'b']"
    assert loaded_extras(proc) == []


def test_wgk_kernel_runs_without_the_extras(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    proc = without_extras(f"""
        import sys
        from wgk.conformance.cli.main import main
        codes = [main(["kernel", "--db", "k.db", "init", "--graph", "g", "--repo", {str(repo)!r},
                       "--target", "refs/heads/main"]),
                 main(["kernel", "--db", "k.db", "--credential", "k.db.credential",
                       "task", "add", "schema"]),
                 main(["kernel", "--db", "k.db", "--credential", "k.db.credential", "--json",
                       "status"])]
        print(codes, file=sys.stderr)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[0, 0, 0]" in proc.stderr, proc.stderr
    assert "schema" in proc.stdout
    assert loaded_extras(proc) == []


def test_the_suite_commands_say_which_extra_they_need(tmp_path):
    proc = without_extras("""
        import sys
        from wgk.conformance.cli.main import main
        code = main(["prove", "--tasks", "2"])
        print("exit", code)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["exit", "2"]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("wgk prove")]
    assert len(lines) == 1 and "pip install 'wgk[gate]'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_top_level_help_lists_every_command_without_the_extras(tmp_path):
    proc = without_extras("""
        from wgk.conformance.cli.main import main
        try:
            main(["--help"])
        except SystemExit as e:
            print("exit", e.code)
    """, tmp_path)
    assert "exit 0" in proc.stdout
    for name in ("gate", "prove", "kernel", "demo"):
        assert f"    {name}" in proc.stdout
    assert "wgk[gate]" in proc.stdout and "Traceback" not in proc.stderr


def test_the_distribution_requires_none_of_the_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {dep.split(">")[0].split("[")[0].strip() for dep in project["dependencies"]}
    assert not required & {"z3-solver", "hypothesis", "networkx", "jsonschema", "pytest"}
    gate = {dep.split(">")[0].strip() for dep in project["optional-dependencies"]["gate"]}
    assert {"z3-solver", "hypothesis", "networkx"} <= gate
    test = {dep.split(">")[0].split("[")[0].strip()
            for dep in project["optional-dependencies"]["test"]}
    assert gate <= test, "the test extra installs the gate"


@pytest.mark.parametrize("line", ["python -m pip install -e '.[gate]' && wgk gate"])
def test_the_readme_installs_the_gate_before_running_it(line):
    assert (ROOT / "README.md").read_text().splitlines()[3] == line
