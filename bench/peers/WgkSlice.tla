------------------------------ MODULE WgkSlice ------------------------------
(***************************************************************************)
(* A bounded slice of the wgk kernel model, written to reach exactly the   *)
(* states `wgk explore` reaches on                                         *)
(*                                                                         *)
(*   Instance(tasks=N, attempts=1, generations=1, versions=1,              *)
(*            groups=("core", "env") if ENV else ("core",))                *)
(*                                                                         *)
(* (model/explore.py).  Tasks 1..N form a chain: task i depends on i-1.    *)
(* Each action mirrors one request instance the explorer sends             *)
(* (requests_for, env_steps, global_steps) and its rule (model/rules.py)   *)
(* after the generic checks of model/kernel.py; a request the kernel       *)
(* rejects changes nothing, so it is no action here.                       *)
(*                                                                         *)
(* The task record mirrors model/state.py TaskState.  Fields that keep     *)
(* their initial value everywhere in this slice are left out: generation   *)
(* (0), imported (0), the evidence counters compactions, continuations,    *)
(* acks, provider-failures, logs, messages (0), assigned, legacy-done,     *)
(* reconstructed, abandoned (FALSE); so are the clock `now` (0) and the    *)
(* idempotency journal (empty: the explorer sends no keys here).           *)
(*                                                                         *)
(* The explorer counts every state it reaches but expands only states      *)
(* within its bound (Instance.within).  A TLC CONSTRAINT would drop the    *)
(* states outside the bound from the count, so the bound guards Next       *)
(* instead: such states are counted and have no successor (run TLC with   *)
(* -deadlock).                                                             *)
(***************************************************************************)
EXTENDS Naturals

CONSTANTS N,    \* tasks in the chain
          ENV   \* the "env" group: edits, owner death, pid reuse, target moves

Tasks == 1 .. N
InitialTarget == 1
ForeignCommit == 2
PidReuseBirth == 9

\* SaveTransaction phases, numbered as model/vocab.py Phase
Absent == 0
Prepared == 1
Quiescing == 2
WorkSaved == 3
CandidateSealed == 4
Validated == 5
Accepted == 7
DispositionRecorded == 8
EffectPrepared == 9
EffectCommitted == 10
CleanupPrepared == 11
CleanupCommitted == 12
GraphSaved == 13

ReceiptKinds == {"work-save", "candidate", "validation", "review", "disposition",
                 "effect", "cleanup", "graph-save"}
NoBinding == [fence |-> 0, candidate |-> 0, base |-> 0]

\* model/explore.py owner_for and content, for generation 0 (tasks are 1-based here)
Pid(i) == 100 * i + 1
Birth(i, epoch) == Pid(i) * 10 + epoch
Content(i, t) == 1000 * i + 10 * t.attempt + t.version + 3
\* model/actions.py token_for: the capability token minted for attempt 1's epoch-th process
Token(i, epoch) == 50000 + 1000 * (i - 1) + 10 + epoch

InitialTask ==
    [attempt |-> 0, fence |-> 0, leaseEpoch |-> 0, attemptState |-> "none", token |-> 0,
     ownerPid |-> 0, ownerBirth |-> 0, session |-> 0, wrapperEpoch |-> 0, childEpoch |-> 0,
     ownerSeen |-> "unverified", procBirth |-> 0,
     worktreeLease |-> FALSE, sessionLease |-> FALSE, finishLease |-> FALSE,
     worktree |-> 0, worktreePresent |-> FALSE, origin |-> 0, worktreeBase |-> 0,
     savedWork |-> 0, retained |-> 0,
     phase |-> Absent, exit |-> "none", reason |-> "none", revision |-> 0,
     candidate |-> 0, base |-> 0, version |-> 0, disposition |-> "none",
     receipts |-> [k \in ReceiptKinds |-> NoBinding], deadline |-> 0,
     promotions |-> 0, effectDone |-> FALSE, evidence |-> {}]

VARIABLES tk,      \* tk[i]: the TaskState of task i
          target   \* the commit the target ref points at

vars == <<tk, target>>

