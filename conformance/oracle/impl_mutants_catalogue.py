"""The catalogue of implementation mutants: realistic bugs planted one at a time in a copy
of ``wgk.impl`` (see ``impl_mutants``), each of which the gate's own sections must catch.

Each entry names its category, the bug in one sentence, the invariant or promise it
breaks and the exact-text patch. A mutant the gate's sections are known not to see
says why in ``survives`` (which section could, or why none can); ``wgk mutants --impl``
measures, and reports a survivor without such a reason as a surprise.
"""
from __future__ import annotations

from dataclasses import replace

from wgk.conformance.oracle.impl_mutants import CATEGORIES, PER_CATEGORY, ImplMutant, Patch
from wgk.conformance.oracle.impl_mutants_kills import KILLED_IN_PROCESS


def _m(name, area, doc, breaks, *patches, survives="", tests=()):
    return ImplMutant(name, area, doc, breaks, tuple(Patch(*p) for p in patches), survives,
                      tuple(tests))


SECRETS = "tests/test_impl_secrets.py::"
#: A dispatch's statement reads every dependency (``tables.OPEN_IF_ADMITTED``); the planted
#: admission bugs read one, the last or the first by name, as the decision's condition does.
_EACH_DEPENDENCY = '"JOIN transactions dx ON dx.task = d.id WHERE e.task = tasks.id AND NOT ("'
_ONE_DEPENDENCY = ('"JOIN transactions dx ON dx.task = d.id WHERE e.task = tasks.id AND d.name = '
                   '(SELECT {}(n.name) FROM edges ne JOIN tasks n ON n.id = ne.dep '
                   'WHERE ne.task = tasks.id) AND NOT ("')

#: A prepare-effect's statement reads its dependencies (``tables.STEP_CONDITIONS``): Done, and
#: none reopened since the attempt opened; the planted bugs take out what their condition does.
_PREPARE_EFFECT = '''"prepare-effect": (_EVERY_DEPENDENCY_DONE + _NO_DEPENDENCY_REOPENED, _no_values),'''

#: Where a bug lives files it under a category by default; ``FILED`` overrides per mutant.
BY_AREA = {"storage": "durability-batching", "concurrency": "durability-batching",
           "git": "git-effects", "processes": "evidence", "planner": "evidence",
           "readiness": "dependency-aggregation", "group-commit": "durability-batching",
           "digests": "durability-batching", "idempotency": "durability-batching",
           "ledger": "stored-history", "audit": "stored-history", "convergence": "evidence",
           "authority": "authority", "files": "file-system"}
FILED = {
    "database-umask-mode": "file-system", "secret-file-world-readable": "file-system",
    "loose-credential-file-read": "file-system", "retries-counted-across-generations": "evidence",
    "ready-by-index": "dependency-aggregation", "dispatch-ignores-pause": "dependency-aggregation",
    "dispatch-onto-open-route": "dependency-aggregation", "failed-probe-closes-route": "evidence",
    "receipt-delete-skipped": "stored-history", "evidence-replaced": "evidence",
    "pg-no-row-locks": "postgresql-concurrency", "pg-dependencies-unlocked": "postgresql-concurrency",
    "pg-deadlock-not-retried": "postgresql-concurrency",
    "digest-omits-capability": "k-exactness", "fence-ignores-lease-epoch": "k-exactness",
    "lease-epoch-lower-bound": "k-exactness", "fence-lower-bound": "k-exactness",
    "capability-task-unchecked": "k-exactness",
    "retry-budget-ignored": "evidence", "semantic-failure-retried": "evidence",
    "dispatch-ignores-wait": "evidence", "delivery-ignores-correlation": "evidence",
    "terminal-report-during-completion": "evidence", "compaction-counted-twice": "evidence",
    "suspect-twice-is-dead": "evidence",
    "reopen-ignores-dependents": "dependency-aggregation",
    "second-completion-receipt-taken": "evidence",
    "effect-on-reopened-dependency": "dependency-aggregation",
    "effect-after-redone-dependency": "dependency-aggregation",
    "reopen-under-prepared-dependent": "dependency-aggregation",
    "validator-may-accept": "authority", "archive-without-confirmation": "authority",
    "archive-on-the-daemons-word": "authority", "effect-without-review": "authority",
    "deliver-role-unchecked": "authority",
    "seal-skips-work-save": "git-effects", "seal-ignores-protected-paths": "git-effects",
    "glob-doublestar-needs-a-segment": "git-effects",
}


#: Why a bug of the PostgreSQL store survives a gate run without a backend (with one,
#: ``wgk mutants --impl --backend DSN``, the races section kills it).
PG_ONLY = ("only the gate's races section on PostgreSQL (`wgk gate --backend DSN`, "
           "`wgk mutants --impl --backend DSN`) can see it; the gate without a backend runs "
           "SQLite only")

