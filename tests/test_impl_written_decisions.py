"""A heartbeat and a provider failure are decided by the statement that writes them
(``tables.REPORT_IF_CURRENT``), and so are the steps of the SaveTransaction in
``transaction.WRITTEN_STEPS`` (``tables.STEP_IF_CURRENT`` with each step's own conditions,
``tables.STEP_CONDITIONS``; a submit, a WorkSave and a commit-cleanup with what was observed
of the worktree, a commit-effect with the target and the effect observed, a prepare-effect
over its dependencies' rows) and a dispatch (``tables.OPEN_IF_ADMITTED``).

Its evidence row is written only while the request's K and token are the current
attempt's; when no row was written, the answer is read from the stored facts afterwards.
The tests run the kinds of refusal on a real SQLite file, show that the guard list is not
what decides an accepted heartbeat, and take the statement's conditions away to show that
it is the statement that refuses.
"""
from __future__ import annotations

import hashlib

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.decisions import rules
from wgk.impl.front import kernel as kernel_module
from wgk.impl.decisions.transaction import WRITTEN_STEPS
from wgk.impl.storage import tables

from pg_support import pg_server, server  # noqa: F401  (a fixture)

TOKEN = "the-token"
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path):
    """A SQLite file, or a fresh schema on the PostgreSQL server (``WGK_TEST_POSTGRES``)."""
    if request.param == "sqlite":
        yield str(tmp_path / "kernel.db")
        return
    from wgk.impl.storage import pg
    with pg.scratch_schema(server(), "wgk_written") as dsn:
        yield dsn


def unbound(n: int) -> str:
    """``n`` parameters bound and compared with nothing (of any type, on either store)."""
    return " AND ".join(["(CAST(? AS TEXT) IS NULL OR 1 = 1)"] * n) or "1 = 1"


@pytest.fixture
def k(where):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where, world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                     "expected-attempt": 0, "owner": OWNER,
                     "mint": hashlib.sha256(TOKEN.encode()).hexdigest()})["decision"] == "applied"
    yield k
    k.close()