Init == tk = [i \in Tasks |-> InitialTask] /\ target = InitialTarget

(* --- predicates (model/rules.py) --- *)
Running(t) == t.attemptState = "running"
Reserved(t) == t.phase # Absent
Binding(t) == [fence |-> t.fence, candidate |-> t.candidate, base |-> t.base]
IsGraphSaved(t) == /\ t.phase = GraphSaved /\ t.exit = "none"
                   /\ t.receipts["graph-save"].fence = t.fence /\ t.fence # 0
DepsDone(i) == IF i = 1 THEN TRUE ELSE IsGraphSaved(tk[i - 1])
OwnerAlive(t) == t.ownerBirth # 0 /\ t.procBirth = t.ownerBirth
RetainWork(t) == IF t.worktreePresent /\ t.worktree # t.origin THEN t.worktree
                 ELSE IF t.savedWork # 0 THEN t.savedWork ELSE t.retained

CloseAttempt(t, outcome) ==
    [t EXCEPT !.attemptState = outcome, !.retained = RetainWork(t),
              !.worktreeLease = FALSE, !.sessionLease = FALSE, !.finishLease = FALSE,
              !.deadline = 0, !.ownerPid = 0, !.ownerBirth = 0, !.session = 0,
              !.wrapperEpoch = 0, !.childEpoch = 0, !.ownerSeen = "unverified",
              !.procBirth = 0]

Set(i, t) == tk' = [tk EXCEPT ![i] = t] /\ UNCHANGED target

(* --- admission and attempts --- *)
Dispatch(i) ==
    LET t == tk[i] IN
    /\ t.attempt = 0 /\ DepsDone(i) /\ ~Running(t)
    /\ Set(i, [t EXCEPT !.attempt = 1, !.fence = 1, !.leaseEpoch = 1,
                        !.attemptState = "running", !.token = Token(i, 1),
                        !.ownerPid = Pid(i), !.ownerBirth = Birth(i, 1), !.session = Pid(i),
                        !.wrapperEpoch = 1, !.childEpoch = 1, !.ownerSeen = "unverified",
                        !.procBirth = Birth(i, 1),
                        !.worktreeLease = TRUE, !.sessionLease = TRUE, !.finishLease = FALSE,
                        !.worktree = target, !.worktreePresent = TRUE, !.origin = target,
                        !.worktreeBase = target, !.savedWork = 0, !.phase = Absent, !.exit = "none", !.reason = "none",
                        !.revision = 0, !.candidate = 0, !.base = 0, !.version = 0,
                        !.disposition = "none", !.receipts = [k \in ReceiptKinds |-> NoBinding],
                        !.deadline = 0, !.effectDone = FALSE])

Resume(i) ==
    LET t == tk[i]
        epoch == t.wrapperEpoch + 1 IN
    /\ Running(t) /\ t.wrapperEpoch < 2
    /\ t.ownerSeen = "dead" /\ ~Reserved(t)
    /\ t.session = Pid(i) /\ t.sessionLease /\ t.worktreeLease /\ t.worktreePresent
    /\ epoch > t.wrapperEpoch /\ epoch > t.childEpoch
    /\ Set(i, [t EXCEPT !.ownerPid = Pid(i), !.ownerBirth = Birth(i, epoch),
                        !.procBirth = Birth(i, epoch), !.wrapperEpoch = epoch,
                        !.childEpoch = epoch, !.ownerSeen = "unverified", !.deadline = 0,
                        !.token = Token(i, epoch)])

(* --- evidence, terminal reports, convergence --- *)
ProbeOwner(i) ==
    LET t == tk[i]
        alive == OwnerAlive(t) IN
    /\ Running(t)
    /\ Set(i, [t EXCEPT !.ownerSeen = IF alive THEN "live" ELSE "dead",
                        !.deadline = IF ~alive /\ t.ownerSeen # "dead" THEN 1 ELSE t.deadline,
                        !.evidence = @ \cup {<<"probe-owner", "probe">>}])