_PLANTED: tuple[ImplMutant, ...] = (
    # --- storage -----------------------------------------------------------------------------
    _m("begin-deferred", "storage",
       "a transaction starts with BEGIN DEFERRED, so two writers both read before either "
       "takes the write lock", "single-live-owner (one writer decides at a time)",
       ("storage/store.py", 'self.conn.execute("BEGIN IMMEDIATE")', 'self.conn.execute("BEGIN DEFERRED")')),
    _m("synchronous-off", "storage",
       "the default pragmas turn synchronous off, so a commit is acknowledged before it "
       "reaches the disk", "a committed decision survives a power loss",
       ("storage/store.py", 'synchronous: str = "FULL"', 'synchronous: str = "OFF"')),
    _m("receipt-delete-skipped", "storage",
       "saving a record never deletes a receipt row the record dropped, so a reload after a "
       "restart resurrects receipts of an earlier candidate version",
       "the tables hold exactly the record (rebuild equals the live tables)",
       ("storage/tables.py", '                    c.execute("DELETE FROM receipts WHERE task = ? AND kind = ?", '
                     '(task_id, name))',
        '                    pass')),
    _m("evidence-replaced", "storage",
       "evidence is written with INSERT OR REPLACE, so a repeated occurrence overwrites the "
       "first one's counted flag and sequence", "compaction-occurrences-counted-once",
       ("storage/tables.py", '"INSERT OR IGNORE INTO evidence VALUES', '"INSERT OR REPLACE INTO evidence VALUES')),
    _m("database-umask-mode", "storage",
       "the SQLite database is left for SQLite to create, with the mode the umask gives "
       "(0644 under umask 022), so every local user reads the ledger, the journal and the "
       "principals' secret hashes", "the database is readable by its owner only",
       ("storage/store.py", '        if path != ":memory:" and not path.startswith("file:"):\n'
                    '            create_private(path)\n', ""),
       tests=[SECRETS + "test_the_database_and_its_log_files_are_created_0600_whatever_the_umask"]),
    _m("cli-kernel-synchronous-normal", "storage",
       "the command line opens its kernel with synchronous NORMAL (WAL's usual speed "
       "setting), so an answer `wgk kernel` printed can be lost in a power loss while the "
       "library's own connection stays FULL", "a committed decision survives a power loss "
       "(the durability settings of every connection the kernel opens)",
       ("cli/kernel_open.py", "from ..front.kernel import Kernel\n",
        "from ..front.kernel import Kernel\nfrom ..storage.store import Pragmas\n"),
       ("cli/kernel_open.py", "        return Kernel(path, environment(repo, target, worktrees))",
        '        return Kernel(path, environment(repo, target, worktrees), '
        'pragmas=Pragmas("NORMAL"))')),
    _m("pg-synchronous-commit-off", "storage",
       "on PostgreSQL, every connection sets synchronous_commit off, so the server "
       "acknowledges a commit before its write-ahead log reaches the disk",
       "a committed decision survives a power loss (PostgreSQL)",
       ("storage/pg_conn.py", '        self.raw.execute(f"SET synchronous_commit = {sync}")',
        '        self.raw.execute("SET synchronous_commit = off")'),
       survives=PG_ONLY.replace("races section", "contract section")),
    # --- concurrency -------------------------------------------------------------------------
    _m("caches-never-dropped", "concurrency",
       "the kernel never drops its record caches when another connection committed",
       "every decision reads the committed state (single-live-owner, first-terminal-wins)",
       ("storage/cache.py", "        v = self.store.data_version()\n        if v != self.version:",
        "        v = self.store.data_version()\n        if self.version is None:")),
    _m("pg-no-row-locks", "concurrency",
       "the PostgreSQL store takes no row locks, so two transactions decide on the same task "
       "concurrently under READ COMMITTED", "single-live-owner on PostgreSQL",
       ("storage/pg.py", "    row_locks = True", "    row_locks = False"),
       survives=PG_ONLY),
    # --- ledger ------------------------------------------------------------------------------
    _m("ledger-head-cached", "ledger",
       "the ledger keeps its cached head across transactions, so after another connection "
       "appends it links the next event to a stale head",
       "the ledger is one hash chain (every event links to its predecessor)",
       ("storage/ledger.py", '        """Drop the cached head (another connection may have appended)."""\n'
                     "        self._head = None",
        '        """Drop the cached head (another connection may have appended)."""')),
    _m("ledger-links-genesis", "ledger",
       "every ledger event links to the genesis hash instead of its predecessor's hash",
       "the ledger is one hash chain",
       ("storage/ledger.py", "        seq, prev = self.head()\n        seq += 1",
        "        seq, prev = self.head()[0], GENESIS\n        seq += 1")),
    _m("ledger-events-reversed", "ledger",
       "the ledger's events are read newest first, so a rebuild applies them in reverse",
       "the tables can be rebuilt from the ledger",
       ("storage/ledger.py", '"SELECT seq, event, task, key, body FROM ledger WHERE seq > ? ORDER BY seq"',
        '"SELECT seq, event, task, key, body FROM ledger WHERE seq > ? ORDER BY seq DESC"')),
    # --- audit -------------------------------------------------------------------------------
    _m("rebuild-drops-facts", "audit",
       "applying a request event from the ledger (the rebuild path) drops the facts it "
       "recorded, so a rebuilt database lacks evidence, effects and worktrees",
       "the tables can be rebuilt from the ledger",
       ("storage/apply.py", 'changes if changes is not None else body["changes"],\n'
                    '                                body.get("facts", []), record)',
        'changes if changes is not None else body["changes"],\n'
        '                                body.get("facts", []) if record is not None else [], record)')),
    # --- idempotency -------------------------------------------------------------------------
    _m("conflict-answered-as-duplicate", "idempotency",
       "a used key is answered from the journal without comparing the request's digest",
       "idempotency-conflict-holds",
       ("front/kernel.py", "    if digest != r.digest:\n        return decision(REJECTED, "
                       '"idempotency-conflict")',
        "    if False:\n        return decision(REJECTED, \"idempotency-conflict\")")),
    _m("duplicate-decided-again", "idempotency",
       "a re-sent request is decided again instead of being answered from the journal",
       "idempotent-replay",
       ("front/kernel.py", "            if used is not None:\n                return answer_used(r, used)\n"
                       "            with self.store.atomic(r.key) as unit:",
        "            with self.store.atomic(r.key) as unit:")),
    _m("hold-journaled", "idempotency",
       "a 'not yet' rejection (dependency-not-done, assignment-required) is journaled, so "
       "the same key is answered with the stale rejection once the dependency is Done",
       "idempotent-replay (a key's answer is the decision of its request)",
       ("front/kernel.py", '    return response.get("decision") == REJECTED and response.get("code") in UNJOURNALED',
        '    return response.get("decision") == REJECTED and response.get("code") == "bad-name"')),
    _m("keys-not-scoped", "idempotency",
       "journal keys are not scoped by their sender, so one principal can squat another's key",
       "keys-per-principal",
       ("front/principals.py", '    return key if who is None else f"{who.name}/{key}"', "    return key")),
    # --- authority ---------------------------------------------------------------------------
    _m("role-label-trusted", "authority",
       "the actor label is trusted as written: an authenticated worker labelling its requests "
       "validator, evaluator or operator is applied", "role-held",
       ("front/kernel.py", "        if not rc.role_held:",
        "        if False:")),
    _m("token-not-checked", "authority",
       "K alone admits a request of the attempt's own process: the presented capability "
       "token is never compared", "token-required",
       ("decisions/rules.py", "    return capability_failure(ctx) or token_failure(ctx)",
        "    return capability_failure(ctx)")),
    _m("continuation-keeps-token", "authority",
       "a continuation keeps the dead process's token instead of the one minted for it",
       "continuation-needs-token",
       ("decisions/attempts.py", "                  token_hash=ctx.request.mint)",
        "                  token_hash=t.token_hash)")),
    _m("retry-budget-ignored", "rules",
       "a dispatch after a failed or lost attempt never checks the task's retry budget, so a "
       "failing task is retried automatically without limit", "retries-within-budget",
       ("decisions/attempts.py", "    return not _after_failure(ctx) or ctx.record.retries < ctx.policy.retry_budget",
        "    return True"),
       ("storage/tables.py", "OR (failure != 'semantic' AND retries < retry_budget)) ",
        "OR (failure != 'semantic')) ")),
    _m("semantic-failure-retried", "rules",
       "a dispatch after a semantic failure is an automatic retry like any other",
       "semantic-failure-never-auto-retried",
       ("decisions/attempts.py", '    return not _after_failure(ctx) or ctx.record.failure != "semantic"',
        "    return True"),
       ("storage/tables.py", "OR (failure != 'semantic' AND retries < retry_budget)) ",
        "OR (retries < retry_budget)) ")),
    _m("dispatch-ignores-wait", "rules",
       "a dispatch does not look at an external wait: a task parked on human input is "
       "dispatched again before the answer arrives", "no-attempt-while-waiting",
       ("decisions/attempts.py", "    return ctx.record.waiting_on is None", "    return True"),
       ("storage/tables.py", '"AND waiting_on IS NULL AND paused = 0 ', '"AND paused = 0 ')),
    _m("retries-counted-across-generations", "rules",
       "a dispatch after a reset counts the old generation's failed attempt as its own: the new "
       "generation's first dispatch is an automatic retry and can be refused retry-budget-spent",
       "retries-per-generation",
       ("decisions/attempts.py", '    return ctx.record.attempt != 0 and ctx.record.attempt_state in ("failed", "lost")',
        '    return ctx.record.attempt_state in ("failed", "lost")'),
       ("storage/tables.py", '"AND (attempt = 0 OR NOT EXISTS ', '"AND (NOT EXISTS ')),
    _m("ready-by-index", "rules",
       "ready lists every open task whose dependencies are Done: an unassigned, parked, "
       "paused or held task is listed while every dispatch refuses it", "ready-iff-dispatch-admitted",
       ("front/kernel.py", '        return [n for n in candidates if planned[n] is not None and planned[n].action == "dispatch"]',
        "        return candidates")),
    _m("dispatch-ignores-pause", "rules",
       "a dispatch does not look at the operator's pause: a paused task is dispatched",
       "no-attempt-opens-paused-or-early",
       ("decisions/attempts.py", "    return not ctx.record.paused", "    return True"),
       ("storage/tables.py", "AND paused = 0 AND ? >= not_before", "AND ? >= not_before")),
    _m("dispatch-onto-open-route", "rules",
       "a dispatch does not look at the task's provider route: an attempt opens on a route "
       "whose breaker is open", "no-attempt-opens-on-unavailable-route",
       ("decisions/attempts.py", "    return not ctx.record.route_unavailable", "    return True"),
       ("storage/tables.py", "AND ? >= not_before AND route_unavailable = 0 ",
        "AND ? >= not_before ")),
    _m("failed-probe-closes-route", "rules",
       "a route probe's acknowledgment closes the breaker whatever the probe found: a failed "
       "probe makes the route available again", "route-closes-only-on-a-due-succeeded-probe",
       ("decisions/routes.py", "    if r.succeeded:", "    if True:")),
    _m("delivery-ignores-correlation", "rules",
       "any delivery releases a wait, whatever event it names", "wait-left-only-by-its-evidence",
       ("decisions/waits.py", "    if t.waiting_on is None or r.correlation != t.waiting_on:",
        "    if t.waiting_on is None:")),
    _m("second-completion-receipt-taken", "rules",
       "a second completion receipt of the same attempt is taken and replaces the first",
       "completion-receipt-never-lost-or-replaced",
       ("decisions/receipt.py", "    return ctx.record.completion_receipt is None", "    return True")),
    _m("receipt-planned-as-live-owner", "planner",
       "the planner does not read the completion receipt: a receipted completion with an owner "
       "that may be alive is probed as any live owner, its handoff never awaited",
       "receipted-completion-waits-or-resumes",
       ("decisions/planner.py", '''    {_flag("t.completion_receipt IS NOT NULL")} AS receipted,''',
        '''    {_flag("0 = 1")} AS receipted,''')),
    _m("reopen-ignores-dependents", "rules",
       "a reopen never looks at the dependents, so a Done dependency is reopened under a "
       "dependent that is already Done", "reopen-fences-dependents",
       ("decisions/generations.py", "    return not ctx.dependents_committed()", "    return True")),
    _m("effect-on-reopened-dependency", "rules",
       "prepare-effect never looks at the dependencies, so a dependent running when its "
       "dependency was reopened makes its effect on the old generation",
       "reopen-fences-dependents",
       ("decisions/transaction.py", "    return ctx.deps_done() and not ctx.deps_reopened()", "    return True"),
       ("storage/tables.py", _PREPARE_EFFECT, '"prepare-effect": ("", _no_values),')),
    _m("effect-after-redone-dependency", "rules",
       "prepare-effect checks only that the dependencies are Done, so a dependent whose "
       "attempt opened before a reopen makes its effect once the dependency is Done again",
       "reopen-fences-dependents",
       ("decisions/transaction.py", "    return ctx.deps_done() and not ctx.deps_reopened()",
        "    return ctx.deps_done()"),
       ("storage/tables.py", _PREPARE_EFFECT, '"prepare-effect": (_EVERY_DEPENDENCY_DONE, _no_values),')),
    # --- digests -----------------------------------------------------------------------------
    _m("digest-omits-candidate", "digests",
       "the request digest leaves out the candidate, so the same key with another candidate "
       "is a duplicate instead of a conflict", "idempotency-conflict-holds",
       ("contract/wire.py", '    del canonical["key"]\n', '    del canonical["key"]\n'
                                                 '    canonical.pop("candidate", None)\n')),
    _m("digest-omits-capability", "digests",
       "the request digest leaves out the capability, so a re-send under a stale K is "
       "answered as a duplicate", "idempotency-conflict-holds",
       ("contract/wire.py", '    del canonical["key"]\n', '    del canonical["key"]\n'
                                                 '    canonical.pop("cap", None)\n')),
    # --- secrets (no trace carries a file mode, a planted file or a malformed credential) ---
    _m("secret-file-adopted", "authority",
       "a token or credential file is opened without O_EXCL and O_NOFOLLOW, so a file or a "
       "symlink planted at its path beforehand is written through and kept: whoever planted "
       "it reads the secret", "secrets are created, never adopted",
       ("front/secretfile.py", "CREATE_FLAGS = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW",
        "CREATE_FLAGS = os.O_CREAT | os.O_WRONLY | os.O_TRUNC")),
    _m("secret-file-world-readable", "authority",
       "token and credential files are created 0644, readable by every local user",
       "a secret file is readable by its owner only",
       ("front/secretfile.py", "PRIVATE = 0o600", "PRIVATE = 0o644"),
       tests=[SECRETS + "test_a_token_file_is_created_0600_whatever_the_umask_and_holds_the_"
                        "attempts_token"]),
    _m("loose-credential-file-read", "authority",
       "a credential file that group or others may read is used without a word",
       "a secret file open to others is refused (as ssh refuses such a private key)",
       ("front/secretfile.py", "        if st.st_mode & 0o077 and not insecure:",
        "        if False:")),
    _m("surrogate-credential-crashes", "authority",
       "any string with a dot is hashed as a credential, so a lone surrogate in it raises "
       "UnicodeEncodeError out of the request path instead of not-authenticated",
       "a bad credential is an answer (not-authenticated), never a crash",
       ("front/principals.py", '    return sendable(credential) and "." in credential',
        '    return isinstance(credential, str) and "." in credential')),
    # --- group commit ------------------------------------------------------------------------
    _m("batch-effect-behind-uncommitted", "group-commit",
       "in a batch, a request's external effect runs behind requests decided but not yet "
       "committed", "every intent an effect relies on is durable before it happens",
       ("front/kernel.py", "answers.append(self._in_savepoint(rc, may_perform=not answers))",
        "answers.append(self._in_savepoint(rc, may_perform=True))")),
    _m("batch-skips-journal", "group-commit",
       "a batched request is decided without looking up its key in the journal",
       "idempotent-replay in group commit",
       ("front/kernel.py", "            self._lock_and_sync(r)\n            used = self._journal(r.key)",
        "            self._lock_and_sync(r)\n            used = None")),
    # --- git ---------------------------------------------------------------------------------
    _m("land-without-cas", "git",
       "the land updates the target ref without the expected old value (a force update-ref)",
       "cas-base-exact",
       ("world/git.py", "self.target_ref, candidate, base, check=False)",
        "self.target_ref, candidate, check=False)")),
    _m("land-skips-ancestry", "git",
       "the land does not check that the candidate descends from the base",
       "target-history-grows",
       ("world/git.py", "        if not self.descends(candidate, base):\n            raise GitError(f\"land",
        "        if False:\n            raise GitError(f\"land")),
    _m("pin-overwrites", "git",
       "an immutable ref is created without the zero old value, so a second pin overwrites "
       "retained work", "retained-work-never-erased",
       ("world/git.py", 'p = self.git("update-ref", full, content, self.zero, check=False)',
        'p = self.git("update-ref", full, content, check=False)')),
    _m("snapshot-ignores-untracked", "git",
       "the worktree snapshot leaves out untracked files, so a WorkSave of new files saves "
       "the start commit", "worksave-exact (WorkSave captures tracked, deleted and untracked bytes)",
       ("world/git.py", '"--untracked-files=all",\n                          "--ignore-submodules=none"',
        '"--untracked-files=no",\n                          "--ignore-submodules=none"'),
       ("world/git.py", 'self.git("add", "-A", *(["--force"] if ignored else []), ".", cwd=path, env=env)',
        'self.git("add", "-u", *(["--force"] if ignored else []), ".", cwd=path, env=env)')),
    _m("effect-not-reobserved", "git",
       "a land is not re-observed from the target's reflog after a crash, so it is "
       "performed again", "promotion-at-most-once",
       ("world/git.py", '        p = self.git("reflog", "show", "--format=%gs", self.target_ref, "--", '
                  'check=False)\n        if p.returncode != 0:\n            return False',
        "        return False")),
    _m("worktree-through-symlink", "git",
       "the worktree's path is not checked for symlinks, so a symlink planted at "
       "<worktrees>/<task> sends the kernel's git commands, and a worktree, outside the root",
       "worktrees stay under the worktrees root",
       ("world/git.py", "            if os.path.islink(here):", "            if False:")),
    # --- processes ---------------------------------------------------------------------------
    _m("zombie-is-live", "processes",
       "a zombie (exited, not yet reaped) process is counted as a live owner",
       "liveness-needs-exact-birth (a zombie is no owner)",
       ("world/proc.py", 'if state in (b"Z", b"X"):', 'if state in (b"X",):')),
    _m("pid-only-liveness", "processes",
       "an owner is alive when any process holds its pid, whatever its birth time",
       "liveness-needs-exact-birth",
       ("decisions/decision.py", "return t.owner_birth != 0 and self.birth_of(t.owner_pid) == t.owner_birth",
        "return t.owner_birth != 0 and self.birth_of(t.owner_pid) is not None")),
    # --- readiness ---------------------------------------------------------------------------
    _m("readiness-last-dependency", "readiness",
       "the pending-dependency count of a new task counts only its last dependency, so it "
       "is listed ready while an earlier dependency is not Done",
       "dependency-needs-done (ready lists only tasks whose dependencies are all Done)",
       ("storage/apply.py", "        pending += 0 if k.record(d).graph_saved else 1",
        "        pending = 0 if k.record(d).graph_saved else 1")),
    _m("admission-last-dependency", "readiness",
       "dispatch admits a task when its last dependency is Done, whatever the others",
       "dependency-needs-done",
       ("front/kernel.py", "deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps),",
        "deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps[-1:]),"),
       ("storage/tables.py", _EACH_DEPENDENCY, _ONE_DEPENDENCY.format("max"))),
    _m("validator-may-accept", "rules",
       "the implementation's own authority table lets the validator send accept, so a "
       "candidate validated by one role is accepted by the same role",
       "role-held (the vocabulary's authority, written independently of the model's)",
       ("contract/vocabulary.py", '    "accept": frozenset({"evaluator", "daemon"}),',
        '    "accept": frozenset({"evaluator", "daemon", "validator"}),')),
    _m("seal-skips-work-save", "rules",
       "the implementation's own edge table lets seal-candidate start from prepared, "
       "skipping quiesce and the WorkSave", "no-phase-skip",
       ("contract/vocabulary.py", '    "seal-candidate": (frozenset({"work-saved"}), "candidate-sealed"),',
        '    "seal-candidate": (frozenset({"work-saved", "prepared"}), "candidate-sealed"),')),
    # --- planner -----------------------------------------------------------------------------
    _m("planner-dead-owner-live", "planner",
       "the planner still plans an owner proven dead as a live owner",
       "no-dead-owner-in-progress-without-action",
       ("decisions/planner.py", '''"live-owner": "watching = 1 AND receipted = 0 AND seen IN ('unverified', 'live') AND chat = 0",''',
        '''"live-owner": "watching = 1 AND receipted = 0 AND seen IN ('unverified', 'live', 'dead') AND chat = 0",''')),
    _m("planner-ignores-moved-target", "planner",
       "the planner keeps driving a land whose target moved instead of planning the repair",
       "exactly-one-way-forward",
       ("decisions/planner.py", '"running = 1 AND reserved = 1 AND held = 0 AND moved = 0 "',
        '"running = 1 AND reserved = 1 AND held = 0 "')),
    _m("planner-first-of-several", "planner",
       "the planner picks the first of several enabled ways instead of holding fail-closed",
       "exactly-one-way-forward",
       ("decisions/planner.py", "    if len(ways) != 1:\n", "    if not ways:\n"),
       survives=("the ways are exclusive by construction, so no state the gate reaches "
                 "enables two: only a second bug makes this one visible (a guard kept as "
                 "defence in depth)")),
    # --- convergence -------------------------------------------------------------------------
    _m("daemon-never-declares-lost", "convergence",
       "daemon convergence never sends declare-lost for an owner proven dead",
       "no-dead-owner-in-progress-without-action (convergence makes progress)",
       ("front/converge.py", '    if p.action == "declare-lost":\n',
        '    if p.action == "declare-lost" and False:\n')),
    _m("continuation-never-planned", "convergence",
       "the planner never plans a proven same-session continuation: an owner proven dead is "
       "planned as a loss at once, though its session could resume until the deadline",
       "no-dead-owner-in-progress-without-action (a continuation planned until its deadline)",
       ("decisions/planner.py", 'AND env.now < t.deadline")}', 'AND env.now < t.deadline AND 1 = 0")}')),
    _m("converge-one-round", "convergence",
       "convergence stops after one round, leaving a transaction it could drive half-way",
       "convergence reaches its fixpoint",
       ("front/converge.py", "    for _ in range(max_rounds):", "    for _ in range(1):")),
    # --- rules -------------------------------------------------------------------------------
    _m("terminal-report-during-completion", "rules",
       "a failure report terminalizes an attempt whose completion already holds the "
       "terminal reservation", "first-terminal-wins",
       ("decisions/attempts.py", "    first = t.running and not t.reserved", "    first = t.running")),
    _m("fence-ignores-lease-epoch", "rules",
       "the capability check compares generation, attempt and fence but not the lease epoch",
       "attempt-fencing",
       ("decisions/rules.py", "    if (c.generation, c.attempt, c.fence, c.lease_epoch) != \\\n"
                    "            (t.generation, t.attempt, t.fence, t.lease_epoch):",
        "    if (c.generation, c.attempt, c.fence) != \\\n"
        "            (t.generation, t.attempt, t.fence):")),
    _m("compaction-counted-twice", "rules",
       "every compaction report counts as a new occurrence, repeated ids included",
       "compaction-occurrences-counted-once",
       ("decisions/evidence.py", "    return first_of_its_id(ctx)", "    return True")),
    _m("seal-ignores-protected-paths", "rules",
       "sealing never reads the diff against the graph's protected paths, so a candidate "
       "changing one is sealed and the validator's pass takes it on to the land",
       "protected-path-holds",
       ("decisions/transaction.py", "    if held is not None:\n        path, pattern = held",
        "    if False:\n        path, pattern = held")),
    _m("archive-without-confirmation", "rules",
       "the archive does not look for the operator's confirmation of the digest it names, "
       "so a Done task is archived by a digest nobody confirmed", "archive-needs-confirmed-digest",
       ("decisions/archive.py", '    return d is not None and ctx.seen("confirm-archive", d)', "    return True")),
    _m("effect-without-review", "rules",
       "the effect is committed without checking that the review names the exact candidate",
       "promotion-needs-review-of-exact-candidate",
       ("decisions/transaction.py", '    return t.receipt("review") == t.binding', '    return True'),
       ("storage/tables.py", "_NAMES_THE_CANDIDATE_AND_BASE + _REVIEW_BOUND_TO_THE_ATTEMPT",
        "_NAMES_THE_CANDIDATE_AND_BASE"),
       survives=("equivalent on every reachable state (defence in depth): the "
                 "SaveTransaction's phase order admits commit-effect only after an accept that "
                 "wrote the review receipt of the same binding (and revise clears every "
                 "receipt); z3 proves it: no state satisfying the proved invariants and lemmas "
                 "gets review-required from commit-effect (the coverage cell "
                 "commit-effect/outcome/rejected:review-required, wgk.conformance.z3.unreachable)"
                 "; only a second bug (a skipped phase edge) makes it visible")),
    # --- issue 33: the guards added last round, planted as a bug-maker would ---------------
    _m("lease-epoch-lower-bound", "rules",
       "the capability check takes the lease epoch as a lower bound: a K whose epoch is higher "
       "than any ever issued is accepted", "attempt-fencing (K is exact, field by field)",
       ("decisions/rules.py", "    if (c.generation, c.attempt, c.fence, c.lease_epoch) != \\\n"
                    "            (t.generation, t.attempt, t.fence, t.lease_epoch):",
        "    if (c.generation, c.attempt, c.fence) != \\\n"
        "            (t.generation, t.attempt, t.fence) or c.lease_epoch < t.lease_epoch:")),
    _m("fence-lower-bound", "rules",
       "the capability check takes the fence as a lower bound: a K whose fence is ahead of the "
       "current one is accepted", "attempt-fencing (K is exact, field by field)",
       ("decisions/rules.py", "    if (c.generation, c.attempt, c.fence, c.lease_epoch) != \\\n"
                    "            (t.generation, t.attempt, t.fence, t.lease_epoch):",
        "    if (c.generation, c.attempt, c.lease_epoch) != \\\n"
        "            (t.generation, t.attempt, t.lease_epoch) or c.fence < t.fence:")),
    _m("capability-task-unchecked", "rules",
       "the capability's task is never compared with the request's: another task's K, equal "
       "field by field, is accepted", "attempt-fencing (a K names its task)",
       ("decisions/rules.py", "if r.cap is None or r.cap.graph != graph_id or r.cap.task != r.task:",
        "if r.cap is None or r.cap.graph != graph_id:")),
    _m("suspect-twice-is-dead", "processes",
       "a second heartbeat timeout or observer EOF on an owner already suspect declares it "
       "dead", "evidence-cannot-terminalize-live-owner",
       ("decisions/decision.py", '    return "dead" if t.owner_seen == "dead" else "suspect"',
        '    return "dead" if t.owner_seen in ("dead", "suspect") else "suspect"')),
    _m("batch-commits-each", "group-commit",
       "a batch's requests each commit on their own instead of together",
       "group commit: the members of one batch commit together (a crash recovers none or all)",
       ("front/kernel.py", "self._batch_commit(requests[len(answers):]))",
        "self._batch_commit(requests[len(answers):len(answers) + 1]))")),
    _m("admission-first-dependency", "readiness",
       "dispatch admits a task when its first dependency is Done, whatever the others",
       "dependency-needs-done",
       ("front/kernel.py", "deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps),",
        "deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps[:1]),"),
       ("storage/tables.py", _EACH_DEPENDENCY, _ONE_DEPENDENCY.format("min"))),
    _m("broker-without-token", "authority",
       "a broker's K-requests are accepted without the attempt's capability token",
       "token-required",
       ("contract/vocabulary.py", 'TOKEN_BEARERS = frozenset({"worker", "wrapper", "broker"})',
        'TOKEN_BEARERS = frozenset({"worker", "wrapper"})')),
    _m("deliver-role-unchecked", "authority",
       "the role check is skipped for deliver: an authenticated worker labelling itself "
       "operator releases a wait", "role-held",
       ("front/kernel.py", "        if not rc.role_held:",
        '        if not rc.role_held and rc.request.kind != "deliver":')),
    _m("revoked-still-authenticates", "authority",
       "a revoked principal's credential still authenticates", "a revoked credential is an "
       "unknown one (not-authenticated)",
       ("front/principals.py", "or row is None or row.revoked:", "or row is None:")),
    _m("revoked-elsewhere-still-authenticates", "authority",
       "a principal revoked through another connection still authenticates on this one: the "
       "credential is not checked again when the writer lock finds another connection's "
       "commit", "a revoked credential is an unknown one on every connection to the database",
       ("front/kernel.py", "        who = self.principals.authenticate(credential)\n"
                           "        if who is DENIED:\n            return None\n"
                           "        if who == rc.sender:",
        "        who = rc.sender\n        if who == rc.sender:")),
    _m("ledger-key-unhashed", "ledger",
       "the ledger's key column is left out of the hash chain, so an edited key verifies",
       "the ledger is one hash chain over every column",
       ("storage/ledger.py", r'text = f"{prev}\n2\n{seq}\n{event}\n{_json(task)}\n{_json(key)}\n{body}"',
        r'text = f"{prev}\n2\n{seq}\n{event}\n{_json(task)}\n{body}"')),
    _m("ledger-task-unhashed", "ledger",
       "the ledger's task column is left out of the hash chain, so an event moved to another "
       "task verifies", "the ledger is one hash chain over every column",
       ("storage/ledger.py", r'text = f"{prev}\n2\n{seq}\n{event}\n{_json(task)}\n{_json(key)}\n{body}"',
        r'text = f"{prev}\n2\n{seq}\n{event}\n{_json(key)}\n{body}"')),
    _m("glob-doublestar-needs-a-segment", "git",
       "the protected-path glob '**' requires at least one segment, so 'ci/**/x' misses 'ci/x'",
       "protected-path-holds",
       ("contract/protect.py", "for k in range(len(path) + 1))", "for k in range(1, len(path) + 1))")),
    _m("archive-on-the-daemons-word", "rules",
       "the archive is taken on the daemon's word: a daemon's archive needs no operator "
       "confirmation of the digest", "archive-needs-confirmed-digest",
       ("decisions/archive.py", '    return d is not None and ctx.seen("confirm-archive", d)',
        '    return d is not None and (ctx.seen("confirm-archive", d) or ctx.request.actor == "daemon")')),
    _m("reopen-under-prepared-dependent", "rules",
       "a reopen looks only for a Done dependent, so it is allowed under a dependent whose "
       "effect is prepared", "reopen-fences-dependents",
       ("decisions/reopen.py", "return any(k.record(n).phase in COMMITTED_PHASES or k.record(n).effect_done",
        'return any(k.record(n).phase == "graph-saved" or k.record(n).effect_done')),
    _m("secret-file-umask-mode", "files",
       "a token or credential file is created with the umask's mode (0666 masked) instead of "
       "0600, so under umask 022 every local user reads it",
       "the environment contract: a secret file is readable by its owner only",
       ("front/secretfile.py", "        fd = os.open(path, CREATE_FLAGS, PRIVATE)\n",
        "        fd = os.open(path, CREATE_FLAGS, 0o666)\n"),
       ("front/secretfile.py", "        os.fchmod(fd, PRIVATE)\n", "        pass\n")),
    _m("pg-dependencies-unlocked", "concurrency",
       "on PostgreSQL, the dependency rows are not locked while a dependent is admitted, so a "
       "concurrent reopen of a dependency commits under the admission",
       "dependency-needs-done on PostgreSQL (the rows a decision reads are locked)",
       ("storage/pg.py", "            self.lock_tasks(dep_ids, share=True)\n",
        "            pass\n"),
       ("storage/pg.py", "self.conn.begin_early([task_id], key, write, deps)",
        "self.conn.begin_early([task_id], key, write, [])"),
       survives=PG_ONLY + " (there the race reopen-racing-admission finds a dependent "
                          "admitted after its dependency's reopen in the ledger's order)"),
    _m("pg-deadlock-not-retried", "concurrency",
       "on PostgreSQL, a deadlock or serialization failure is raised to the sender instead "
       "of the transaction being run again", "every request is answered (PostgreSQL)",
       ("storage/pg.py", "        return state in sql.RETRY_STATES", "        return False"),
       survives=PG_ONLY + " (there the races kill it: reset-racing-completion and "
                          "two-terminal-reports without row locks, whose writes find a row "
                          "changed under the decision, and crossed-batches, whose deadlocks "
                          "must be run again; a losing dispatch is answered by its conditional "
                          "write, never run again)"),
)

