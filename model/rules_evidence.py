"""The rules of what is reported about a running attempt: evidence, which never proves
death and never terminalizes a live owner, then the terminal reports and convergence
that close an attempt.

Each rule is a guard-then-update function declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from .logic import all_of, ite, not_
from .predicates import note_evidence, owner_alive, reserved, running, seen
from .ruleset import CLOSE, guarded, rule
from .rules_route import ROUTE, opens
from .state import replace_task as replace
from .updates import close_attempt, suspect
from .vocab import AttemptState as AS, Code, DecisionKind as D, Kind as K, OwnerSeen


# --- evidence -----------------------------------------------------------------

@rule(K.HEARTBEAT, touches={"evidence"}, reads={"self"})
def heartbeat(s, i, t, r):
    """A heartbeat is evidence only: recorded by id, it proves nothing about the owner."""
    return guarded([], lambda: s.put(i, replace(t, evidence=note_evidence(t, "heartbeat", r.evidence))),
                   kind=D.EVIDENCE_ONLY)


@rule(K.HEARTBEAT_TIMEOUT, touches={"owner_seen", "evidence"}, reads={"self"})
def heartbeat_timeout(s, i, t, r):
    """A missing heartbeat raises suspicion of a running owner; it never terminalizes."""
    return guarded(
        [],
        lambda: s.put(i, replace(t, owner_seen=ite(running(t), suspect(t), t.owner_seen),
                                 evidence=note_evidence(t, "heartbeat-timeout", r.evidence))),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.OBSERVE_EOF, touches={"owner_seen", "evidence"}, reads={"self"})
def observe_eof(s, i, t, r):
    """Observer EOF says only that an evidence channel closed: suspicion, one probe."""
    return guarded(
        [],
        lambda: s.put(i, replace(t, owner_seen=ite(running(t), suspect(t), t.owner_seen),
                                 evidence=note_evidence(t, "observe-eof", r.evidence))),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.PROBE_OWNER, touches={"owner_seen", "deadline", "evidence"}, reads={"self", "now"})
def probe_owner(s, i, t, r):
    """Read pid + birth time: the exact owner alive is evidence; its proven death is applied."""
    alive = owner_alive(t)
    proves_death = all_of(running(t), not_(alive), t.owner_seen != OwnerSeen.DEAD)
    seen_now = ite(alive, OwnerSeen.LIVE, OwnerSeen.DEAD)
    return guarded(
        [],
        lambda: s.put(i, replace(
            t,
            owner_seen=ite(running(t), seen_now, t.owner_seen),
            deadline=ite(proves_death, s.now + 1, t.deadline),
            evidence=note_evidence(t, "probe-owner", r.evidence),
        )),
        kind=ite(proves_death, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.COMPACTION, touches={"evidence", "compactions", "continuations"}, reads={"self"})
def compaction(s, i, t, r):
    """Each distinct compaction occurrence is counted once and earns one continuation."""
    new = not_(seen(t, "compaction", r.evidence))
    continues = all_of(new, running(t), not_(reserved(t)))
    def update():
        ev = note_evidence(t, "compaction", r.evidence)
        ev = ite(continues, ev.add(("continuation", r.evidence)), ev)
        return s.put(i, replace(
            t, evidence=ev,
            compactions=ite(new, t.compactions + 1, t.compactions),
            continuations=ite(continues, t.continuations + 1, t.continuations),
        ))
    return guarded([], update, kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY))


@rule(K.ACK_CONTINUATION, touches={"acks", "evidence"}, reads={"self"})
def ack_continuation(s, i, t, r):
    """The wrapper acknowledges delivery of the continuation a compaction earned."""
    new = not_(seen(t, "ack-continuation", r.evidence))
    return guarded(
        [(seen(t, "continuation", r.evidence), Code.UNKNOWN_OCCURRENCE)],
        lambda: s.put(i, replace(t, acks=ite(new, t.acks + 1, t.acks),
                                 evidence=note_evidence(t, "ack-continuation", r.evidence))),
        kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.PROVIDER_FAILURE, touches={"provider_failures", "evidence"} | ROUTE, reads={"self"})
def provider_failure(s, i, t, r):
    """A provider failure event is counted once by its event id; it never terminalizes. One that
    names the provider route it failed on opens that route's breaker for the task (``opens``)."""
    new = not_(seen(t, "provider-failure", r.evidence))
    return guarded(
        [],
        lambda: s.put(i, opens(replace(
            t, provider_failures=ite(new, t.provider_failures + 1, t.provider_failures),
            evidence=note_evidence(t, "provider-failure", r.evidence),
        ), all_of(new, r.route != 0), r)),
        kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.MESSAGE, touches={"messages", "evidence"}, reads={"self"})
def message(s, i, t, r):
    """A message is inert evidence: held for a running attempt, never a resurrection."""
    new = not_(seen(t, "message", r.evidence))
    return guarded(
        [],
        lambda: s.put(i, replace(
            t, messages=ite(all_of(new, running(t)), t.messages + 1, t.messages),
            evidence=note_evidence(t, "message", r.evidence),
        )),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.OWNERSHIP_CONTENTION, touches={"evidence"}, reads={"self"})
def ownership_contention(s, i, t, r):
    """A foreign caller contending for ownership is recorded; it charges nothing."""
    return guarded([], lambda: s.put(i, replace(t, evidence=note_evidence(t, "ownership-contention", r.evidence))),
                   kind=D.EVIDENCE_ONLY)


@rule(K.LOG, touches={"logs"}, reads={"self"})
def log(s, i, t, r):
    """The owner appends a log line: one effect per request."""
    return guarded([(running(t), Code.TERMINAL_ALREADY)],
                   lambda: s.put(i, replace(t, logs=t.logs + 1)))


# --- terminal reports and convergence -----------------------------------------

@rule(K.FAIL, touches=CLOSE | {"evidence", "failure"}, reads={"self"})
def fail(s, i, t, r):
    """A terminal failure report: the first terminal wins (and says why the attempt failed),
    later ones are evidence only."""
    first = all_of(running(t), not_(reserved(t)))
    return guarded(
        [],
        lambda: s.put(i, replace(ite(first, close_attempt(t, AS.FAILED), t),
                                 failure=ite(first, r.failure, t.failure),
                                 evidence=note_evidence(t, "fail", r.evidence))),
        kind=ite(first, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.DECLARE_LOST, touches=CLOSE, reads={"self"})
def declare_lost(s, i, t, r):
    """Convergence closes an attempt whose exact owner is proven dead and left no terminal intent."""
    return guarded(
        [
            (running(t), Code.TERMINAL_ALREADY),
            (t.owner_seen == OwnerSeen.DEAD, Code.OWNER_NOT_PROVEN_DEAD),
            (not_(reserved(t)), Code.TERMINAL_ALREADY),
        ],
        lambda: s.put(i, close_attempt(t, AS.LOST)),
    )