Fail(i) ==
    LET t == tk[i]
        first == Running(t) /\ ~Reserved(t) IN
    /\ t.attemptState # "none"
    /\ Set(i, [(IF first THEN CloseAttempt(t, "failed") ELSE t)
                  EXCEPT !.evidence = t.evidence \cup {<<"fail", "fail">>}])

DeclareLost(i) ==
    LET t == tk[i] IN
    /\ Running(t) /\ t.ownerSeen = "dead" /\ ~Reserved(t)
    /\ Set(i, CloseAttempt(t, "lost"))

(* --- the SaveTransaction: each edge from its one source phase --- *)
Edge(t, from) == Running(t) /\ t.exit = "none" /\ t.phase = from

Submit(i) ==
    LET t == tk[i] IN
    /\ Edge(t, Absent) /\ t.worktreeLease /\ t.worktreePresent
    /\ Set(i, [t EXCEPT !.phase = Prepared, !.revision = @ + 1])

Quiesce(i) ==
    LET t == tk[i] IN
    /\ Edge(t, Prepared)
    /\ Set(i, [t EXCEPT !.phase = Quiescing, !.revision = @ + 1])

SaveWork(i) ==
    LET t == tk[i] IN
    /\ Edge(t, Quiescing) /\ t.worktreePresent
    /\ Set(i, [t EXCEPT !.phase = WorkSaved, !.revision = @ + 1, !.savedWork = t.worktree,
                        !.candidate = t.worktree, !.base = t.origin, !.version = @ + 1,
                        !.receipts["work-save"] = [fence |-> t.fence, candidate |-> t.worktree,
                                                   base |-> t.origin]])

SealCandidate(i) ==
    LET t == tk[i] IN
    /\ Edge(t, WorkSaved)
    /\ Set(i, [t EXCEPT !.phase = CandidateSealed, !.revision = @ + 1,
                        !.receipts["candidate"] = Binding(t)])

ValidatePass(i) ==
    LET t == tk[i] IN
    /\ Edge(t, CandidateSealed)
    /\ Set(i, [t EXCEPT !.phase = Validated, !.revision = @ + 1,
                        !.receipts["validation"] = Binding(t)])

ValidateFail(i) ==
    LET t == tk[i] IN
    /\ Edge(t, CandidateSealed)
    /\ Set(i, [t EXCEPT !.exit = "needs-repair", !.reason = "validation-failed",
                        !.revision = @ + 1])

Accept(i) ==   \* review not required: the daemon's not-required policy receipt
    LET t == tk[i] IN
    /\ Edge(t, Validated)
    /\ Set(i, [t EXCEPT !.phase = Accepted, !.revision = @ + 1,
                        !.receipts["review"] = Binding(t)])

RecordDisposition(i) ==
    LET t == tk[i] IN
    /\ Edge(t, Accepted)
    /\ Set(i, [t EXCEPT !.phase = DispositionRecorded, !.revision = @ + 1,
                        !.disposition = "land", !.finishLease = TRUE,
                        !.receipts["disposition"] = Binding(t)])

PrepareEffect(i) ==
    LET t == tk[i] IN
    /\ Edge(t, DispositionRecorded)
    /\ Set(i, [t EXCEPT !.phase = EffectPrepared, !.revision = @ + 1])

CommitEffect(i) ==   \* Land: the target moves by CAS from the exact base
    LET t == tk[i] IN
    /\ Edge(t, EffectPrepared)
    /\ t.receipts["review"] = Binding(t)
    /\ t.effectDone \/ t.disposition # "land" \/ target = t.base
    /\ tk' = [tk EXCEPT ![i] = [t EXCEPT !.phase = EffectCommitted, !.revision = @ + 1,
                                         !.effectDone = TRUE,
                                         !.promotions = IF t.effectDone THEN @ ELSE @ + 1,
                                         !.receipts["effect"] = Binding(t)]]
    /\ target' = IF t.disposition = "land" /\ ~t.effectDone THEN t.candidate ELSE target

