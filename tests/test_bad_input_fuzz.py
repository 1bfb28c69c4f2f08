"""Bad input, every time: arbitrary JSON values (lone surrogates, integers beyond 64 bits,
deep nesting, invalid UTF-8 bytes) thrown at ``Kernel.handle``, ``wgk kernel send --lines``
and ``wgk replay``. Each answers a decision, or refuses in one short line (``BadRequest``,
exit 2) with nothing changed; never a traceback."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from wgk.conformance.cli.main import main
from wgk.impl import BadRequest, Kernel, LegacyError, MemoryWorld, TaskPolicy
from wgk.impl.world.git import GitRepository, init_repository

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "traces" / "incidents" / "05-lost-response-retried.json"
FIELDS = ("kind", "actor", "task", "key", "cap", "expected-phase", "expected-revision",
          "expected-attempt", "owner", "candidate", "base", "evidence", "deadline", "verdict")
DEEP = 100_000
SETTINGS = settings(max_examples=20, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

text = st.text(alphabet=st.characters(exclude_categories=()), max_size=12)      # surrogates too
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.sampled_from([2 ** 63, -2 ** 63 - 1, 2 ** 63 - 1]),
                    st.just(None).map(lambda _: 10 ** 5000),
                    st.floats(), text, st.sampled_from(["\ud800", "a\x00b", "é" * 60, "a/f1"]))
NASTY = st.sampled_from(["\ud800", "k\udfff", "a\x00b", 2 ** 63, -2 ** 63 - 1, 2 ** 64 + 1,
                         "é" * 60, "a/f1", "/abs/path", "..", {"x" * 5000: 1}, ["y" * 5000]])
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(FIELDS) | text, inner, max_size=3),
                      max_leaves=10)


def deep(depth: int = DEEP) -> list:
    out: list = []
    for _ in range(depth):
        out = [out]
    return out


DEEP_VALUE = deep()           # built once: a value nested 100k deep (never mutated)


def template(cap: dict) -> dict:
    return {"kind": "heartbeat", "actor": "worker", "task": "a", "key": "hb", "cap": cap,
            "evidence": "hb-1"}


def templates(cap: dict) -> list[dict]:
    """Valid requests of several shapes: evidence, K, CAS, an owner, content ids."""
    owner = {"pid": 4001, "birth": 911, "session": "s1"}
    return [template(cap),
            {"kind": "message", "actor": "operator", "task": "a", "key": "m", "evidence": "m1"},
            {"kind": "retry", "actor": "operator", "task": "a", "key": "r",
             "expected-attempt": cap["attempt"], "owner": owner},
            {"kind": "submit", "actor": "worker", "task": "a", "key": "s", "cap": cap,
             "expected-phase": "absent", "expected-revision": 0, "deadline": 5},
            {"kind": "save-work", "actor": "wrapper", "task": "a", "key": "w", "cap": cap,
             "expected-phase": "quiescing", "expected-revision": 2, "candidate": "main-0",
             "base": "main-0"}]


@st.composite
def requests(draw, cap: dict):
    """A valid request with one to three fields (top level, in K or in the owner) replaced,
    or a bare value."""
    r = dict(draw(st.sampled_from(templates(cap))))
    inner = [f"{f}/{g}" for f in ("cap", "owner") if f in r for g in r[f]]
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(sorted(r) + inner) | st.sampled_from(FIELDS))
        value = draw(st.one_of(values, NASTY, st.just("deep")))
        value = DEEP_VALUE if value == "deep" else value
        head, _, tail = where.partition("/")
        if tail:
            base = r.get(head) if isinstance(r.get(head), dict) else {"pid": 4001, "birth": 911}
            r[head] = dict(base, **{tail: value})
        else:
            r[head] = value
    return draw(st.sampled_from([r, r, r, value]))   # the mutated request, or the bare value


def one_line(message: str) -> bool:
    return "\n" not in message and len(message) < 400 and "Traceback" not in message


# --- Kernel.handle -------------------------------------------------------------------------------


def fresh_kernel(path: str = ":memory:") -> Kernel:
    """Task ``a`` with a running attempt (the templates' K is valid for it)."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(path, world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                     "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911},
                     "mint": hashlib.sha256(b"fuzz-token").hexdigest()})["decision"] \
        == "applied"
    return k


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = fresh_kernel(str(tmp_path_factory.mktemp("fuzz") / "k.db"))
    yield k
    k.close()


