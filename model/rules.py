"""The transitions: one small guard-then-update function per request kind.

Every rule has the signature ``rule(s, i, t, r) -> Guarded`` where ``s`` is the
state, ``i`` the task index, ``t = s.tasks[i]`` and ``r`` the request. It lists
its guards as ``(condition, code)`` pairs (the first false one names the
rejection) and gives the update as a thunk. ``decide`` (kernel.py) runs the
generic checks first (journal, authority, capability, CAS on the transaction),
so a rule only states what is particular to it.

Each rule is declared where it is defined: ``@rule(kind, touches=...)`` names the
kind it decides and the only fields it may change (the TLA+ ``UNCHANGED`` idea,
inverted), so ``RULES`` and ``TOUCHES`` (``wgk.model.ruleset``) are derived from
the decorations; a test checks every applied step against ``TOUCHES``. The
predicates over one task are ``wgk.model.predicates``'.

Rules never branch on state with ``if``/``and``/``or``/``not``: they use
``ite``/``all_of``/``any_of``/``not_`` so the same code builds the z3 encoding.

The rules live in one module per group of what they decide; this module is the
one callers import from (the rules, ``RULES``, ``TOUCHES`` and the helpers):

- ``rules_attempt``: admission and attempts (assign, dispatch, retry, resume);
- ``rules_evidence``: evidence about a running attempt, terminal reports and convergence;
- ``rules_save``: the SaveTransaction, one rule per edge, and its ways off the main line;
- ``rules_operator``: the operator and migration (reset, abandon, reconcile, legacy Done);
- ``rules_archive``: archiving a Done task after the confirmation of its exact digest (the
  daemon's backlog only proposes);
- ``rules_chat``: an attempt's chat, requested once under its opening key, then reconciled;
- ``rules_pause``: the operator's pause and a task's not-before time;
- ``rules_wait``: external waits (park on a named event, its delivery, an expired deadline);
- ``rules_reopen``: reopening a Done task into a new generation;
- ``rules_review``: the review valve (the source worker's manifest, FLIP and the evaluation on
  it, its publication under the task's contract, its completion);
- ``rules_route``: a provider route's breaker (opened by a provider failure on the route, probed
  once due, closed or armed again);
- ``updates``: the updates several rules share (open and close an attempt, advance).
"""
from __future__ import annotations

from .predicates import (  # noqa: F401  (re-exported: callers import them from here)
    binding, deps_done, dirty, graph_saved, has_receipt, note_evidence, owner_alive,
    receipt_of, receipts_agree, reserved, running, seen,
)
from .ruleset import (  # noqa: F401  (re-exported: callers import them from here)
    CLOSE, EDGE, EXIT, OPEN, RULES, TOUCHES, Guarded, changed_fields, guarded, rule,
)
from .updates import (  # noqa: F401
    advance, close_attempt, leave_main_line, open_attempt, release_owner, retain_base,
    retain_work, suspect,
)

# The rule modules register their rules in the order imported here (the order of
# ``RULES``): admission, evidence and terminal reports, the SaveTransaction, the operator.
from .rules_attempt import assign, dispatch, resume, retry  # noqa: F401
from .rules_evidence import (  # noqa: F401
    heartbeat, heartbeat_timeout, observe_eof, probe_owner, compaction, ack_continuation,
    provider_failure, message, ownership_contention, log, fail, declare_lost,
)
from .rules_save import (  # noqa: F401
    SAVE_GRAPH_NEEDS, submit, quiesce, save_work, seal_candidate, validate, request_review,
    accept, record_disposition, prepare_effect, commit_effect, mark_repair, prepare_cleanup,
    commit_cleanup, save_graph, revise, block_upgrade,
)
from .rules_operator import abandon, legacy_done, reconcile, reconstruct, reset  # noqa: F401
from .rules_archive import archive, confirm_archive, propose_archive  # noqa: F401
from .rules_wait import deliver, expire_wait, park  # noqa: F401
from .rules_pause import pause, unpause  # noqa: F401
from .rules_reopen import reopen  # noqa: F401
from .rules_review import (  # noqa: F401
    complete, fail_review, publish, record_eval, record_flip, retry_review, submit_manifest,
)
from .rules_receipt import receipt_completion  # noqa: F401
from .rules_route import probe_route  # noqa: F401
from .rules_chat import reconcile_chat, request_chat  # noqa: F401