MarkRepair(i) ==   \* sent in every phase; applies only when the target moved before the CAS
    LET t == tk[i] IN
    /\ Running(t)
    /\ t.exit = "none"
    /\ t.phase = EffectPrepared /\ t.disposition = "land" /\ ~t.effectDone /\ target # t.base
    /\ Set(i, [t EXCEPT !.exit = "needs-repair", !.reason = "target-moved",
                        !.revision = @ + 1, !.finishLease = FALSE])

PrepareCleanup(i) ==
    LET t == tk[i] IN
    /\ Edge(t, EffectCommitted)
    /\ Set(i, [t EXCEPT !.phase = CleanupPrepared, !.revision = @ + 1])

CommitCleanup(i) ==
    LET t == tk[i] IN
    /\ Edge(t, CleanupPrepared)
    /\ ~t.worktreePresent \/ t.worktree = t.savedWork
    /\ Set(i, [t EXCEPT !.phase = CleanupCommitted, !.revision = @ + 1,
                        !.worktreePresent = FALSE, !.worktreeLease = FALSE,
                        !.receipts["cleanup"] = Binding(t)])

SaveGraph(i) ==
    LET t == tk[i] IN
    /\ Edge(t, CleanupCommitted)
    /\ \A k \in ReceiptKinds \ {"graph-save"} : t.receipts[k] = Binding(t)
    /\ Set(i, [t EXCEPT !.phase = GraphSaved, !.revision = @ + 1,
                        !.attemptState = "succeeded",
                        !.receipts["graph-save"] = Binding(t),
                        !.worktreeLease = FALSE, !.sessionLease = FALSE, !.finishLease = FALSE,
                        !.deadline = 0, !.ownerPid = 0, !.ownerBirth = 0, !.session = 0,
                        !.wrapperEpoch = 0, !.childEpoch = 0, !.ownerSeen = "unverified",
                        !.procBirth = 0])

(* --- environment steps (model/env.py), for a running attempt --- *)
Writable(t) == /\ Running(t) /\ t.worktreePresent /\ t.procBirth = t.ownerBirth
               /\ \/ t.exit = "none" /\ t.phase \in {Absent, Prepared}
                  \/ t.exit = "needs-repair"

Edit(i) ==
    LET t == tk[i] IN
    /\ ENV /\ Writable(t) /\ t.worktree # Content(i, t)
    \* an owner repairing after the target moved rebases its work onto it first
    /\ Set(i, [t EXCEPT !.worktree = Content(i, t),
                        !.worktreeBase = IF t.exit = "needs-repair" /\ t.worktreeBase # target
                                         THEN target ELSE t.worktreeBase])

OwnerDies(i) ==
    LET t == tk[i] IN
    /\ ENV /\ Running(t) /\ t.procBirth # 0 /\ t.procBirth = t.ownerBirth
    /\ Set(i, [t EXCEPT !.procBirth = 0])

PidReuse(i) ==
    LET t == tk[i] IN
    /\ ENV /\ Running(t) /\ t.procBirth # t.ownerBirth /\ PidReuseBirth # t.ownerBirth
    /\ t.procBirth # PidReuseBirth /\ t.ownerBirth # 0
    /\ Set(i, [t EXCEPT !.procBirth = PidReuseBirth])

MoveTarget ==
    /\ ENV /\ target # ForeignCommit
    /\ target' = ForeignCommit /\ UNCHANGED tk

TaskNext(i) ==
    \/ Dispatch(i) \/ Resume(i) \/ ProbeOwner(i) \/ Fail(i) \/ DeclareLost(i)
    \/ Submit(i) \/ Quiesce(i) \/ SaveWork(i) \/ SealCandidate(i)
    \/ ValidatePass(i) \/ ValidateFail(i) \/ Accept(i) \/ RecordDisposition(i)
    \/ PrepareEffect(i) \/ CommitEffect(i) \/ MarkRepair(i)
    \/ PrepareCleanup(i) \/ CommitCleanup(i) \/ SaveGraph(i)
    \/ Edit(i) \/ OwnerDies(i) \/ PidReuse(i)