def beat(n: int, task: str = "a", token: str = TOKEN, **cap) -> dict:
    k = {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
    return {"kind": "heartbeat", "actor": "worker", "task": task, "key": f"hb{n}",
            "cap": {**k, **cap}, "evidence": f"beat-{n % 2}", "token": token}


def rows(k: Kernel) -> list[tuple]:
    return k.conn.execute("SELECT task, kind, ident, seq FROM evidence ORDER BY seq").fetchall()


REFUSED = [
    (beat(1, **{"lease-epoch": 2}), "stale-capability"),
    (beat(2, fence=0), "stale-capability"),
    (beat(3, graph="h"), "stale-capability"),
    (beat(4, token="another"), "token-mismatch"),
    (beat(5, task="b"), "unknown-attempt"),
    ({**beat(6), "cap": {**beat(6)["cap"], "task": "b"}}, "stale-capability"),
    (beat(7, task="zz"), "unknown-task"),
]


def test_a_heartbeat_is_written_under_its_conditions_and_refused_from_the_stored_facts(k):
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    assert [r[1:3] for r in rows(k)] == [("heartbeat", "beat-0")]
    for request, code in REFUSED:
        assert k.handle(request) == {"decision": "rejected", "code": code}, request
    assert len(rows(k)) == 1                          # a refused heartbeat wrote no row
    assert k.handle(beat(8)) == {"decision": "evidence-only"}    # its id seen: as it was
    assert len(rows(k)) == 1
    assert k.handle(beat(0))["decision"] == "duplicate"
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok


def test_a_report_row_carries_its_events_number_and_no_row_leaves_no_hole(k):
    """Each evidence row carries its event's number (on PostgreSQL given after the append);
    a report that writes no row leaves the ledger without a hole (no skipped event once
    sealed), and every journal row names its event."""
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    assert k.handle(beat(1)) == {"decision": "evidence-only"}
    assert k.handle(beat(2)) == {"decision": "evidence-only"}     # beat-0 seen: no row
    assert k.handle(beat(3, **{"lease-epoch": 2}))["code"] == "stale-capability"
    assert k.handle(beat(1))["decision"] == "duplicate"
    assert k.handle(beat(5)) == {"decision": "evidence-only"}     # beat-1 seen: no row
    assert k.verify_ledger().ok                                   # (sealed)
    events = k.conn.execute("SELECT seq, event, key FROM ledger ORDER BY seq").fetchall()
    assert [e[0] for e in events] == list(range(1, len(events) + 1))
    assert "skipped" not in [e[1] for e in events]
    number = {e[2]: e[0] for e in events if e[2] is not None}
    assert [(r[2], r[3]) for r in rows(k)] == [("beat-0", number["hb0"]),
                                               ("beat-1", number["hb1"])]
    journal = k.conn.execute("SELECT key, seq FROM journal WHERE key LIKE 'hb%'").fetchall()
    assert sorted(journal) == sorted((key, number[key]) for key in
                                     ("hb0", "hb1", "hb2", "hb3", "hb5"))


def test_an_accepted_heartbeat_runs_no_guard_list(k, monkeypatch):
    def guard_list(ctx):
        raise AssertionError("the guard list ran")
    monkeypatch.setattr(kernel_module, "decide", guard_list)
    monkeypatch.setattr(rules, "decide", guard_list)
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    assert k.handle(beat(1, **{"lease-epoch": 2})) == {"decision": "rejected",
                                                        "code": "stale-capability"}


def test_without_the_statements_conditions_a_stale_heartbeat_is_written(k, monkeypatch):
    unconditional = (tables.REPORT_IF_CURRENT.split(" WHERE ")[0]     # the task's name only
                     + " WHERE t.name = ? AND " + unbound(7) + " ON CONFLICT DO NOTHING")
    monkeypatch.setattr(tables, "REPORT_IF_CURRENT", unconditional)
    answer = k.handle(beat(1, **{"lease-epoch": 2}))
    assert answer == {"decision": "evidence-only"}   # the refusal came from the statement
    assert [r[2] for r in rows(k)] == ["beat-1"]


def test_a_batch_decides_heartbeats_by_their_writes_too(k):
    answers = k.handle_batch([beat(0), beat(1, token="x"), beat(3)])
    assert answers == [{"decision": "evidence-only"},
                       {"decision": "rejected", "code": "token-mismatch"},
                       {"decision": "evidence-only"}]
    assert len(rows(k)) == 2 and k.rebuild().ok


def test_a_provider_failure_is_applied_when_its_row_is_written_and_only_then(k, monkeypatch):
    monkeypatch.setattr(rules, "decide", lambda ctx: (_ for _ in ()).throw(AssertionError()))
    failure = lambda n, ident, **cap: {**beat(n, **cap), "kind": "provider-failure",
                                       "actor": "wrapper", "key": f"pf{n}", "evidence": ident}
    assert k.handle(failure(1, "rate-limit")) == {"decision": "applied"}
    assert k.handle(failure(2, "rate-limit")) == {"decision": "evidence-only"}    # seen
    assert k.handle(failure(3, "quota", fence=2)) == {"decision": "rejected",
                                                      "code": "stale-capability"}
    assert k.handle(failure(4, "quota")) == {"decision": "applied"}
    assert [r[1:3] for r in rows(k)] == [("provider-failure", "rate-limit"),
                                         ("provider-failure", "quota")]
    assert k.rebuild().ok and k.audit().findings == []


def step(n: int, kind: str, actor: str, phase: str, revision: int, **cap) -> dict:
    return {**beat(n, **cap), "kind": kind, "actor": actor, "key": f"{kind}{n}",
            "expected-phase": phase, "expected-revision": revision}


def phase_of(k: Kernel) -> tuple:
    return k.conn.execute("SELECT phase, revision FROM transactions t JOIN tasks ON tasks.id = "
                          "t.task WHERE tasks.name = 'a'").fetchone()


def test_a_plain_step_moves_its_row_under_its_conditions_and_only_then(k, monkeypatch):
    assert k.handle(step(1, "submit", "worker", "absent", 0))["decision"] == "applied"
    monkeypatch.setattr(rules, "decide", lambda ctx: (_ for _ in ()).throw(AssertionError()))
    for request, code in [
            (step(2, "quiesce", "wrapper", "prepared", 0), "cas-moved"),
            (step(3, "quiesce", "wrapper", "absent", 1), "cas-moved"),
            (step(4, "quiesce", "wrapper", "prepared", 1, **{"lease-epoch": 2}), "stale-capability"),
            (step(5, "quiesce", "wrapper", "prepared", 1, token="x"), "token-mismatch"),
            (step(6, "quiesce", "wrapper", "prepared", 1, task="b"), "unknown-attempt")]:
        assert k.handle(request) == {"decision": "rejected", "code": code}, request
        assert phase_of(k) == ("prepared", 1)
    assert k.handle(step(7, "quiesce", "wrapper", "prepared", 1)) == {"decision": "applied"}
    assert phase_of(k) == ("quiescing", 2) and k.record("a").phase == "quiescing"
    assert k.handle(step(8, "quiesce", "wrapper", "prepared", 1)) == {
        "decision": "rejected", "code": "cas-moved"}
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok
    k._forget()
    assert (k.record("a").phase, k.record("a").revision) == ("quiescing", 2)


def test_without_the_steps_conditions_a_stale_step_moves_the_row(k, monkeypatch):
    assert k.handle(step(1, "submit", "worker", "absent", 0))["decision"] == "applied"
    unconditional = ("UPDATE transactions SET phase = ?, revision = revision + 1 WHERE task = ? "
                     "AND " + unbound(2) + " AND phase IN ({}) AND " + unbound(9))
    monkeypatch.setattr(tables, "STEP_IF_CURRENT", unconditional)
    answer = k.handle(step(2, "quiesce", "wrapper", "prepared", 1, **{"lease-epoch": 2}))
    assert answer == {"decision": "applied"}          # the refusal came from the statement
    assert phase_of(k) == ("quiescing", 2)


# --- the steps of a completion ----------------------------------------------------------------

BEARERS = ("worker", "wrapper", "broker")
WORK = "work-1"


@pytest.fixture
def kw(where):
    """A kernel with a plain task ``a`` and a task ``r`` whose policy requires a review, each
    with a running attempt, and its world."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where, world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("r", review_required=True)])
    for task in ("a", "r"):
        assert k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d-{task}",
                         "expected-attempt": 0, "owner": OWNER,
                         "mint": hashlib.sha256(TOKEN.encode()).hexdigest()})["decision"] == "applied"
        world.repository.write(k.record(task).worktree_id, WORK)
    yield k, world
    k.close()


def edge(kind: str, actor: str, task: str = "a", key: str = "", **fields) -> dict:
    """``kind`` from the phase and revision task ``task`` holds now (``expected``)."""
    r = {"kind": kind, "actor": actor, "task": task, "key": key or f"{kind}-{task}",
         "cap": {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1,
                 "lease-epoch": 1}, **fields}
    if actor in BEARERS:
        r["token"] = TOKEN
    return r


def send(k: Kernel, kind: str, actor: str, task: str = "a", **fields) -> dict:
    t = k.record(task)
    phase = t.phase if t.exit == "none" else t.exit
    return k.handle({"expected-phase": phase, "expected-revision": t.revision,
                     **edge(kind, actor, task, **fields)})


def to_phase(k: Kernel, task: str, upto: str, work: str = WORK) -> None:
    """Drive ``task``'s transaction along the main line until it holds ``upto`` (its worktree
    holding ``work``, built on the attempt's base)."""
    review = k.policy(task).review_required
    base = k.record(task).base_hint
    script = [("submit", "worker", {}), ("quiesce", "wrapper", {}),
              ("save-work", "wrapper", {"candidate": work, "base": base}),
              ("seal-candidate", "daemon", {"candidate": work}),
              ("validate", "validator", {"candidate": work, "verdict": "pass"})]
    script += [("request-review", "daemon", {}),
               ("accept", "evaluator", {"candidate": work, "verdict": "pass"})] if review else \
        [("accept", "daemon", {"candidate": work, "verdict": "not-required"})]
    script += [("record-disposition", "wrapper", {"disposition": "land"}),
               ("prepare-effect", "promoter", {}),
               ("commit-effect", "promoter", {"candidate": work, "base": base}),
               ("prepare-cleanup", "cleanup", {}), ("commit-cleanup", "cleanup", {}),
               ("save-graph", "daemon", {})]
    for kind, actor, fields in script:
        if k.record(task).phase == upto:
            return
        assert send(k, kind, actor, task, **fields) == {"decision": "applied"}, (kind, task)
    assert k.record(task).phase == upto


def test_a_whole_completion_decides_its_written_steps_without_a_guard_list(kw, monkeypatch):
    k, world = kw
    guarded: list[str] = []

    def recorded(ctx):
        guarded.append(ctx.request.kind)
        return rules.decide(ctx)
    monkeypatch.setattr(kernel_module, "decide", recorded)
    to_phase(k, "a", "graph-saved")
    to_phase(k, "r", "accepted")                  # (a's land moved the target r was built on)
    assert guarded == []                          # every step of a completion: by its write
    assert {"prepare-effect", "commit-effect", "prepare-cleanup", "commit-cleanup"} \
        <= set(WRITTEN_STEPS)
    assert k.status("a") == "done" and k.record("r").receipt("review") == k.record("r").binding
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok
    k._forget()
    assert k.record("a").graph_saved and k.record("r").phase == "accepted"


#: (task, the phase it holds, the request, its refusal): each is refused by a condition of
#: the step's own, read from the stored facts after its write did not happen.
OWN_REFUSALS = [
    ("a", "work-saved", ("seal-candidate", "daemon", {"candidate": "other"}), "candidate-mismatch"),
    ("a", "candidate-sealed", ("validate", "validator", {"candidate": "other", "verdict": "pass"}),
     "candidate-mismatch"),
    ("a", "validated", ("request-review", "daemon", {}), "illegal-phase-edge"),
    ("a", "validated", ("accept", "daemon", {"candidate": "other", "verdict": "not-required"}),
     "candidate-mismatch"),
    ("a", "validated", ("accept", "evaluator", {"candidate": WORK, "verdict": "pass"}), None),
    ("r", "validated", ("accept", "daemon", {"candidate": WORK, "verdict": "not-required"}),
     "review-required"),
    ("r", "awaiting-acceptance", ("accept", "daemon", {"candidate": WORK,
                                                       "verdict": "not-required"}),
     "review-required"),
    ("a", "quiescing", ("save-work", "wrapper", {"candidate": "other", "base": "main-0"}),
     "candidate-mismatch"),
    ("a", "quiescing", ("save-work", "wrapper", {"candidate": WORK, "base": "main-9"}),
     "base-mismatch"),
    ("a", "quiescing", ("save-work", "daemon", {"candidate": WORK, "base": "main-0"}), None),
]


@pytest.mark.parametrize("task,phase,request_,code", OWN_REFUSALS)
def test_a_written_step_is_refused_by_its_own_conditions_from_the_stored_facts(
        kw, monkeypatch, task, phase, request_, code):
    k, _ = kw
    to_phase(k, task, phase)
    kind, actor, fields = request_
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: (_ for _ in ()).throw(AssertionError("the guard list ran")))
    before = (k.record(task).phase, k.record(task).revision)
    answer = send(k, kind, actor, task, key="own", **fields)
    if code is None:                         # the contract admits it: applied by its write
        assert answer == {"decision": "applied"}
        return
    assert answer == {"decision": "rejected", "code": code}
    assert (k.record(task).phase, k.record(task).revision) == before
    k._forget()
    assert (k.record(task).phase, k.record(task).revision) == before
    assert k.rebuild().ok and k.audit().findings == []