_GROUP = ("group commit (Kernel.handle_batch) is not part of the conformance protocol: only "
          "the in-process batches section sends a batch")
_LEDGER = ("seen by the ledger's verification, the audit or the rebuild, which read the kernel's "
           "own database inside the gate's process; the protocol's projection does not show "
           "the ledger")
_FILES = ("a file the kernel creates on its host (its mode, or a file or symlink planted at its "
          "path before): the protocol names no file of the kernel (its storage is a folder the "
          "harness only passes on), so only a named test or the tamper section, inside the "
          "gate's process, reads them")
_CLI = ("the connection the command line (`wgk kernel`) opens: the served kernel opens its own, "
        "not the command line's, so only the in-process contract section, which opens the "
        "command line's kernel, sees its durability settings")
#: Mutants the gate kills in process that the conformance protocol cannot show, and why
#: (``wgk mutants --impl --external`` reports such a survivor as explained, not as a surprise).
IN_PROCESS_ONLY = {
    "batch-effect-behind-uncommitted": _GROUP, "batch-skips-journal": _GROUP,
    "batch-commits-each": _GROUP,
    "ledger-links-genesis": _LEDGER,
    "ledger-events-reversed": _LEDGER,
    "receipt-delete-skipped": _LEDGER,
    "land-without-cas": ("the land's compare-and-swap matters only when the target moves inside "
                         "one request, between the kernel's check and its update-ref: the "
                         "in-process contract section calls the git backend with a stale base; "
                         "over the protocol no step falls inside a request (measured: it "
                         "survives the quick sections through the protocol, real world included)"),
    "land-skips-ancestry": ("the git backend's own ancestry check is reached only by a land whose "
                            "candidate does not descend from its base, and no trace gets one past "
                            "the kernel's checks (measured: it survives the quick sections through "
                            "the protocol, real world included); the in-process contract section "
                            "calls the git backend with such a candidate"),
    "pin-overwrites": ("the git backend's zero old value matters only for a second pin of a "
                       "ref with other content, which no trace gets past the kernel's checks "
                       "(measured: it survives the quick sections through the protocol, real "
                       "world included); the in-process contract section pins twice directly"),
    "database-umask-mode": _FILES, "secret-file-world-readable": _FILES,
    "secret-file-umask-mode": _FILES, "secret-file-adopted": _FILES,
    "loose-credential-file-read": _FILES,
    "worktree-through-symlink": ("a symlink planted under the worktrees root before a dispatch: "
                                 "on the real world over the protocol the harness makes the "
                                 "repository, but no environment step plants a file in it "
                                 "(one that does would be needed); the in-process tamper section "
                                 "plants it"),
    "cli-kernel-synchronous-normal": _CLI,
    "ledger-key-unhashed": _LEDGER + " (the tamper section edits each column of the file)",
    "ledger-task-unhashed": _LEDGER + " (the tamper section edits each column of the file)",
    "synchronous-off": ("a power loss, not a process death: only the in-process crash cuts drop "
                        "what the database had not synced"),
    "pg-synchronous-commit-off": ("a power loss, not a process death: PostgreSQL's "
                                  "synchronous_commit off loses only what the server had not "
                                  "flushed when the server itself stops, which no kill of the "
                                  "kernel's process does; the in-process contract section reads "
                                  "the setting of every connection the kernel opens (measured: "
                                  "it survives the quick gate over the protocol on PostgreSQL)"),
    "pg-deadlock-not-retried": ("the checks that see it need the process: the races with the "
                                "store's row locks turned off inside it (no request turns them "
                                "off), and crossed-batches, whose two tasks are dispatched "
                                "in one batch (group commit is not part of the protocol); "
                                "measured: the quick gate over the protocol on PostgreSQL, "
                                "races included, does not kill it"),
}