(* Instance.within: one side-exit round trip, one candidate version *)
Within == \A i \in Tasks : tk[i].version <= 1 /\ tk[i].revision <= tk[i].phase + 2

Next == Within /\ (\/ \E i \in Tasks : TaskNext(i)
                   \/ MoveTarget)

Spec == Init /\ [][Next]_vars

(* --- state invariants (model/invariants.py), per task --- *)
DoneIffGraphSave ==
    \A i \in Tasks : LET t == tk[i]
                         gs == t.receipts["graph-save"] IN
        IsGraphSaved(t) <=> (/\ gs.fence = t.fence /\ t.fence # 0 /\ t.exit = "none"
                             /\ \A k \in ReceiptKinds : t.receipts[k] = gs)

DependencyNeedsDone ==
    \A i \in Tasks : tk[i].attemptState \in {"running", "succeeded"} => DepsDone(i)

ReceiptsFenced ==
    \A i \in Tasks : \A k \in ReceiptKinds : tk[i].receipts[k].fence \in {0, tk[i].fence}

PromotionAtMostOnce == \A i \in Tasks : tk[i].promotions <= 1

PromotionNeedsReview ==
    \A i \in Tasks : LET t == tk[i]
                         e == t.receipts["effect"] IN
        e.fence # 0 => t.receipts["review"] = e /\ t.receipts["validation"] = e

WorksaveExact ==
    \A i \in Tasks : LET t == tk[i] IN
        (/\ Running(t) /\ t.worktreePresent /\ t.phase \notin {Absent, Prepared, Quiescing}
         /\ t.exit # "needs-repair") => t.worktree = t.savedWork

(* the planner's ways forward (model/projections.py) in this slice *)
Held(t) == t.exit # "none"
TargetMoved(t) == /\ t.phase = EffectPrepared /\ t.disposition = "land" /\ ~t.effectDone
                  /\ target # t.base
Ways(i) ==
    LET t == tk[i] IN
    {w \in {"dispatch", "await-dependencies", "live-owner", "probe-suspect", "declare-lost",
            "drive-transaction", "await-review", "mark-repair", "hold"} :
        CASE w = "dispatch" -> ~Running(t) /\ ~Held(t) /\ DepsDone(i)
          [] w = "await-dependencies" -> ~Running(t) /\ ~Held(t) /\ ~DepsDone(i)
          [] w = "live-owner" -> Running(t) /\ ~Reserved(t) /\ ~Held(t)
                                 /\ t.ownerSeen \in {"unverified", "live"}
          [] w = "probe-suspect" -> Running(t) /\ ~Reserved(t) /\ ~Held(t)
                                    /\ t.ownerSeen = "suspect"
          [] w = "declare-lost" -> Running(t) /\ ~Reserved(t) /\ ~Held(t)
                                   /\ t.ownerSeen = "dead"
          [] w = "drive-transaction" -> Running(t) /\ Reserved(t) /\ ~Held(t)
                                        /\ ~TargetMoved(t) /\ t.phase # CandidateSealed
          [] w = "await-review" -> Running(t) /\ ~Held(t) /\ t.phase = CandidateSealed
          [] w = "mark-repair" -> Running(t) /\ ~Held(t) /\ TargetMoved(t)
          [] w = "hold" -> Held(t)}

ExactlyOneWayForward ==
    \A i \in Tasks : ~IsGraphSaved(tk[i]) => \E w \in Ways(i) : Ways(i) = {w}

NoDeadOwnerWithoutAction ==
    \A i \in Tasks : LET t == tk[i] IN
        (Running(t) /\ t.ownerSeen = "dead") =>
            /\ "live-owner" \notin Ways(i)
            /\ Reserved(t) \/ Ways(i) \cap {"probe-suspect", "declare-lost",
                                            "drive-transaction", "mark-repair", "hold"} # {}

Safety == /\ DoneIffGraphSave /\ DependencyNeedsDone /\ ReceiptsFenced
          /\ PromotionAtMostOnce /\ PromotionNeedsReview /\ WorksaveExact
          /\ ExactlyOneWayForward /\ NoDeadOwnerWithoutAction
=============================================================================