def test_a_step_refused_by_the_request_alone_takes_the_guard_list(kw, monkeypatch):
    k, _ = kw
    to_phase(k, "a", "validated")
    guarded: list[str] = []
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: guarded.append(ctx.request.kind) or rules.decide(ctx))
    # the evaluator does not speak for not-required: the request alone refuses it
    assert send(k, "accept", "evaluator", candidate=WORK, verdict="not-required") == {
        "decision": "rejected", "code": "not-authorized"}
    assert guarded == ["accept"]


def test_a_graph_save_is_refused_from_the_stored_receipts_when_one_is_missing(kw):
    k, _ = kw
    to_phase(k, "a", "cleanup-committed")
    k.conn.execute("DELETE FROM receipts WHERE kind = 'validation'")     # a receipt lost
    k._forget()
    assert send(k, "save-graph", "daemon") == {"decision": "rejected", "code": "evidence-missing"}
    assert k.record("a").phase == "cleanup-committed"


#: (task, phase, a request its own conditions refuse, the step): with the step's own
#: conditions taken out of its statement, the stale request is written.
STALE = [
    ("a", "work-saved", ("seal-candidate", "daemon", {"candidate": "other"}), "candidate-sealed"),
    ("a", "candidate-sealed", ("validate", "validator", {"candidate": "other", "verdict": "pass"}),
     "validated"),
    ("a", "validated", ("request-review", "daemon", {}), "awaiting-acceptance"),
    ("r", "validated", ("accept", "daemon", {"candidate": WORK, "verdict": "not-required"}),
     "accepted"),
    ("a", "validated", ("accept", "daemon", {"candidate": "other", "verdict": "not-required"}),
     "accepted"),
    ("a", "quiescing", ("save-work", "wrapper", {"candidate": "other", "base": "main-0"}),
     "work-saved"),
    ("a", "quiescing", ("save-work", "wrapper", {"candidate": WORK, "base": "main-9"}),
     "work-saved"),
]


@pytest.mark.parametrize("task,phase,request_,to", STALE)
def test_without_a_steps_own_conditions_a_stale_step_moves_the_row(kw, monkeypatch, task, phase,
                                                                    request_, to):
    k, _ = kw
    to_phase(k, task, phase)
    kind, actor, fields = request_
    _, values = tables.STEP_CONDITIONS[kind]
    compared = len(values(type("R", (), fields)()))     # the request's values, still bound
    monkeypatch.setitem(tables.STEP_CONDITIONS, kind, (" AND " + unbound(compared), values))
    assert send(k, kind, actor, task, key="stale", **fields) == {"decision": "applied"}
    assert k.record(task).phase == to


def test_without_its_receipt_condition_a_graph_save_missing_one_is_written(kw, monkeypatch):
    k, _ = kw
    to_phase(k, "a", "cleanup-committed")
    k.conn.execute("DELETE FROM receipts WHERE kind = 'validation'")
    k._forget()
    monkeypatch.setitem(tables.STEP_CONDITIONS, "save-graph", ("", lambda r, seen=None: ()))
    assert send(k, "save-graph", "daemon") == {"decision": "applied"}
    assert k.record("a").phase == "graph-saved"


# --- the effect and cleanup edges ---------------------------------------------------------


def no_guard_list(monkeypatch) -> None:
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: (_ for _ in ()).throw(AssertionError("the guard list ran")))


def unmoved(k: Kernel, task: str, before: tuple, rebuilds: bool = True) -> None:
    """The refused step left the row as it was, in the cache and in the database, and the
    ledger still rebuilds the tables (unless a test took a row away behind its back)."""
    assert (k.record(task).phase, k.record(task).revision) == before
    k._forget()
    assert (k.record(task).phase, k.record(task).revision) == before
    assert k.verify_ledger(since=2).ok
    if not rebuilds:
        return
    assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok


def effect_state(k: Kernel) -> list[tuple]:
    return k.conn.execute("SELECT state, re_observed FROM effects").fetchall()


@pytest.mark.parametrize("fields,code", [
    ({"candidate": "other", "base": "main-0"}, "candidate-mismatch"),
    ({"candidate": WORK, "base": "main-9"}, "candidate-mismatch"),
])
def test_a_commit_effect_naming_another_candidate_is_refused_from_the_stored_row(
        kw, monkeypatch, fields, code):
    k, world = kw
    to_phase(k, "a", "effect-prepared")
    no_guard_list(monkeypatch)
    before = (k.record("a").phase, k.record("a").revision)
    assert send(k, "commit-effect", "promoter", **fields) == {"decision": "rejected", "code": code}
    assert world.repository.target() == "main-0" and effect_state(k) == [("prepared", 0)]
    unmoved(k, "a", before)


def test_a_commit_effect_whose_review_receipt_is_gone_is_refused_review_required(kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "effect-prepared")
    k.conn.execute("DELETE FROM receipts WHERE kind = 'review'")      # a receipt lost
    k._forget()
    no_guard_list(monkeypatch)
    before = (k.record("a").phase, k.record("a").revision)
    assert send(k, "commit-effect", "promoter", candidate=WORK, base="main-0") == {
        "decision": "rejected", "code": "review-required"}
    assert world.repository.target() == "main-0"
    unmoved(k, "a", before, rebuilds=False)


def test_a_commit_effect_is_written_under_the_target_it_observed(kw, monkeypatch):
    """A target moved before the request is seen by the statement (cas-moved, no land); one
    moved between the write and the land makes the compare-and-swap fail, and the row goes
    back; with the target at the base, the land is made and recorded, by the write."""
    from wgk.impl.world.hooks import REF_UPDATE
    k, world = kw
    to_phase(k, "a", "effect-prepared")
    no_guard_list(monkeypatch)
    before = (k.record("a").phase, k.record("a").revision)
    world.repository.move_target("main-1")
    assert send(k, "commit-effect", "promoter", key="c1", candidate=WORK, base="main-0") == {
        "decision": "rejected", "code": "cas-moved"}
    assert world.repository.target() == "main-1"
    unmoved(k, "a", before)
    world.repository.move_target("main-0")

    def moves_the_target(b):
        if b.kind == REF_UPDATE and b.when == "before":
            world.repository.move_target("main-2")
    k.hook = moves_the_target
    assert send(k, "commit-effect", "promoter", key="c2", candidate=WORK, base="main-0") == {
        "decision": "rejected", "code": "cas-moved"}
    assert world.repository.target() == "main-2" and effect_state(k) == [("prepared", 0)]
    unmoved(k, "a", before)
    k.hook = lambda b: None
    world.repository.move_target("main-0")
    assert send(k, "commit-effect", "promoter", key="c3", candidate=WORK, base="main-0") == {
        "decision": "applied"}
    t = k.record("a")
    assert (t.phase, t.effect_done, t.receipt("effect")) == ("effect-committed", True, t.binding)
    assert world.repository.target() == WORK and effect_state(k) == [("committed", 0)]
    assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok
    k._forget()
    assert k.record("a") == t


def test_a_commit_effect_after_its_land_was_made_records_it_without_making_it_again(
        kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "effect-prepared")
    effect = k.conn.execute("SELECT id FROM effects").fetchone()[0]
    assert world.repository.land(effect, WORK, "main-0")       # made before a crash
    no_guard_list(monkeypatch)
    assert send(k, "commit-effect", "promoter", candidate=WORK, base="main-0") == {
        "decision": "applied"}
    assert effect_state(k) == [("committed", 1)] and k.record("a").effect_done
    assert k.rebuild().ok and k.audit().findings == []


def test_without_its_conditions_a_commit_effect_naming_another_candidate_moves_the_row(
        kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "effect-prepared")
    sql, values = tables.STEP_CONDITIONS["commit-effect"]
    monkeypatch.setitem(tables.STEP_CONDITIONS, "commit-effect", (" AND " + unbound(5), values))
    assert send(k, "commit-effect", "promoter", candidate="other", base="main-9") == {
        "decision": "applied"}
    assert k.record("a").phase == "effect-committed"


def test_a_commit_cleanup_is_refused_while_the_worktree_holds_unsaved_bytes(kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "cleanup-prepared")
    wt = k.record("a").worktree_id
    no_guard_list(monkeypatch)
    before = (k.record("a").phase, k.record("a").revision)
    world.repository.write(wt, "unsaved")
    assert send(k, "commit-cleanup", "cleanup", key="x1") == {
        "decision": "rejected", "code": "worktree-unsaved"}
    world.repository.write(wt, WORK)
    monkeypatch.setattr(world.repository, "uncaptured", lambda wt: ["ignored.bin"])
    assert send(k, "commit-cleanup", "cleanup", key="x2") == {
        "decision": "rejected", "code": "worktree-unsaved"}
    assert world.repository.observe_worktree(wt).present
    unmoved(k, "a", before)
    monkeypatch.setattr(world.repository, "uncaptured", lambda wt: [])
    assert send(k, "commit-cleanup", "cleanup", key="x3") == {"decision": "applied"}
    t = k.record("a")
    assert (t.phase, t.worktree_lease, t.receipt("cleanup")) == (
        "cleanup-committed", False, t.binding)
    assert not world.repository.observe_worktree(wt).present
    assert k.conn.execute("SELECT removed, last_content FROM worktrees WHERE id = ?", (wt,)).fetchall() == [(1, WORK)]
    assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok


def test_a_commit_cleanup_of_a_worktree_already_gone_is_written(kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "cleanup-prepared")
    world.repository.remove_worktree(k.record("a").worktree_id)
    no_guard_list(monkeypatch)
    assert send(k, "commit-cleanup", "cleanup") == {"decision": "applied"}
    assert k.record("a").phase == "cleanup-committed" and k.rebuild().ok


def test_without_its_conditions_a_commit_cleanup_erases_unsaved_bytes(kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "cleanup-prepared")
    world.repository.write(k.record("a").worktree_id, "unsaved")
    _, values = tables.STEP_CONDITIONS["commit-cleanup"]
    monkeypatch.setitem(tables.STEP_CONDITIONS, "commit-cleanup", (" AND " + unbound(4), values))
    assert send(k, "commit-cleanup", "cleanup") == {"decision": "applied"}
    assert k.record("a").phase == "cleanup-committed"


