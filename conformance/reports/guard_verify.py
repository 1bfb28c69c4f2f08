"""A guard marker counts only if disabling the guard makes a check fail.

For every ``# guards: <id>`` marker in ``impl/`` (``tracematrix.guards``) the guarded
statement is disabled in a copy of the implementation, with the machinery of the
implementation mutants (``oracle.impl_mutants``: an exact-text patch of a copy, run in
a child process): an ``if`` guard's condition becomes ``False`` (the guard never
fires), a condition's ``return`` (``CONDITION_MODULES``) becomes ``return True``
(the condition always holds), unless ``DISABLE`` says how to disable that statement (a guard whose
effect is not a condition: a fence bound, a compare-and-swap's expected value, a
filter). The gate's sections that run the implementation then run on the copy (and
the pytest node ids ``GUARD_TESTS`` names for the marker, for a guard only a real
backend exercises). A marker whose disabled guard every check still passes guards
nothing the checks can see; a marker that cannot be disabled mechanically is
reported too.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from wgk.conformance.oracle.impl_mutants import Patch, apply_patch, impl_root
from wgk.conformance.reports.gate_report import Check
from wgk.conformance.reports.impl_mutants import run_patches
from wgk.conformance.reports.tracematrix import ROOT, Guard, guards

#: How to disable a guarded statement that is not a plain ``if`` guard (or whose ``if``
#: does an action when it holds): keyed by (file under impl/, the statement's first line,
#: stripped), an exact replacement inside that statement.
DISABLE: dict[tuple[str, str], tuple[str, str]] = {
    ("storage/records.py", "return Binding(self.tasks.fence, self.transactions.candidate, self.transactions.base)"):
        ("Binding(self.tasks.fence,", "Binding(1,"),
    ("storage/records.py", 'return (self.transactions.phase == "graph-saved" and self.transactions.exit == "none"'):
        ('self.transactions.phase == "graph-saved" and self.transactions.exit == "none"',
         'self.transactions.phase == "graph-saved" or True'),
    ("decisions/decision.py", "return t.owner_birth != 0 and self.birth_of(t.owner_pid) == t.owner_birth"):
        ("self.birth_of(t.owner_pid) == t.owner_birth", "self.birth_of(t.owner_pid) is not None"),
    ("decisions/decision.py", "fence = t.fence + 1"): ("fence = t.fence + 1", "fence = t.fence"),
    ("decisions/decision.py", "return replace("): ("imported=r.imports,", "imported=None,"),
    ("world/git.py", 'p = self.git("update-ref", full, content, self.zero, check=False)'):
        ("full, content, self.zero, check=False", "full, content, check=False"),
    ("world/git.py", 'p = self.git("update-ref", "--create-reflog", "-m", f"wgk-effect {effect}",'):
        ("self.target_ref, candidate, base, check=False", "self.target_ref, candidate, check=False"),
    ("world/git.py", 'p = self.git("update-ref", "-m", f"wgk-effect {effect} {disposition}", full, candidate,'):
        ("full, candidate,\n                     self.zero, check=False", "full, candidate, check=False"),
    ("storage/tables.py", "c.execute(STAMP, (task_id, stamp))"):
        ("c.execute(STAMP, (task_id, stamp))",
         'c.execute("UPDATE transactions SET stamp = stamp + 1 WHERE task = ? AND ? >= 0", (task_id, stamp))'),
    ("storage/tables.py", 'self.conn.execute("INSERT OR IGNORE INTO evidence VALUES (?, ?, ?, ?, ?)",'):
        ("INSERT OR IGNORE", "INSERT OR REPLACE"),
    ("front/principals.py", 'return key if who is None else f"{who.name}/{key}"'):
        ('key if who is None else f"{who.name}/{key}"', "key"),
    ("decisions/projection.py", "return t.graph_saved"): ("return t.graph_saved", "return t.graph_saved or t.legacy_done"),
    ("front/kernel.py", 'return [n for n in candidates if planned[n] is not None and planned[n].action == "dispatch"]'):
        ('if planned[n] is not None and planned[n].action == "dispatch"', ""),
    ("decisions/attempts.py", 'return ctx.record.attempt != 0 and ctx.record.attempt_state in ("failed", "lost")'):
        ("ctx.record.attempt != 0 and ", ""),
    ("decisions/receipt.py", "return ctx.record.completion_receipt is None"):
        ("ctx.record.completion_receipt is None", "True"),
    ("decisions/planner.py", "_CONDITIONS = {"):
        ('"declare-lost": "watching = 1 AND seen = \'dead\' AND (continues = 0 OR reopening = 1)",',
         '"declare-lost": "1 = 0",'),
    ("decisions/receipt.py", "return succeeded(ctx, replace(ctx.record, completion_receipt=ctx.request.candidate))"):
        ("completion_receipt=ctx.request.candidate)",
         'completion_receipt=ctx.request.candidate, attempt_state="succeeded")'),
    ("decisions/transaction.py", 'return {"saved_work": view.content, "candidate": ctx.request.candidate, "base": t.base_hint,'):
        ('"saved_work": view.content', '"saved_work": t.origin'),
    ("decisions/transaction.py", "if not happened:"): ("if not happened:", "if True:"),
    ("decisions/routes.py", 'return {"route": r.route, "route_unavailable": True, "probe_at": r.deadline}'):
        ('"route_unavailable": True', '"route_unavailable": ctx.record.route_unavailable'),
    ("decisions/transaction.py", 'return SideExit("needs-repair", "target-moved",'):
        ('"needs-repair", "target-moved"', "ctx.record.exit, ctx.record.reason"),
    ("decisions/evidence.py", 'return {"owner_seen": suspect(t)} if t.running else {}'):
        ("suspect(t)", '"dead"'),
    ("decisions/evidence.py", 'seen = {"owner_seen": "live" if alive else "dead"}'):
        ('"live" if alive else "dead"', '"dead"'),
    ("decisions/attempts.py", "first = t.running and not t.reserved"):
        ("first = t.running and not t.reserved", "first = t.running"),
    ("front/audit.py", "for effect, name, candidate, base in kernel.conn.execute("):
        ("lost = [c for c in (candidate, base) if c and not descends(target, c)]", "lost = []"),
    ("front/kernel.py", "return decision(DUPLICATE, original=json.loads(response))"):
        ("original=json.loads(response)", "original=None"),
    ("front/kernel.py", "if outcome.changes_state and outcome.effects:"):
        ("if outcome.changes_state and outcome.effects:", "if outcome.effects:"),
    ("front/kernel.py", "if outcome.changes_state:"): ("if outcome.changes_state:", "if True:"),
    ("storage/tables.py", "written = self.conn.execute(REPORT_IF_CURRENT, params).rowcount == 1"):
        ("self.conn.execute(REPORT_IF_CURRENT, params).rowcount == 1", "True"),
    ("storage/tables.py", "moved = self.conn.execute(sql, params).rowcount == 1"):
        ("self.conn.execute(sql, params).rowcount == 1", "True"),
    ("world/git.py", "return ([safe(head)] if kind else []) + [safe(task), safe(leaf)]"):
        ("[safe(task), safe(leaf)]", "[task, leaf]"),
    ("world/git.py", "lost = self.uncaptured(wt)"): ("self.uncaptured(wt)", "[]"),
    ("decisions/graph.py", 'bad = names.describe("task", s.name)'): ('names.describe("task", s.name)', "None"),
    ("decisions/review.py", 'return t.review_phase == "done"'): ('t.review_phase == "done"', "False"),
    ("decisions/review.py", "kept = {k: v for k, v in changed(t, new).items() if k in VALVE_COLUMNS}"):
        (" if k in VALVE_COLUMNS}", "}"),
    ("decisions/review.py", 'return _write(ctx, replace(t, review_phase="working", review_failure="none", **fields,'):
        ("**_NO_REVIEWS, **_NO_PUBLICATION), same)", "**_NO_PUBLICATION), same)"),
    ("decisions/review.py", 'return _write(ctx, replace(t, review_phase="published", publication=t.manifest,'):
        ("publications=1)", "publications=t.publications + 1)"),
}

#: Pytest node ids that also count for a marker (a guard only a real backend exercises),
#: keyed like ``DISABLE``.
GUARD_TESTS: dict[tuple[str, str], tuple[str, ...]] = {
    # defence in depth: no valve rule writes outside the valve's columns, so the write is
    # checked with one that tries
    ("decisions/review.py", "kept = {k: v for k, v in changed(t, new).items() if k in VALVE_COLUMNS}"): (
        "tests/test_impl_review.py::test_a_valve_write_never_reaches_the_attempt_or_its_transaction",),
    # defence in depth: the phase order keeps these states out of every request sequence, so
    # the decision is checked on them directly
    ("decisions/transaction.py", 'return t.receipt("review") == t.binding'): (
        "tests/test_impl_rules_contract.py::"
        "test_an_effect_without_the_review_of_its_exact_candidate_is_refused",),
    ("decisions/transaction.py", "return all(t.receipt(k) == t.binding for k in SAVE_GRAPH_NEEDS)"): (
        "tests/test_impl_rules_contract.py::test_a_graph_save_missing_a_receipt_is_refused",),
    # the repository's own compare-and-swap stands behind it and answers with the same code
    ("decisions/transaction.py",
     'return o.effect_happened(t) or t.disposition != "land" or o.target() == t.base'): (
        "tests/test_impl_rules_contract.py::"
        "test_a_land_from_a_base_the_target_left_is_refused_before_any_effect",),
    # the repository's removal check stands behind this one: the tests see the rule's code go
    ("decisions/transaction.py", "return not view.present or (view.content == t.saved_work and not "
                       "ctx.observe.uncaptured(t))"): (
        "tests/test_impl_kernel.py::test_a_missing_or_changed_worktree_is_refused_under_its_own_code",
        "tests/test_impl_git_ignored.py::"
        "test_cleanup_refuses_ignored_bytes_written_after_the_worksave"),
    ("decisions/transaction.py", "return ctx.request.base == ctx.observe.target()"): (
        "tests/test_impl_git_history.py::"
        "test_a_revision_lands_only_when_it_descends_from_the_moved_target",),
    ("decisions/planner.py", "if len(ways) != 1:"): (
        "tests/test_impl_planner.py::test_two_ways_at_once_is_a_named_hold",
        "tests/test_impl_planner.py::test_no_way_at_all_is_a_named_hold"),
    ("storage/tables.py", "written = self.conn.execute(REPORT_IF_CURRENT, params).rowcount == 1"): (
        "tests/test_impl_written_decisions.py::"
        "test_a_heartbeat_is_written_under_its_conditions_and_refused_from_the_stored_facts",),
    ("storage/tables.py", "moved = self.conn.execute(sql, params).rowcount == 1"): (
        "tests/test_impl_written_decisions.py::"
        "test_a_plain_step_moves_its_row_under_its_conditions_and_only_then",),
    ("storage/tables.py", "c.execute(STAMP, (task_id, stamp))"): (
        "tests/test_impl_conditional_writes.py::"
        "test_a_decision_on_stale_facts_is_made_again_on_the_stored_ones",
        "tests/test_impl_conditional_writes.py::"
        "test_races_without_row_locks_keep_one_winner_by_the_writes_conditions"),
    ("world/git.py", "return ([safe(head)] if kind else []) + [safe(task), safe(leaf)]"): (
        "tests/test_impl_git_names.py::"
        "test_refs_and_worktrees_of_names_that_once_clashed_are_disjoint_on_real_git",),
    ("world/git.py", "lost = self.uncaptured(wt)"): (
        "tests/test_impl_git_ignored.py::test_cleanup_refuses_ignored_bytes_written_after_the_worksave",
        "tests/test_impl_git_names.py::test_cleanup_never_removes_a_worktree_holding_another"),
    ("world/git.py", "if not self.ignored_files(wt):"): (
        "tests/test_impl_git_ignored.py::test_a_clean_worktree_without_ignored_files_pins_nothing_more",),
    ("decisions/graph.py", 'bad = names.describe("task", s.name)'): (
        "tests/test_impl_git_names.py::"
        "test_every_bad_name_is_refused_at_task_add_on_a_real_repository",),
}


@dataclass
class GuardVerdict:
    guard: Guard
    verdict: str                    # "guards" | "guards-nothing" | "cannot-disable" | "error"
    statement: str
    by: str = ""                    # the section and check (or test) that failed
    detail: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"path": self.guard.path, "line": self.guard.line, "function": self.guard.function,
                "ids": list(self.guard.ids), "statement": self.statement, "verdict": self.verdict,
                "by": self.by, "detail": self.detail, "seconds": round(self.seconds, 2)}

    def describe(self) -> str:
        where = f"{self.guard.path}:{self.guard.line - 1} ({', '.join(self.guard.ids)})"
        if self.verdict == "guards":
            return f"guards   {where}: disabled, {self.by} fails"
        if self.verdict == "guards-nothing":
            return f"NOTHING  {where}: disabled, every check still passes ({self.statement})"
        return f"{self.verdict.upper()} {where}: {self.detail}"


def _statement(tree: ast.AST, line: int) -> ast.stmt:
    return min((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line),
               key=lambda n: n.col_offset)


def disabling_patch(g: Guard, root: Path | None = None) -> tuple[Patch | None, str, str]:
    """(the patch that disables the guard, the statement's first line, why not if None)."""
    rel = str(Path(g.path).relative_to("impl"))
    source = (root or impl_root()).joinpath(rel).read_text()
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    node = _statement(tree, g.line)
    head = lines[g.line - 1].strip()
    text = "".join(lines[node.lineno - 1:node.end_lineno])
    at = _offsets(lines)
    override = DISABLE.get((rel, head))
    if override is not None:
        old, new = override
        if text.count(old) != 1:
            return None, head, f"the DISABLE entry's text occurs {text.count(old)} times in the statement"
        return _unique(rel, source, lines, g, at(node.lineno, 0), text,
                       text.replace(old, new)), head, ""
    if rel in CONDITION_MODULES and isinstance(node, ast.Return) and _condition(tree, node):
        begin = at(node.lineno, node.col_offset)
        end = at(node.end_lineno, node.end_col_offset)
        return _unique(rel, source, lines, g, begin, source[begin:end], "return True"), head, ""
    if isinstance(node, ast.If):
        begin = at(node.lineno, node.col_offset)
        start, end = at(node.test.lineno, node.test.col_offset), at(node.test.end_lineno,
                                                                     node.test.end_col_offset)
        colon = source.index(":", end) + 1
        new = source[begin:start] + "False" + source[end:colon]
        return _unique(rel, source, lines, g, begin, source[begin:colon], new), head, ""
    return None, head, (f"a {type(node).__name__} statement: add how to disable it to "
                        "guard_verify.DISABLE")


#: Modules whose functions annotated ``-> bool`` are conditions of a write: true when the
#: write may be made (``transaction.Condition``).
CONDITION_MODULES = frozenset({"decisions/attempts.py", "decisions/evidence.py", "decisions/transaction.py", "decisions/holds.py",
                               "decisions/archive.py", "decisions/waits.py", "decisions/generations.py",
                               "decisions/review.py", "decisions/routes.py"})


def _condition(tree: ast.AST, node: ast.Return) -> bool:
    """``node`` returns a condition's value (disabled, the condition always holds)."""
    return any(isinstance(f, ast.FunctionDef) and isinstance(f.returns, ast.Name)
               and f.returns.id == "bool" and f.lineno <= node.lineno <= f.end_lineno
               for f in ast.walk(tree))


def _unique(rel: str, source: str, lines: list[str], g: Guard, begin: int, old: str,
            new: str) -> Patch:
    """The patch ``old -> new`` at ``begin``, its anchor widened upwards from the marker's
    line until it occurs exactly once in the file."""
    first = g.line - 1                     # the marker's line (1-based)
    while True:
        top = sum(len(x) for x in lines[:first - 1])
        prefix = source[top:begin]
        if source.count(prefix + old) == 1 or first == 1:
            return Patch(rel, prefix + old, prefix + new)
        first -= 1


def _offsets(lines: list[str]) -> Callable[[int, int], int]:
    """(line, ast column in UTF-8 bytes) -> index in the source string."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return lambda n, col: starts[n - 1] + len(lines[n - 1].encode()[:col].decode(errors="ignore"))


def verify_guards(budget: str, sections: list[str], *, traces: list[str] | None = None,
                  only: Callable[[Guard], bool] = lambda g: True,
                  progress: Callable[[int, int, GuardVerdict], None] | None = None,
                  timeout: float = 1800.0) -> list[GuardVerdict]:
    """Disable every marked guard in turn and run the implementation's gate sections."""
    found, _ = guards()
    marks = [g for g in found if only(g)]
    out = []
    for n, g in enumerate(marks, 1):
        patch, head, why = disabling_patch(g)
        if patch is None:
            v = GuardVerdict(g, "cannot-disable", head, detail=why)
        else:
            try:
                apply_patch((impl_root() / patch.path).read_text(), patch, g.path)
            except ValueError as e:
                v = GuardVerdict(g, "cannot-disable", head, detail=str(e))
            else:
                v = _run(g, patch, head, budget, sections, traces, timeout)
        out.append(v)
        if progress:
            progress(n, len(marks), v)
    return out


def _run(g: Guard, patch: Patch, head: str, budget: str, sections: list[str],
         traces: list[str] | None, timeout: float) -> GuardVerdict:
    rel = str(Path(g.path).relative_to("impl"))
    tests = [str(ROOT / t) for t in GUARD_TESTS.get((rel, head), ())]
    r = run_patches(f"disabled {g.path}:{g.line}", (patch,), budget=budget, sections=sections,
                    traces=traces, tests=tests, timeout=timeout, cwd=str(ROOT))
    verdict = {"killed": "guards", "survived": "guards-nothing"}.get(r["verdict"], "error")
    by = f"{r.get('section', '')}: {r.get('check', '')}" if verdict == "guards" else ""
    return GuardVerdict(g, verdict, head, by, r.get("detail", ""), r.get("seconds", 0.0))


def guard_checks(verdicts: list[GuardVerdict]) -> list[Check]:
    """The verification as gate checks, one per marker: it guards (pass), guards nothing or
    cannot be disabled (fail), could not be run (error)."""
    return [Check("verify-guards", f"{v.guard.path}:{v.guard.line - 1} {', '.join(v.guard.ids)}",
                  {"guards": "pass", "error": "error"}.get(v.verdict, "fail"), v.seconds,
                  v.describe(), v.to_json(), group=v.guard.path) for v in verdicts]


def section_checks(budget: str, value, sections_for: Callable[[str], list[str]],
                   step: Callable[[str], None]) -> list[Check]:
    """The gate's verify-guards section: every marker, on the budget ``value`` names."""
    from wgk.conformance.reports.impl_mutants import mutant_budget
    on = mutant_budget(budget, value)
    return guard_checks(verify_guards(on, sections_for(on),
                                      progress=lambda n, total, v: step(v.describe())))


__all__ = ["DISABLE", "guard_checks", "section_checks", "GUARD_TESTS", "GuardVerdict", "disabling_patch", "verify_guards"]
