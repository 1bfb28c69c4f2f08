"""The same gate on PostgreSQL: every trace in lockstep through the model and the kernel on
PostgreSQL, crash cuts (an exception before and after COMMIT, and a real kill -9 that drops
the connection) of the incident traces, and the ``--backend`` options of replay and gate.

Every trace with every crash cut runs in ``wgk replay traces/ --system both --crash-cuts
--backend DSN`` (too long for the test suite on two cores); here a chosen set.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.oracle import impl_system
from wgk.conformance.oracle.crashcuts import crash_cuts
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import load_trace, trace_files
from wgk.impl.storage import pg

from pg_support import pg_backend, pg_server  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent
TRACES = trace_files([ROOT / "traces"])
INCIDENTS = ROOT / "traces" / "incidents"
#: incident -> what is compared after each cut ("thorough" rebuilds and audits every time)
CUT = {"05-lost-response-retried": "thorough", "16-two-dispatchers-one-attempt": "thorough",
       "15-legacy-done-quarantined": "thorough", "13-crash-at-every-phase": "scoped",
       "17-reset-racing-completion": "scoped",
       "18-worker-poses-as-validator": "scoped"}   # its principals table is made on first use


def test_every_trace_replays_in_lockstep_on_postgresql(pg_backend):
    """Each trace on a schema as a fresh kernel database is: made and migrated for the first,
    then emptied back to that and handed to the next (``pg.recycling``)."""
    failed = []
    schemas = set()
    with pg.recycling():
        for path in TRACES:
            trace = load_trace(path)
            systems = [ModelSystem(trace), ImplSystem(trace)]
            assert pg.is_dsn(systems[1].path)
            schemas.add(systems[1].path)
            try:
                r = replay(trace, systems)
            finally:
                for s in systems:
                    s.close()
            if not r.passed:
                failed.append(f"{path.name}: {r.divergences[0].describe().splitlines()[0]}")
    assert len(TRACES) >= 40 and failed == []
    assert len(schemas) < len(TRACES)                  # schemas handed on, not made per trace


@pytest.mark.parametrize("name", CUT)
def test_crash_cuts_on_postgresql(pg_backend, name):
    result = crash_cuts(load_trace(INCIDENTS / f"{name}.json"), checks=CUT[name])
    assert result.cuts, "the trace crosses durable boundaries"
    assert any("before commit" in c.boundary for c in result.cuts)
    assert any("after commit" in c.boundary for c in result.cuts)
    assert result.passed, [d.describe() for c in result.failed for d in c.divergences][:3]


def test_kill_crash_cuts_drop_the_connection_on_postgresql(pg_backend):
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    result = crash_cuts(trace, mode="kill", steps=range(2, 5))
    assert result.cuts and result.passed, [c.name for c in result.failed]


def test_schemas_are_dropped_after_each_system(pg_backend):
    trace = load_trace(INCIDENTS / "16-two-dispatchers-one-attempt.json")
    s = ImplSystem(trace)
    schema = dict(p.split("=", 1) for p in s.path.split("?", 1)[1].split("&"))["options"]
    name = schema.split("%3D")[-1].split("=")[-1]
    s.close()
    with pg.driver().connect(pg_backend) as c:
        assert c.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                         (name,)).fetchone()[0] == 0


def test_replay_takes_a_backend(pg_server, capsys):
    path = str(INCIDENTS / "16-two-dispatchers-one-attempt.json")
    assert main(["replay", path, "--system", "both", "--crash-cuts", "--backend", pg_server,
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] == 1 and out["traces"][0]["crash_cuts"] > 0
    assert impl_system.backend() is None                   # restored afterwards


@pytest.mark.parametrize("command", [["replay", str(INCIDENTS / "16-two-dispatchers-one-attempt.json"),
                                      "--system", "impl"], ["gate", "--quick"]])
def test_a_bad_backend_is_one_line_and_exit_2(capsys, command):
    for bad in ("mysql://x", "postgresql://nobody@127.0.0.1:1/none"):
        code = main(command + ["--backend", bad])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and "--backend" in err, err