@pytest.fixture
def kr(where):
    """A kernel where task ``x`` depends on ``d``: ``d`` Done, then ``x`` dispatched and
    driven to its disposition, then ``d`` reopened (a generation opened after ``x``'s attempt)."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where, world.environment())
    k.create_graph("g", [TaskPolicy("d"), TaskPolicy("x", deps=("d",))])
    for task, work in (("d", WORK), ("x", "work-x")):
        assert k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d-{task}",
                         "expected-attempt": 0, "owner": OWNER,
                         "mint": hashlib.sha256(TOKEN.encode()).hexdigest()})["decision"] == "applied"
        world.repository.write(k.record(task).worktree_id, work)
        to_phase(k, task, "graph-saved" if task == "d" else "disposition-recorded", work)
    yield k, world
    k.close()


def reopen(k: Kernel) -> dict:
    return k.handle({"kind": "reopen", "actor": "operator", "task": "d", "key": "reopen-d",
                     "expected-generation": k.record("d").generation})


def test_a_prepare_effect_is_written_while_its_dependencies_are_done(kr, monkeypatch):
    k, world = kr
    no_guard_list(monkeypatch)
    assert send(k, "prepare-effect", "promoter", "x") == {"decision": "applied"}
    t = k.record("x")
    assert t.phase == "effect-prepared"
    assert k.conn.execute("SELECT e.id, e.state FROM effects e JOIN tasks ON tasks.id = e.task "
                          "WHERE tasks.name = 'x'").fetchall() == [(f"x/{t.effect_id}", "prepared")]
    assert k.rebuild().ok and k.audit().findings == []


def test_a_prepare_effect_after_its_dependency_reopened_is_refused_from_the_stored_rows(
        kr, monkeypatch):
    k, world = kr
    assert reopen(k)["decision"] == "applied"
    no_guard_list(monkeypatch)
    before = (k.record("x").phase, k.record("x").revision)
    assert send(k, "prepare-effect", "promoter", "x") == {
        "decision": "rejected", "code": "dependency-reopened"}
    assert k.conn.execute("SELECT count(*) FROM effects e JOIN tasks ON tasks.id = e.task "
                          "WHERE tasks.name = 'x'").fetchone() == (0,)
    unmoved(k, "x", before)


def test_without_its_conditions_a_prepare_effect_over_a_reopened_dependency_moves_the_row(
        kr, monkeypatch):
    k, world = kr
    assert reopen(k)["decision"] == "applied"
    monkeypatch.setitem(tables.STEP_CONDITIONS, "prepare-effect", ("", tables._no_values))
    assert send(k, "prepare-effect", "promoter", "x") == {"decision": "applied"}
    assert k.record("x").phase == "effect-prepared"


def test_without_the_reopened_condition_a_prepare_effect_on_an_old_generation_moves_the_row(
        kr, monkeypatch):
    """The dependency Done again on a generation opened after the attempt: only the second
    condition refuses; without it the statement moves the row."""
    k, world = kr
    k.conn.execute("INSERT INTO generations (task, generation, opened_seq) "
                   "SELECT task, 1, 1000000 FROM attempts WHERE fence = 1 AND task = "
                   "(SELECT id FROM tasks WHERE name = 'd')")          # d's generation, later
    assert send(k, "prepare-effect", "promoter", "x", key="p1") == {
        "decision": "rejected", "code": "dependency-reopened"}
    monkeypatch.setitem(tables.STEP_CONDITIONS, "prepare-effect",
                        (tables._EVERY_DEPENDENCY_DONE, tables._no_values))
    assert send(k, "prepare-effect", "promoter", "x", key="p2") == {"decision": "applied"}


def test_a_prepare_cleanup_records_the_bytes_its_worktree_holds(kw, monkeypatch):
    k, world = kw
    to_phase(k, "a", "effect-committed")
    no_guard_list(monkeypatch)
    t = k.record("a")
    stale = edge("prepare-cleanup", "cleanup", key="stale")
    stale["cap"]["lease-epoch"] = 2
    assert k.handle({**stale, "expected-phase": t.phase, "expected-revision": t.revision}) == {
        "decision": "rejected", "code": "stale-capability"}
    assert send(k, "prepare-cleanup", "cleanup") == {"decision": "applied"}
    assert k.conn.execute("SELECT planned_removal, last_content FROM worktrees WHERE id = ?", (t.worktree_id,)).fetchall() == [
        (1, WORK)]
    assert events(k)[-1]["observed"]["worktree"] == {"present": True, "content": WORK}
    assert k.rebuild().ok and k.audit().findings == []


# --- the write sent ahead with the request's locks (PostgreSQL) --------------------------------


def dispatched_on(dsn: str) -> tuple[MemoryWorld, Kernel]:
    """A kernel on ``dsn`` whose one task ``a`` has its attempt dispatched."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(dsn, world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
              "expected-attempt": 0, "owner": OWNER,
              "mint": hashlib.sha256(TOKEN.encode()).hexdigest()})
    return world, k


def test_a_heartbeat_on_postgresql_sends_its_write_with_its_locks(pg_server):
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world, k = dispatched_on(dsn)
        k.handle(beat(0))
        trips = k.store.conn.round_trips
        assert k.handle(beat(1)) == {"decision": "evidence-only"}
        assert k.store.conn.round_trips - trips == 2     # locks and write; the rest and COMMIT
        trips = k.store.conn.round_trips
        assert k.handle(beat(2, **{"lease-epoch": 2})) == {"decision": "rejected",
                                                            "code": "stale-capability"}
        assert k.store.conn.round_trips - trips == 2
        assert [r[2] for r in rows(k)] == ["beat-0", "beat-1"]
        assert k.rebuild().ok and k.verify_ledger().ok
        k.close()


def test_a_write_sent_ahead_for_a_request_that_does_not_take_it_up_is_rolled_back(k):
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    reused = {**beat(1), "key": "hb0"}                # the key of beat 0, another evidence id
    assert k.handle(reused) == {"decision": "rejected", "code": "idempotency-conflict"}
    assert k.handle(beat(0))["decision"] == "duplicate"
    assert [r[2] for r in rows(k)] == ["beat-0"]
    k.principals.add("w", ["worker"])                 # the kernel is closed from now on
    assert k.handle(beat(3)) == {"decision": "rejected", "code": "not-authenticated"}
    assert [r[2] for r in rows(k)] == ["beat-0"]
    assert k.rebuild().ok and k.verify_ledger().ok


