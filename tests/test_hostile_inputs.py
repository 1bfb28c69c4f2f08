"""The gate's hostile inputs on real files (``wgk.conformance.oracle.hostile``, run by the
``tamper`` section): they hold on the implementation, each fails on the planted bug it is
there for (a patched copy of wgk.impl, as ``wgk mutants --impl`` plants it), and each says
the world it runs on."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.conformance.oracle.hostile import CHECKS, WORLDS, hostile_problems
from wgk.conformance.oracle.impl_mutants import child_env, materialize
from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

#: The planted bug -> the check that must fail on it.
KILLS = {"worktree-through-symlink": "worktree through a planted symlink",
         "secret-file-adopted": "token file planted",
         "surrogate-credential-crashes": "bad credentials",
         "loose-credential-file-read": "credential file open to others"}


def test_every_hostile_input_is_refused_by_the_implementation():
    found = hostile_problems()
    assert set(found) == set(CHECKS) == set(WORLDS)
    assert found == {c: [] for c in CHECKS}


def test_bad_credentials_are_refused_on_postgresql(pg_dsn):
    assert hostile_problems(pg_dsn) == {c: [] for c in CHECKS}


@pytest.mark.parametrize("name", sorted(KILLS))
def test_each_planted_bug_fails_its_hostile_input(name, tmp_path):
    copy = materialize(MUTANTS_BY_NAME[name].patches, tmp_path / "copy", name)
    code = ("import json, wgk.impl\n"
            "from wgk.conformance.oracle.hostile import hostile_problems\n"
            "print(json.dumps([wgk.impl.__file__, hostile_problems()]))\n")
    p = subprocess.run([sys.executable, "-c", code], env=child_env(copy), capture_output=True,
                       text=True, timeout=300)
    where, found = json.loads(p.stdout.strip().splitlines()[-1])
    assert Path(where).resolve().is_relative_to(copy.resolve())
    assert found[KILLS[name]], found
    assert all(len(line.splitlines()) == 1 for line in found[KILLS[name]])


def test_the_catalogue_leaves_these_bugs_to_the_gate_not_to_unit_tests():
    for name in KILLS:
        m = MUTANTS_BY_NAME[name]
        assert not m.tests and not m.survives, m.name