def _cap(k: Kernel) -> dict:
    t = k.record("a")
    return {"graph": "g", "task": "a", "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


@settings(SETTINGS, max_examples=100)
@given(data=st.data())
def test_kernel_handle_decides_or_refuses_in_one_line(data):
    kernel = fresh_kernel()
    request = data.draw(requests(_cap(kernel)))
    before = kernel.verify_ledger()
    try:
        try:
            answer = kernel.handle(request)
        except BadRequest as e:
            assert one_line(str(e)), str(e)[:500]
            assert kernel.verify_ledger() == before        # nothing written
            return
        assert answer["decision"] in ("applied", "evidence-only", "duplicate", "rejected")
        if answer.get("code") == "bad-name":
            assert kernel.verify_ledger() == before
        assert kernel.verify_ledger().ok
    finally:
        kernel.close()


def test_the_named_cases_are_refused_at_kernel_handle(kernel):
    cap = _cap(kernel)
    for field, value, says in (
            ("key", "k\ud800", "'/key': not Unicode text: a lone surrogate U+D800 at position 1"),
            ("evidence", "x\udfff", "'/evidence': not Unicode text"),
            ("evidence", "a\x00b", "'/evidence': a NUL character at position 1"),
            ("deadline", 2 ** 63, "'/deadline': integer 9223372036854775808 is outside 64 bits"),
            ("cap", dict(cap, fence=-2 ** 63 - 1), "'/cap/fence': integer"),
            ("cap", DEEP_VALUE, "'/cap': expected an object, got [[[[...]]]]"),
            ("owner", {"pid": 1, "birth": 1, "x" * 10_000: 1}, "unknown keys 'xxxx")):
        r = dict(template(cap), **{field: value})
        before = kernel.verify_ledger()
        with pytest.raises(BadRequest) as e:
            kernel.handle(r)
        assert says in str(e.value) and one_line(str(e.value)), str(e.value)[:300]
        assert kernel.verify_ledger() == before
    with pytest.raises(BadRequest, match=r"expected a string, got \['yyyyy.{60,80}…$"):
        kernel.handle(dict(template(cap), key=["y" * 600_000]))


# --- wgk kernel send --lines ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    init_repository(str(tmp / "repo"))
    db = str(tmp / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp / "repo")]) == 0
    os.environ["WGK_CREDENTIAL_FILE"] = db + ".credential"
    assert main(["kernel", "--db", db, "task", "add", "a"]) == 0
    yield db, tmp
    del os.environ["WGK_CREDENTIAL_FILE"]
    GitRepository(str(tmp / "repo")).remove_all_worktrees()


def file_bytes(db: str) -> str:
    return hashlib.sha256(b"".join(open(p, "rb").read() for p in (db, db + "-wal")
                                   if os.path.exists(p))).hexdigest()


def line_of(value, how: str) -> bytes:
    if how == "deep":
        return b"[" * DEEP + b"]" * DEEP
    if how == "bigint":
        return b'{"kind": "message", "actor": "operator", "task": "a", "key": "m", "deadline": ' \
            + b"9" * 5000 + b"}"
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)                       # 10 ** 5000 written out in full
    try:
        raw = json.dumps(value).encode()                # surrogates travel as \\ud800 escapes
    except RecursionError:                              # the deep value: its text directly
        raw = b"[" * DEEP + b"]" * DEEP
    finally:
        sys.set_int_max_str_digits(limit)
    if how == "bad-utf8":
        return raw[:len(raw) // 2] + b"\xff\xfe\xc3" + raw[len(raw) // 2:]
    return raw


@SETTINGS
@given(data=st.data())
def test_send_lines_answers_or_refuses_in_one_line(cli_db, capsys, data):
    db, tmp = cli_db
    cap = {"graph": "g", "task": "a", "generation": 0, "attempt": 0, "fence": 0, "lease-epoch": 0}
    lines = [line_of(data.draw(requests(cap)), data.draw(st.sampled_from(
        ["json", "json", "json", "deep", "bigint", "bad-utf8"]))) for _ in range(data.draw(
            st.integers(1, 3)))]
    path = tmp / "requests.jsonl"
    path.write_bytes(b"\n".join(lines))
    before = file_bytes(db)
    capsys.readouterr()
    code = main(["kernel", "--db", db, "send", "--lines", str(path)])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2)
    if code == 2:
        assert err.count("\n") == 1 and one_line(err.strip()), err[:500]
        assert err.startswith(f"wgk kernel: {path}:")                  # the file and the line
        assert file_bytes(db) == before