def test_a_written_step_on_postgresql_sends_its_write_with_its_locks_even_over_a_stale_cache(
        pg_server):
    """The step's write goes with the locks; a kernel whose cache another kernel's commit
    made stale reads the record after the write moved it, and applies the step to the
    record as it was before."""
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world, k = dispatched_on(dsn)
        world.repository.write(k.record("a").worktree_id, WORK)
        assert k.record("a").phase == "absent"           # (k's cache, stale from now on)
        other = Kernel(dsn, world.environment())
        assert send(other, "submit", "worker") == {"decision": "applied"}
        assert k.handle({**edge("quiesce", "wrapper"), "expected-phase": "prepared",
                         "expected-revision": 1}) == {"decision": "applied"}
        assert (k.record("a").phase, k.record("a").revision) == ("quiescing", 2)
        other._forget()
        assert other.record("a") == k.record("a")
        assert send(k, "save-work", "wrapper", candidate=WORK, base="main-0") == {
            "decision": "applied"}
        assert send(k, "seal-candidate", "daemon", candidate=WORK) == {"decision": "applied"}
        trips = k.store.conn.round_trips
        assert send(k, "validate", "validator", candidate=WORK, verdict="pass") == {
            "decision": "applied"}
        assert k.store.conn.round_trips - trips == 2     # locks and write; the rest and COMMIT
        assert k.record("a").receipt("validation") == k.record("a").binding
        assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok
        other.close()
        k.close()


# --- the steps that observe the attempt's worktree before their write -------------------------


def test_a_submit_and_a_work_save_are_written_under_what_was_observed_of_the_worktree(
        kw, monkeypatch):
    """Without their worktree a submit is stale and a WorkSave finds nothing to capture: each
    refusal is read from the stored facts and the observation its statement compared; with
    it, the row moves, the WorkSave's pin is made and its facts are recorded, and neither
    runs the guard list."""
    k, world = kw
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: (_ for _ in ()).throw(AssertionError("the guard list ran")))
    wt = k.record("a").worktree_id
    world.repository.remove_worktree(wt)
    assert send(k, "submit", "worker", key="s1") == {"decision": "rejected",
                                                    "code": "stale-capability"}
    assert phase_of(k) == ("absent", 0)
    world.repository.create_worktree(wt, WORK, "main-0")
    world.repository.write(wt, WORK)
    assert send(k, "submit", "worker", key="s2", deadline=77) == {"decision": "applied"}
    assert phase_of(k) == ("prepared", 1) and k.record("a").deadline == 77
    assert send(k, "quiesce", "wrapper") == {"decision": "applied"}
    world.repository.remove_worktree(wt)
    assert send(k, "save-work", "wrapper", key="w1", candidate=WORK, base="main-0") == {
        "decision": "rejected", "code": "worktree-missing"}
    world.repository.create_worktree(wt, WORK, "main-0")
    world.repository.write(wt, WORK)
    assert send(k, "save-work", "wrapper", key="w2", candidate=WORK, base="main-0") == {
        "decision": "applied"}
    t = k.record("a")
    assert (t.phase, t.saved_work, t.candidate, t.base, t.version) == (
        "work-saved", WORK, WORK, "main-0", 1)
    assert t.receipt("work-save") == t.binding
    pins = k.conn.execute("SELECT ref, content FROM pins").fetchall()
    assert ("worksave/a/f1-v1", WORK) in pins
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok
    k._forget()
    assert k.record("a") == t


def test_a_work_save_in_a_batch_behind_another_request_commits_that_one_first(kw):
    k, world = kw
    to_phase(k, "a", "quiescing")
    t = k.record("a")
    answers = k.handle_batch([
        {**edge("heartbeat", "worker", key="hb"), "evidence": "b1"},
        {**edge("save-work", "wrapper", candidate=WORK, base="main-0"),
         "expected-phase": t.phase, "expected-revision": t.revision}])
    assert answers == [{"decision": "evidence-only"}, {"decision": "applied"}]
    assert k.record("a").phase == "work-saved" and k.rebuild().ok and k.audit().findings == []


def test_without_its_worktree_condition_a_submit_without_a_worktree_is_written(kw, monkeypatch):
    k, world = kw
    world.repository.remove_worktree(k.record("a").worktree_id)
    monkeypatch.setitem(tables.STEP_CONDITIONS, "submit",
                        (" AND " + unbound(1), tables.STEP_CONDITIONS["submit"][1]))
    assert send(k, "submit", "worker") == {"decision": "applied"}
    assert k.record("a").phase == "prepared"


def test_without_its_worktree_condition_a_work_save_seen_without_a_worktree_moves_the_row(
        kw, monkeypatch):
    """The statement is what refuses a WorkSave whose worktree was observed absent: with that
    observation bound it moves nothing; without its conditions it moves the row."""
    from wgk.impl.contract.wire import parse
    k, world = kw
    to_phase(k, "a", "quiescing")
    t = k.record("a")
    r = parse({**edge("save-work", "wrapper", candidate=WORK, base="main-0"),
               "expected-phase": t.phase, "expected-revision": t.revision})
    tid = k.task_id("a")

    def moved() -> bool:
        with k.store.atomic("probe") as unit:
            done = k.tables.step_if_current(tid, r, "work-saved", {"quiescing"}, (None, None))
            unit.abandon()
        return done
    assert moved() is False
    monkeypatch.setitem(tables.STEP_CONDITIONS, "save-work",
                        (" AND " + unbound(4), tables.STEP_CONDITIONS["save-work"][1]))
    assert moved() is True
    k._forget()
    assert k.record("a").phase == "quiescing"            # (the unit was abandoned)


# --- a dispatch, decided by the write that opens its attempt ----------------------------------

MINT = hashlib.sha256(TOKEN.encode()).hexdigest()


def dispatch(task: str, key: str, expected: int, **fields) -> dict:
    return {"kind": "dispatch", "actor": "daemon", "task": task, "key": key,
            "expected-attempt": expected, "owner": OWNER, "mint": MINT, **fields}


