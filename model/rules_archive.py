"""The rules of archiving a Done task: the operator's confirmation of the exact digest of
what is archived, recorded first, then the archive naming that same digest. The daemon's
archive backlog only proposes (``propose-archive``): the planner waits for the operator's
confirmation of the proposed digest (``await-archive-confirmation``) before it plans the
archive, never archiving on the daemon's own word (WG's ``surprise_archival_backlog``).

The digest of what is archived is the content id of the Done task's result (its candidate:
a commit id, the digest of its tree and history). Each rule is declared with ``@rule``.
"""
from __future__ import annotations

from .logic import all_of, ite
from .predicates import graph_saved
from .ruleset import guarded, rule
from .state import replace_task as replace
from .vocab import Code, DecisionKind as D, Kind as K


def _done_and_unarchived(t) -> list:
    return [(graph_saved(t), Code.ILLEGAL_PHASE_EDGE), (t.archived == 0, Code.TERMINAL_ALREADY)]


@rule(K.CONFIRM_ARCHIVE, touches={"archive_confirmed"}, reads={"self"})
def confirm_archive(s, i, t, r):
    """The operator confirms archiving a Done task by the exact digest of its result: a receipt recorded before any archive."""
    return guarded(
        _done_and_unarchived(t) + [(r.candidate == t.candidate, Code.CANDIDATE_MISMATCH)],
        lambda: s.put(i, replace(t, archive_confirmed=r.candidate)),
    )


@rule(K.ARCHIVE, touches={"archived"}, reads={"self"})
def archive(s, i, t, r):
    """The daemon or cleanup archives a Done task, naming the digest a confirmation receipt names."""
    return guarded(
        _done_and_unarchived(t) + [
            (all_of(t.archive_confirmed != 0, r.candidate == t.archive_confirmed),
             Code.ARCHIVE_UNCONFIRMED),
            (r.candidate == t.candidate, Code.CANDIDATE_MISMATCH),
        ],
        lambda: s.put(i, replace(t, archived=r.candidate)),
    )


@rule(K.PROPOSE_ARCHIVE, touches={"archive_proposed"}, reads={"self"})
def propose_archive(s, i, t, r):
    """The daemon or cleanup puts a Done task on its archive backlog by the exact digest of its result: a proposal, never an archive on its own word."""
    return guarded(
        _done_and_unarchived(t) + [(r.candidate == t.candidate, Code.CANDIDATE_MISMATCH)],
        lambda: s.put(i, replace(t, archive_proposed=r.candidate)),
        kind=ite(t.archive_proposed == r.candidate, D.EVIDENCE_ONLY, D.APPLIED),
    )