def test_the_named_cases_are_refused_by_send_lines(cli_db, capsys):
    db, tmp = cli_db
    ok = b'{"kind": "message", "actor": "operator", "task": "a", "key": "ok"}'
    for bad, says in ((b'{"kind": "message", "actor": "operator", "task": "a", "key": "k\\ud800"}',
                       ":2: request field '/key': not Unicode text"),
                      (b'{"kind": "retry", "actor": "operator", "task": "a", "key": "\\ud800", '
                       b'"expected-attempt": 0}',       # a minting kind: no secret is minted
                       ":2: request field '/key': not Unicode text"),
                      (line_of(None, "deep"), ":2: JSON nested too deeply"),
                      (line_of(None, "bigint"), ":2: Exceeds the limit"),
                      (ok[:20] + b"\xff" + ok[20:], ":2: invalid UTF-8 at byte 21"),
                      (b'{"kind": "message", "actor": "operator", "task": "a/f1", "key": "n"}',
                       ":2: request field '/task' 'a/f1': rule name-charset")):
        path = tmp / "named.jsonl"
        path.write_bytes(ok + b"\n" + bad + b"\n")
        before = file_bytes(db)
        capsys.readouterr()
        assert main(["kernel", "--db", db, "send", "--lines", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}{says}" in err, err[:300]
        assert file_bytes(db) == before                                 # not even line 1


# --- wgk replay ------------------------------------------------------------------------------------


def nodes(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from nodes(v, path + (k,))
    elif isinstance(doc, list):
        for n, v in enumerate(doc):
            yield from nodes(v, path + (n,))


@SETTINGS
@given(data=st.data())
def test_replay_of_a_mutated_trace_answers_or_refuses_in_one_line(tmp_path_factory, capsys, data):
    doc = json.loads(TRACE.read_text())
    paths = [p for p in nodes(doc) if p]
    where = data.draw(st.sampled_from(paths))
    value = data.draw(st.one_of(values, st.just("deep")))
    value = DEEP_VALUE if value == "deep" else value
    mutated = copy.deepcopy(doc)
    target = mutated
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    how = data.draw(st.sampled_from(["json", "json", "bad-utf8"]))
    raw = line_of(mutated, "bad-utf8" if how == "bad-utf8" else "json")
    path = tmp_path_factory.mktemp("replay") / "trace.json"
    path.write_bytes(raw)
    capsys.readouterr()
    code = main(["replay", str(path), "--system", "both"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2)
    if code == 2:
        assert err.count("\n") == 1 and one_line(err.strip()) and str(path) in err, err[:500]


def test_the_named_cases_are_refused_at_trace_load(tmp_path, capsys):
    doc = json.loads(TRACE.read_text())
    cases = []
    for pointer, value, says in (
            (("steps", 0, "request", "key"), "k\ud800", "/steps/0/request/key: not Unicode text"),
            (("steps", 0, "request", "expected-attempt"), 2 ** 64, "an integer of 65 bits is "
                                                                    "outside 64 bits"),
            (("graph", "tasks", 0, "name"), "a/f1", "/graph/tasks/0/name: task \"a/f1\": rule "
                                                     "name-charset"),
            (("graph", "id"), "G", "/graph/id: graph id \"G\": rule name-start")):
        d = copy.deepcopy(doc)
        t = d
        for part in pointer[:-1]:
            t = t[part]
        t[pointer[-1]] = value
        cases.append((json.dumps(d).encode(), says))
    cases += [(b"[" * DEEP + b"]" * DEEP, "invalid JSON: nested too deeply"),
              (TRACE.read_bytes()[:40] + b"\xff" + TRACE.read_bytes()[40:], "invalid UTF-8 at byte 40")]
    for raw, says in cases:
        path = tmp_path / "t.json"
        path.write_bytes(raw)
        capsys.readouterr()
        assert main(["replay", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err and str(path) in err, err[:300]


def test_the_named_cases_are_refused_by_send(cli_db, capsys, monkeypatch):
    db, tmp = cli_db
    deep_text = "[" * DEEP + "]" * DEEP
    for raw, says in ((b'{"kind": "message", "actor": "operator", "task": "a\\udc00", "key": "k"}',
                       "request: request field '/task': not Unicode text"),
                      (b'{"kind": "message", "actor": "operator", "task": "a", "key": "k", '
                       b'"deadline": 18446744073709551616}',
                       "integer 18446744073709551616 is outside 64 bits"),
                      (deep_text.encode(), "request: JSON nested too deeply"),
                      (b'{"kind": "message", "actor": "oper\xe9tor"}', "request: invalid UTF-8 at byte 35")):
        before = file_bytes(db)
        monkeypatch.setattr(sys, "stdin", type("Stdin", (), {"buffer": __import__("io").BytesIO(raw)}))
        capsys.readouterr()
        assert main(["kernel", "--db", db, "send"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err[:300]
        assert file_bytes(db) == before
    capsys.readouterr()
    assert main(["kernel", "--db", db, "send", deep_text]) == 2
    assert "JSON nested too deeply" in capsys.readouterr().err


def test_the_named_cases_are_refused_by_the_legacy_import(tmp_path):
    k = fresh_kernel(str(tmp_path / "k.db"))
    before = k.verify_ledger()
    for raw, says in ((b'{"id": "b", "status": "do\xffne"}\n', ":1: 'status' 'do\\udcffne' is not "
                                                                "Unicode text"),
                      (b'{"id": "b", "status": "\\ud800"}\n', ":1: 'status' '\\ud800' is not"),
                      (b'{"id": "b"}\n' + b"[" * DEEP + b"]" * DEEP + b"\n", ":2: JSON nested"),
                      (b'[{"id": "b", "n": ' + b"9" * 5000 + b"}]", ":1: Exceeds the limit"),
                      (b'{"id": "b/c"}\n', ":1: task 'b/c': rule name-charset")):
        path = tmp_path / "graph.jsonl"
        path.write_bytes(raw)
        with pytest.raises(LegacyError) as e:
            k.import_legacy(str(path))
        assert f"{path}{says}" in str(e.value) and one_line(str(e.value)), str(e.value)[:300]
        assert k.verify_ledger() == before
    k.close()