@pytest.fixture
def kd(where):
    """A kernel whose task ``b`` depends on ``a`` and whose task ``s`` requires an assignment;
    nothing dispatched yet; the guard list is not expected to run."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where, world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",)),
                         TaskPolicy("s", requires_assignment=True)])
    yield k, world
    k.close()


def journaled(k: Kernel, key: str) -> bool:
    return k.conn.execute("SELECT 1 FROM journal WHERE key = ?", (key,)).fetchone() is not None


def test_a_dispatch_opens_its_attempt_by_its_write_and_is_refused_from_the_stored_facts(
        kd, monkeypatch):
    k, world = kd
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: (_ for _ in ()).throw(AssertionError("the guard list ran")))
    assert k.handle(dispatch("a", "d1", 1)) == {"decision": "rejected", "code": "cas-moved"}
    assert k.record("a").attempt == 0 and journaled(k, "d1")
    assert k.handle(dispatch("b", "d2", 0)) == {"decision": "rejected",
                                                "code": "dependency-not-done"}
    assert k.handle(dispatch("s", "d3", 0)) == {"decision": "rejected",
                                                "code": "assignment-required"}
    assert not journaled(k, "d2") and not journaled(k, "d3")     # holds: the keys stay free
    assert k.handle(dispatch("a", "d4", 0, imports="w9")) == {"decision": "rejected",
                                                              "code": "nothing-retained"}
    assert k.handle(dispatch("a", "d5", 0)) == {"decision": "applied"}
    t = k.record("a")
    assert (t.attempt, t.fence, t.lease_epoch, t.attempt_state, t.worktree_id) == (
        1, 1, 1, "running", "a/f1")
    assert world.repository.observe_worktree("a/f1").present
    assert k.handle(dispatch("a", "d6", 1)) == {"decision": "rejected", "code": "attempt-live"}
    assert k.handle(dispatch("a", "d5", 0))["decision"] == "duplicate"
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok
    k._forget()
    assert k.record("a") == t


def test_a_dispatch_once_its_dependency_is_done_opens_by_its_write(kd, monkeypatch):
    k, world = kd
    assert k.handle(dispatch("a", "d-a", 0)) == {"decision": "applied"}
    world.repository.write(k.record("a").worktree_id, WORK)
    to_phase(k, "a", "graph-saved")
    monkeypatch.setattr(kernel_module, "decide",
                        lambda ctx: (_ for _ in ()).throw(AssertionError("the guard list ran")))
    assert k.handle(dispatch("b", "d-b", 0)) == {"decision": "applied"}
    assert k.record("b").running and k.rebuild().ok and k.audit().findings == []


def test_a_dispatch_in_a_batch_behind_another_request_commits_that_one_first(kd):
    k, world = kd
    answers = k.handle_batch([dispatch("a", "d-a", 0), dispatch("s", "d-s", 0),
                              {"kind": "assign", "actor": "daemon", "task": "s", "key": "as"},
                              dispatch("s", "d-s2", 0)])
    assert answers == [{"decision": "applied"},
                       {"decision": "rejected", "code": "assignment-required"},
                       {"decision": "applied"}, {"decision": "applied"}]
    assert k.record("s").running and k.record("a").running and k.rebuild().ok


def test_without_the_statements_conditions_a_stale_dispatch_opens_a_second_attempt(
        kd, monkeypatch):
    k, world = kd
    assert k.handle(dispatch("a", "d1", 0)) == {"decision": "applied"}
    unconditional = (tables.OPEN_IF_ADMITTED.split(" WHERE ")[0] + " WHERE id = ? AND "
                     + unbound(4))
    monkeypatch.setattr(tables, "OPEN_IF_ADMITTED", unconditional)
    assert k.handle(dispatch("a", "d2", 0)) == {"decision": "applied"}   # stale, and live
    assert k.record("a").fence == 2


def events(k: Kernel) -> list[dict]:
    import json
    return [json.loads(b) for (b,) in k.conn.execute(
        "SELECT body FROM ledger WHERE event = 'request' ORDER BY seq")]


def test_a_written_refusal_records_what_the_guard_list_would_have_observed(kd):
    """A refusal records the observations the contract's conditions read up to the one that
    refuses, not what the statement was given: a dispatch refused cas-moved records the time
    it was due at, a submit refused by its K records nothing of its worktree."""
    k, world = kd
    assert k.handle(dispatch("a", "d1", 1)) == {"decision": "rejected", "code": "cas-moved"}
    assert "now" in events(k)[-1]["observed"]
    assert k.handle(dispatch("a", "d2", 0)) == {"decision": "applied"}
    assert set(events(k)[-1]["observed"]) == {"now", "target"}
    stale = {**edge("submit", "worker"), "expected-phase": "absent", "expected-revision": 0}
    stale["cap"] = {**stale["cap"], "fence": 9}
    assert k.handle(stale) == {"decision": "rejected", "code": "stale-capability"}
    assert "observed" not in events(k)[-1]


def test_a_submit_and_a_work_save_on_postgresql_send_their_write_with_their_locks(pg_server):
    """What a submit or a WorkSave observed of the worktree goes with its statement in the
    round trip of the request's locks; the request takes that statement's answer up."""
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world, k = dispatched_on(dsn)
        world.repository.write(k.record("a").worktree_id, WORK)
        k.record("a")                                    # (the record in the cache)
        trips = k.store.conn.round_trips
        assert send(k, "submit", "worker") == {"decision": "applied"}
        assert k.store.conn.round_trips - trips == 2     # locks and write; the rest and COMMIT
        assert send(k, "quiesce", "wrapper") == {"decision": "applied"}
        trips = k.store.conn.round_trips
        assert send(k, "save-work", "wrapper", key="w0", candidate="other", base="main-0") == {
            "decision": "rejected", "code": "candidate-mismatch"}
        assert k.store.conn.round_trips - trips == 2
        trips = k.store.conn.round_trips
        assert send(k, "save-work", "wrapper", candidate=WORK, base="main-0") == {
            "decision": "applied"}
        assert k.store.conn.round_trips - trips == 2
        assert k.record("a").saved_work == WORK
        assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok
        k.close()


def test_a_submit_sent_ahead_over_a_stale_cache_looks_at_the_attempts_worktree_again(pg_server):
    """Another kernel failed the attempt and dispatched the next: this kernel's cache still
    names the old attempt's worktree, which its write sent ahead compared; the write did not
    happen, and the submit is decided again on the worktree the stored record names."""
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world, k = dispatched_on(dsn)
        assert k.record("a").worktree_id == "a/f1"       # (k's cache, stale from now on)
        other = Kernel(dsn, world.environment())
        assert other.handle({**edge("fail", "worker"), "failure": "provider",
                             "evidence": "x"})["decision"] == "applied"
        assert other.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d2",
                             "expected-attempt": 1, "owner": OWNER,
                             "mint": hashlib.sha256(TOKEN.encode()).hexdigest()}) == {
            "decision": "applied"}
        second = {"graph": "g", "task": "a", "generation": 0, "attempt": 2, "fence": 2,
                  "lease-epoch": 2}
        answer = k.handle({**edge("submit", "worker"), "cap": second, "expected-phase": "absent",
                           "expected-revision": 0})
        assert answer == {"decision": "applied"}
        assert (k.record("a").fence, k.record("a").phase) == (2, "prepared")
        assert k.rebuild().ok and k.audit().findings == []
        other.close()
        k.close()


def test_a_new_tasks_policy_is_known_without_a_read_and_equals_the_stored_one(where):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where, world.environment())
    k.create_graph("g", [TaskPolicy("a-b"), TaskPolicy("ab"), TaskPolicy("a_c")])
    k.add_tasks([TaskPolicy("x", deps=("ab", "a_c", "a-b"), review_required=True,
                            requires_assignment=True, disposition="report")])
    known = {n: k.cache.known_policy(n) for n in ("a-b", "ab", "a_c", "x")}
    assert known["x"].deps == ("a-b", "a_c", "ab")
    k._forget()
    assert {n: k.policy(n) for n in known} == known      # as the tables give it back
    k.close()


def test_a_dispatch_and_a_prepare_effect_on_postgresql_send_their_write_with_their_locks(
        pg_server):
    """Both read their dependencies' rows: those are locked shared ahead of the request
    too, then the write; one round trip for the locks and the write, one for the rest and
    COMMIT."""
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world = MemoryWorld.create(target="main-0")
        k = Kernel(dsn, world.environment())
        k.create_graph("g", [TaskPolicy("d"), TaskPolicy("x", deps=("d",))])
        assert k.handle(dispatch("d", "dd", 0))["decision"] == "applied"
        world.repository.write(k.record("d").worktree_id, WORK)
        to_phase(k, "d", "graph-saved")
        trips = k.store.conn.round_trips
        assert k.handle(dispatch("x", "dx", 0)) == {"decision": "applied"}
        assert k.store.conn.round_trips - trips == 2
        world.repository.write(k.record("x").worktree_id, "work-x")
        to_phase(k, "x", "disposition-recorded", "work-x")
        trips = k.store.conn.round_trips
        assert send(k, "prepare-effect", "promoter", "x") == {"decision": "applied"}
        assert k.store.conn.round_trips - trips == 2
        t = k.record("x")
        k._forget()
        assert k.record("x") == t and k.rebuild().ok and k.audit().findings == []
        k.close()


def test_a_dispatch_sent_ahead_over_a_stale_cache_is_decided_again_on_the_stored_rows(
        pg_server):
    """Another kernel's commit makes the cache stale after the dispatch's write went ahead:
    the counters it moved are taken back, the record is read, and the dispatch decided
    again, once; a dispatch the stored rows refuse is refused and writes nothing."""
    from wgk.impl.storage import pg
    with pg.scratch_schema(pg_server, "wgk_written") as dsn:
        world = MemoryWorld.create(target="main-0")
        k = Kernel(dsn, world.environment())
        k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])
        assert k.record("a").attempt == 0                 # (cached: stale from now on)
        taken_back: list[int] = []
        open_back = k.tables.open_back
        k.tables.open_back = lambda tid: taken_back.append(tid) or open_back(tid)
        other = Kernel(dsn, world.environment())
        assert other.handle(dispatch("b", "db", 0)) == {"decision": "applied"}
        trips = k.store.conn.round_trips
        assert k.handle(dispatch("a", "da", 0)) == {"decision": "applied"}
        assert taken_back == [k.task_id("a")] and k.store.conn.round_trips - trips > 2
        t = k.record("a")
        assert (t.attempt, t.fence, t.lease_epoch) == (1, 1, 1)
        k._forget()
        assert k.record("a") == t
        assert other.handle(dispatch("b", "db2", 0))["decision"] == "rejected"
        assert k.handle(dispatch("a", "da2", 0)) == {"decision": "rejected", "code": "cas-moved"}
        assert taken_back == [k.task_id("a")]             # (nothing moved: nothing taken back)
        k._forget()
        assert k.record("a") == t
        assert k.rebuild().ok and k.audit().findings == [] and k.verify_ledger().ok
        other.close()
        k.close()


EFFECT_AND_CLEANUP = ("prepare-effect", "commit-effect", "prepare-cleanup", "commit-cleanup")


def effect_and_cleanup_story(where: str, tmp: str) -> list[str]:
    """A completion whose effect and cleanup edges are refused once each on the way (a moved
    target, unsaved bytes, a stale K) and then applied; the ledger's request bodies."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(where if where.startswith("postgresql") else tmp, world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    assert k.handle(dispatch("a", "d", 0))["decision"] == "applied"
    wt = k.record("a").worktree_id
    world.repository.write(wt, WORK)
    to_phase(k, "a", "effect-prepared")
    world.repository.move_target("main-1")
    assert send(k, "commit-effect", "promoter", key="c1", candidate=WORK,
                base="main-0")["code"] == "cas-moved"
    world.repository.move_target("main-0")
    stale = edge("prepare-cleanup", "cleanup", key="p1")
    stale["cap"]["fence"] = 2
    for request, code in [
            (edge("commit-effect", "promoter", key="c2", candidate=WORK, base="main-0"), None),
            (stale, "stale-capability"), (edge("prepare-cleanup", "cleanup", key="p2"), None),
            (edge("commit-cleanup", "cleanup", key="x1"), "worktree-unsaved"),
            (edge("commit-cleanup", "cleanup", key="x2"), None),
            (edge("save-graph", "daemon", key="g"), None)]:
        if request["key"] == "x1":
            world.repository.write(wt, "unsaved")
        if request["key"] == "x2":
            world.repository.write(wt, WORK)
        t = k.record("a")
        answer = k.handle({**request, "expected-phase": t.phase, "expected-revision": t.revision})
        assert answer.get("code") == code, (request, answer)
    assert k.record("a").graph_saved
    bodies = [b for (b,) in k.conn.execute(
        "SELECT body FROM ledger WHERE event = 'request' ORDER BY seq")]
    k.close()
    return bodies


def test_the_effect_and_cleanup_edges_write_the_ledger_the_guard_list_writes(
        where, tmp_path, monkeypatch):
    """Decided by their writes or by the guard list, the same requests leave the same ledger
    bodies, byte for byte: the changes, the facts and what was observed."""
    written = effect_and_cleanup_story(where, str(tmp_path / "written.db"))
    for kind in EFFECT_AND_CLEANUP:
        monkeypatch.delitem(WRITTEN_STEPS, kind)
    if where.startswith("postgresql"):
        from wgk.impl.storage import pg
        with pg.scratch_schema(server(), "wgk_written") as dsn:
            guarded = effect_and_cleanup_story(dsn, "")
    else:
        guarded = effect_and_cleanup_story(where, str(tmp_path / "guarded.db"))
    assert len(written) == len(guarded) and written == guarded
