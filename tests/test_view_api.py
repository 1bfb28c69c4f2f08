"""wgk view without a browser: the JSON API, the session, the static report, DOT, the CLI's errors."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from wgk.conformance.traces.format import load_trace
from wgk.conformance.view.api import Api
from wgk.conformance.view.ask import ask
from wgk.conformance.view.enumerate import Instance
from wgk.conformance.view.session import Session, mutant_of

ROOT = Path(__file__).resolve().parents[1]
INCIDENT = ROOT / "traces" / "incidents" / "12-target-moved-needs-repair.json"


def wgk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgk.conformance", *args],
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def counterexample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cx") / "cx.json"
    run = wgk("check", "--invariant", "cas-base-exact", "--mutant", "cas-ignores-moved-target",
              "--depth", "11", "--tasks", "1", "--out", str(out))
    assert run.returncode == 1, run.stderr
    return out


def api_for(path: Path, system: str = "model") -> Api:
    trace = load_trace(path)
    return Api(Session.from_trace(trace, Instance(tasks=len(trace.graph["tasks"])),
                                  mutant_of(trace)), system=system, ask=ask)


def get(api: Api, route: str, **query) -> dict:
    status, data = api.handle("GET", route, {k: str(v) for k, v in query.items()}, None)
    assert status == 200, data
    return data


def test_a_counterexample_breaks_at_its_last_step_under_its_mutant(counterexample):
    api = api_for(counterexample)
    s = get(api, "/api/session")
    assert s["semantics"] == "cas-ignores-moved-target"
    assert [r["index"] for r in s["steps"]] == list(range(11))
    assert s["steps"][10]["label"] == "commit-effect(t1)" and s["steps"][10]["decision"] == "applied"
    assert s["first_break"] == {"state": 11, "step": 10, "id": "cas-base-exact",
                                "doc": "The kernel moves the target only from the exact base to "
                                       "the exact candidate."}
    # the land that ignores the moved target also drops a commit from the target's history
    assert s["steps"][10]["breaks"] == ["cas-base-exact", "target-history-grows"]
    assert s["steps"][9]["breaks"] == []
    state = get(api, "/api/state", k=11)
    assert [b["id"] for b in state["invariants"]["broken"]] == ["cas-base-exact", "target-history-grows"]
    assert "cas-base-exact" not in state["invariants"]["holds"]
    rows = {r["key"]: r for r in state["tasks"][0]["rows"]}
    assert rows["phase"] == {"key": "phase", "section": "phase", "value": "effect-committed",
                             "before": "effect-prepared"}
    assert "before" not in rows["attempt"]          # unchanged fields carry no "before"
    # names, not ints: the target moved to a foreign commit (the solver picks which), and
    # the land took it back to the candidate built on the old target
    moved = get(api, "/api/state", k=10)["globals"]["target"]["value"]
    assert moved.startswith("c") and moved != "c1"
    assert state["globals"]["target"] == {"value": "c1", "before": moved}


def test_the_model_refuses_what_the_mutant_takes(counterexample, tmp_path):
    api = api_for(counterexample)
    status, s = api.handle("POST", "/api/semantics", {}, {"mutant": "model"})
    assert status == 200 and s["semantics"] == "model"
    assert s["steps"][10]["decision"] == "rejected:cas-moved" and s["first_break"] is None
    doc = get(api, "/api/export")
    assert doc["steps"][10]["expect"] == {"decision": "rejected", "code": "cas-moved"}
    assert doc["expect"]["tasks"]["t1"]["phase"] == "effect-prepared"
    out = tmp_path / "by-the-model.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    run = wgk("replay", str(out), "--system", "both")
    assert run.returncode == 0, run.stdout + run.stderr


def test_enabled_steps_extend_the_path_and_the_export_replays(counterexample, tmp_path):
    api = api_for(counterexample)
    enabled = get(api, "/api/enabled", k=10)["steps"]
    labels = [c["label"] for c in enabled]
    assert "commit-effect(t1)" in labels and "env:move-target(=main-1)" in labels
    commit = next(c for c in enabled if c["label"] == "commit-effect(t1)")
    assert commit["breaks"] == ["cas-base-exact", "target-history-grows"] and commit["decision"] == "applied"
    repair = next(c for c in enabled if c["label"] == "mark-repair(t1)")
    status, s = api.handle("POST", "/api/extend", {}, {"at": 10, "step": repair["wire"]})
    assert status == 200 and len(s["steps"]) == 11 and s["steps"][10]["label"] == "mark-repair(t1)"
    assert s["first_break"] is None
    doc = get(api, "/api/export")
    assert doc["format"] == "wgk-trace/1" and doc["id"].endswith("-explored")
    assert doc["expect"]["tasks"]["t1"]["status"] == "needs-repair"
    out = tmp_path / "explored.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    run = wgk("replay", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout


def test_an_instance_starts_fresh_and_names_the_contents_it_writes():
    api = Api(Session.from_instance(Instance(tasks=2)))
    assert get(api, "/api/session")["steps"] == []
    first = get(api, "/api/enabled", k=0)["steps"]
    dispatch = next(c for c in first if c["label"] == "dispatch(t1)")
    assert dispatch["decision"] == "applied"
    assert get(api, "/api/enabled", k=0)["steps"][0]["wire"] == first[0]["wire"]
    api.handle("POST", "/api/extend", {}, {"at": 0, "step": dispatch["wire"]})
    rows = {r["key"]: r for r in get(api, "/api/state", k=1)["tasks"][0]["rows"]}
    assert rows["worktree.content"] == {"key": "worktree.content", "section": "work",
                                        "value": "main-0", "before": "-"}
    assert rows["attempt-state"]["before"] == "none" and rows["attempt-state"]["value"] == "running"
    edit = next(c for c in get(api, "/api/enabled", k=1)["steps"] if c["label"].startswith("env:edit"))
    assert edit["label"] == "env:edit(t1=t1-a1-v0)" and edit["wire"]["content"] == "t1-a1-v0"
    api.handle("POST", "/api/extend", {}, {"at": 1, "step": edit["wire"]})
    rows = {r["key"]: r for r in get(api, "/api/state", k=2)["tasks"][0]["rows"]}
    assert rows["worktree.content"]["before"] == "main-0" and rows["worktree.content"]["value"] == "t1-a1-v0"
    graph = get(api, "/api/state", k=2)["graph"]
    assert [(t["name"], t["deps"]) for t in graph] == [("t1", []), ("t2", ["t1"])]
    assert graph[0]["status"] == "in-progress" and graph[1]["way"] != "finished"


def test_bad_requests_are_one_line_errors():
    api = Api(Session.from_instance(Instance(tasks=1)), ask=ask)
    for method, route, query, body, needle in [
            ("GET", "/api/state", {"k": "9"}, None, "states 0 to 0"),
            ("GET", "/api/state", {}, None, "k: expected an integer"),
            ("POST", "/api/extend", {}, {"at": 0, "step": {"request": {"kind": "nope"}}}, "/request"),
            ("POST", "/api/ask", {}, {"reach": "t9.status == 1", "depth": 3}, "reach:"),
            ("POST", "/api/ask", {}, {"invariant": "no-such", "depth": 3}, "unknown invariant"),
            ("GET", "/api/nothing", {}, None, "no such endpoint")]:
        status, data = api.handle(method, route, query, body)
        assert status == 400 and needle in data["error"] and "\n" not in data["error"], data


def test_ask_z3_puts_the_shortest_trace_in_the_stepper():
    api = Api(Session.from_instance(Instance(tasks=1)), ask=ask)
    status, s = api.handle("POST", "/api/ask", {}, {"reach": 't1.attempt_state == "lost"', "depth": 5})
    assert status == 200, s
    assert s["steps"][0]["label"] == "dispatch(t1)"
    last = get(api, "/api/state", k=len(s["steps"]))
    assert {r["key"]: r["value"] for r in last["tasks"][0]["rows"]}["attempt-state"] == "lost"
    status, data = api.handle("POST", "/api/ask", {}, {"reach": 't1.promotions >= 2', "depth": 3})
    assert status == 400 and "nothing found within depth 3" in data["error"]


def test_the_server_listens_on_localhost_and_answers_json():
    from wgk.conformance.view.server import serve, url_of
    server = serve(Api(Session.from_instance(Instance(tasks=1))))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = url_of(server)
        assert url.startswith("http://127.0.0.1:") and server.server_address[0] == "127.0.0.1"
        page = urllib.request.urlopen(url).read().decode()
        assert "<table id=\"steps\">" in page and "wgk-data" not in page.split("<script>")[0]
        data = json.loads(urllib.request.urlopen(url + "api/state?k=0").read())
        assert data["k"] == 0 and data["invariants"]["broken"] == []
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(url + "api/state?k=5")
        assert bad.value.code == 400
    finally:
        server.shutdown()
        server.server_close()


def test_html_report_embeds_every_state(counterexample, tmp_path):
    out = tmp_path / "cx.html"
    run = wgk("view", str(counterexample), "--html", str(out))
    assert run.returncode == 0, run.stderr
    text = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script id="wgk-data" type="application/json">(.*?)</script>',
                                text, re.S).group(1).replace("<\\/", "</"))
    assert len(data["states"]) == 12 and data["start"] == 11
    assert data["export"]["format"] == "wgk-trace/1"
    assert "http" not in text.split("<script")[0]            # nothing fetched from anywhere


def test_dot_is_labelled_and_bounded(counterexample, tmp_path):
    near = tmp_path / "near.dot"
    assert wgk("view", "--tasks", "1", "--dot", str(near), "--radius", "1").returncode == 0
    text = near.read_text()
    assert text.startswith("digraph") and 'label="dispatch(t1) -> applied"' in text
    assert "t1: open, none, absent" in text and text.count(" -> s") <= 30
    path = tmp_path / "path.dot"
    assert wgk("explore", "--tasks", "1", "--dot", str(path), "--path", str(counterexample)).returncode == 0
    text = path.read_text()
    assert '"10. commit-effect(t1) -> applied", penwidth=2' in text and "style=dashed" in text


@pytest.mark.parametrize("args, needle", [
    (["/no/such/trace.json"], "/no/such/trace.json: no such file"),
    (["{bad}"], "no such file"),
    (["--tasks", "0"], "--tasks must be at least 1"),
    (["--tasks", "1", "--mutant", "no-such-mutant", "--html", "x.html"], "unknown mutant"),
])
def test_view_bad_input_is_one_line_and_exit_2(args, needle):
    run = wgk("view", *args)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stderr.count("\n") == 1 and needle in run.stderr and "Traceback" not in run.stderr


def test_view_malformed_trace_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "wgk-trace/1", "id": "x"', encoding="utf-8")
    run = wgk("view", str(bad), "--html", str(tmp_path / "x.html"))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and str(bad) in run.stderr


def test_view_help_has_examples():
    run = wgk("view", "--help")
    assert run.returncode == 0 and "wgk view cx.json --html cx.html" in run.stdout


def test_an_incident_opens_and_its_path_replays_unchanged(tmp_path):
    api = api_for(INCIDENT)
    s = get(api, "/api/session")
    assert s["first_break"] is None and len(s["steps"]) == len(load_trace(INCIDENT).steps)
    out = tmp_path / "same.json"
    out.write_text(json.dumps(get(api, "/api/export")), encoding="utf-8")
    assert wgk("replay", str(out)).returncode == 0


def test_system_both_shows_the_implementations_decision(counterexample):
    s = get(api_for(counterexample, system="both"), "/api/session")
    assert s["system"] == "both"
    assert [r["impl"] for r in s["steps"][:10]] == [r["decision"] for r in s["steps"][:10]]
    assert s["steps"][10]["decision"] == "applied" and s["steps"][10]["impl"] == "rejected:cas-moved"


def test_the_command_prints_its_url_and_stops_on_ctrl_c():
    import signal
    proc = subprocess.Popen([sys.executable, "-m", "wgk.conformance", "view", "--tasks", "1", "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert json.loads(urllib.request.urlopen(url + "api/session").read())["steps"] == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        assert "wgk view: stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_busy_port_is_one_line_and_exit_2():
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        run = wgk("view", "--tasks", "1", "--no-open", "--port", str(busy.getsockname()[1]))
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--port" in run.stderr, run.stderr