IMPL_MUTANTS: tuple[ImplMutant, ...] = tuple(
    replace(m, category=FILED.get(m.name) or BY_AREA[m.area],
            in_process=IN_PROCESS_ONLY.get(m.name, ""),
            killed_in_process=KILLED_IN_PROCESS.get(m.name, ())) for m in _PLANTED)
MUTANTS_BY_NAME: dict[str, ImplMutant] = {m.name: m for m in IMPL_MUTANTS}


def by_category(mutants=IMPL_MUTANTS) -> dict[str, list[ImplMutant]]:
    """The mutants filed under each category, in the catalogue's order."""
    out: dict[str, list[ImplMutant]] = {c: [] for c in CATEGORIES}
    for m in mutants:
        out[m.category].append(m)
    return out


#: The bugs issue 33 planted that passed the quick gate green, one per guard of last round.
ISSUE_33 = ("lease-epoch-lower-bound", "suspect-twice-is-dead", "batch-commits-each",
            "admission-first-dependency", "broker-without-token", "deliver-role-unchecked",
            "revoked-still-authenticates", "ledger-key-unhashed", "glob-doublestar-needs-a-segment",
            "archive-on-the-daemons-word", "reopen-under-prepared-dependent", "database-umask-mode",
            "pg-dependencies-unlocked")
assert not set(ISSUE_33) - set(MUTANTS_BY_NAME)
assert not set(IN_PROCESS_ONLY) - set(MUTANTS_BY_NAME)
assert not set(KILLED_IN_PROCESS) - set(MUTANTS_BY_NAME)
assert all(len(ms) >= PER_CATEGORY for ms in by_category().values()), \
    {c: len(ms) for c, ms in by_category().items()}

#: The seven bugs that pass today's quick gate green (the unit tests catch them; the gate,
#: the only check a CI user has, must too).
GATE_BLIND_SEVEN = ("land-without-cas", "zombie-is-live", "begin-deferred", "ledger-head-cached",
                    "batch-effect-behind-uncommitted", "readiness-last-dependency",
                    "daemon-never-declares-lost")

__all__ = ["GATE_BLIND_SEVEN", "IMPL_MUTANTS", "IN_PROCESS_ONLY", "ISSUE_33", "MUTANTS_BY_NAME", "by_category"]
