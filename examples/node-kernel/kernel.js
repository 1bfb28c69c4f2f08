#!/usr/bin/env node
// A small attempt-control kernel for Node.js, written from docs/vocabulary.md and
// docs/conformance-protocol.md, gated with:
//
//   wgk gate --quick --external 'node examples/node-kernel/kernel.js'
//
// It declares every kind: admission of an attempt (a retry after a failed or lost one
// within the task's retry budget, none after a semantic failure), its capability token, the
// evidence kinds, the first terminal report, the SaveTransaction from submit through
// graph-saved (with its side exits), declare-lost, the operator's retry, reset, abandon, pause
// and unpause, the legacy claims, the same-session resume, the completion receipt, external
// waits, reopen, archives after confirmation, the attempt's chat, the provider routes'
// breakers, the review valve, the journal, and the environment steps of its own world,
// convergence included: every kind of docs/vocabulary.md. Everything it must not lose is one append-only log in
// the storage directory, fsynced before each answer; recover replays the log. Each appended
// record is a durable boundary (crash-after): one per decided request, so every phase of a
// transaction is its own durable step.
// No package is needed.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const readline = require('readline');

const PROTOCOL = 'wgk-conformance/2';
const EVIDENCE_KINDS = ['heartbeat', 'heartbeat-timeout', 'observe-eof', 'probe-owner', 'compaction',
  'ack-continuation', 'provider-failure', 'message', 'ownership-contention'];
const PHASES = ['absent', 'prepared', 'quiescing', 'work-saved', 'candidate-sealed', 'validated',
  'awaiting-acceptance', 'accepted', 'disposition-recorded', 'effect-prepared', 'effect-committed',
  'cleanup-prepared', 'cleanup-committed', 'graph-saved'];
// the main-line edges: kind -> [from phases, to phase] (docs/vocabulary.md, "Legal main-line edges")
const EDGES = {
  submit: [['absent'], 'prepared'], quiesce: [['prepared'], 'quiescing'],
  'save-work': [['quiescing'], 'work-saved'], 'seal-candidate': [['work-saved'], 'candidate-sealed'],
  validate: [['candidate-sealed'], 'validated'], 'request-review': [['validated'], 'awaiting-acceptance'],
  accept: [['validated', 'awaiting-acceptance'], 'accepted'],
  'record-disposition': [['accepted'], 'disposition-recorded'],
  'prepare-effect': [['disposition-recorded'], 'effect-prepared'],
  'commit-effect': [['effect-prepared'], 'effect-committed'],
  'prepare-cleanup': [['effect-committed'], 'cleanup-prepared'],
  'commit-cleanup': [['cleanup-prepared'], 'cleanup-committed'],
  'save-graph': [['cleanup-committed'], 'graph-saved'],
};
const CAS_KINDS = [...Object.keys(EDGES), 'mark-repair', 'revise', 'block-upgrade'];
const OPERATOR_KINDS = ['retry', 'reset', 'reconcile', 'reconstruct', 'legacy-done', 'assign', 'pause',
  'unpause', 'abandon', 'probe-route', 'deliver', 'expire-wait', 'reopen', 'confirm-archive', 'archive', 'propose-archive'];
const OWNER_KINDS = ['resume', 'log', 'receipt-completion', 'park', 'request-chat', 'reconcile-chat'];
// the review valve's kinds: the source worker's (marked K) and the reviewers', promoter's and operator's
const VALVE_K = ['submit-manifest', 'complete', 'fail-review'];
const VALVE_KINDS = [...VALVE_K, 'record-flip', 'record-eval', 'publish', 'retry-review'];
const VERDICTS = ['pass', 'reject', 'unavailable', 'incomplete-evidence'];
const KINDS = ['dispatch', 'fail', 'declare-lost', ...OWNER_KINDS, ...OPERATOR_KINDS,
  ...EVIDENCE_KINDS, ...CAS_KINDS, ...VALVE_KINDS];
const ENV = ['tick', 'owner-dies', 'pid-reuse', 'edit', 'move-target', 'converge', 'revoke'];
const OWN = ['worker', 'wrapper'];
const AUTHORITY = {
  dispatch: ['daemon'], heartbeat: OWN, 'heartbeat-timeout': ['daemon', 'process-observer'],
  'observe-eof': ['process-observer', 'wrapper'], 'probe-owner': ['daemon', 'process-observer'],
  compaction: ['wrapper'], 'ack-continuation': ['wrapper'], 'provider-failure': ['daemon', 'wrapper'],
  message: null, 'ownership-contention': null, fail: OWN, 'declare-lost': ['daemon'],
  submit: ['broker', ...OWN], quiesce: ['daemon', 'wrapper'], 'save-work': ['daemon', 'wrapper'],
  'seal-candidate': ['daemon'], validate: ['validator'], 'request-review': ['daemon'],
  accept: ['daemon', 'evaluator'], 'record-disposition': ['broker', 'daemon', ...OWN],
  'prepare-effect': ['daemon', 'promoter'], 'commit-effect': ['daemon', 'promoter'],
  'prepare-cleanup': ['cleanup', 'daemon'], 'commit-cleanup': ['cleanup', 'daemon'],
  'save-graph': ['daemon'], 'mark-repair': ['daemon'], revise: ['operator', 'worker'],
  'block-upgrade': ['daemon'],
  resume: ['daemon', 'wrapper'], log: OWN, 'receipt-completion': OWN, retry: ['operator'], reset: ['operator'],
  reconcile: ['operator'], reconstruct: ['operator'], 'legacy-done': ['legacy-import'], assign: ['daemon'],
  pause: ['operator'], unpause: ['operator'], abandon: ['operator'], 'probe-route': ['daemon'], park: OWN, deliver: ['daemon', 'operator'],
  'expire-wait': ['daemon'], reopen: ['operator'], 'confirm-archive': ['operator'], archive: ['daemon', 'cleanup'],
  'propose-archive': ['daemon', 'cleanup'], 'request-chat': ['daemon'], 'reconcile-chat': ['daemon'],
  'submit-manifest': OWN, complete: OWN, 'fail-review': OWN, 'record-flip': ['validator'], 'record-eval': ['evaluator'],
  publish: ['daemon', 'promoter'], 'retry-review': ['operator'],
};
const OWN_PROCESS = ['worker', 'wrapper', 'broker'];
// the kinds marked K: every kind of this kernel but these
const NOT_K = ['dispatch', 'message', 'ownership-contention', ...OPERATOR_KINDS,
  ...VALVE_KINDS.filter((k) => !VALVE_K.includes(k))];
const FAILURES = ['none', 'nothing-saved', 'zero-progress', 'provider', 'semantic'];
const DEFAULT_RETRY_BUDGET = 2;
const HOLDS = ['assignment-required', 'dependency-not-done'];
const RECEIPTS = ['work-save', 'candidate', 'validation', 'review', 'disposition', 'effect', 'cleanup',
  'graph-save'];
const MAX_ROUNDS = 64;
// the name grammar (docs/vocabulary.md, "Names")
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const same = (a, b) => typeof a === 'string' && typeof b === 'string' && a.length === b.length &&
  crypto.timingSafeEqual(Buffer.from(a), Buffer.from(b));

// evidence is a set of [kind, id] pairs, projected sorted (docs/vocabulary.md)
const byPair = ([k1, i1], [k2, i2]) => (k1 < k2 ? -1 : k1 > k2 ? 1 : i1 < i2 ? -1 : i1 > i2 ? 1 : 0);

function canonical(v) {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).filter((k) => v[k] !== undefined).sort()
      .map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

// A protected path pattern (docs/vocabulary.md, "Protected paths") as a matcher of one path.
function protectedMatcher(pattern) {
  const segs = pattern.split('/');
  const one = (seg, part) => {
    const re = '^' + seg.split('').map((c) => (c === '*' ? '[^/]*' : c === '?' ? '[^/]'
      : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&'))).join('') + '$';
    return new RegExp(re).test(part);
  };
  const match = (si, parts, pi) => {
    if (si === segs.length) return pi === parts.length;
    if (segs[si] === '**') {
      for (let k = pi; k <= parts.length; k++) if (match(si + 1, parts, k)) return true;
      return false;
    }
    return pi < parts.length && one(segs[si], parts[pi]) && match(si + 1, parts, pi + 1);
  };
  return (p) => match(0, p.split('/'), 0);
}

class Kernel {
  constructor(storage) {
    this.storage = storage;
    this.log = path.join(storage, 'kernel.log');
    this.fd = null;
    this.crashAfter = null;
    this.passed = 0;
  }

  // --- durability: one fsynced append per record; the crash hook after each --------------
  append(record) {
    fs.writeSync(this.fd, JSON.stringify(record) + '\n');
    fs.fsyncSync(this.fd);
    this.passed += 1;
    if (this.crashAfter !== null && this.passed >= this.crashAfter) process.kill(process.pid, 'SIGKILL');
  }

  // --- state ------------------------------------------------------------------------------
  init(head) {
    const g = head.graph;
    this.graph = g;
    this.target = g.target === undefined ? 'main-0' : g.target;
    this.now = 0;
    this.issued = Object.assign({}, head.issued || {});   // sha256(credential) -> principal
    this.revoked = new Set();
    this.closed = Array.isArray(g.principals);
    this.roles = {};
    this.daemon = null;                             // who sends the daemon's convergence
    for (const p of g.principals || []) {
      this.roles[p.name] = p.roles || [];
      if (this.daemon === null && (p.roles || []).includes('daemon')) this.daemon = p.name;
    }
    this.protect = (g['protected-paths'] || []).map(protectedMatcher);
    this.marked = {};                               // content id -> it touches a protected path
    this.journal = {};
    this.tasks = {};
    this.order = [];
    for (const t of g.tasks) {
      this.order.push(t.name);
      this.tasks[t.name] = {
        deps: t.deps || [], requiresAssignment: !!t['requires-assignment'],
        reviewRequired: !!t['review-required'],
        retryBudget: t['retry-budget'] === undefined ? DEFAULT_RETRY_BUDGET : t['retry-budget'],
        generation: 0, attempt: 0, fence: 0, leaseEpoch: 0, state: 'none', failure: 'none', retries: 0,
        owner: null, procBirth: 0, ownerSeen: 'unverified', tokenHash: null,
        leases: {worktree: false, session: false, finish: false},
        worktree: {present: false, content: null, origin: null}, builtOn: null, worktreeBase: null,
        phase: 'absent', exit: 'none', reason: 'none', revision: 0, candidate: null, base: null,
        version: 0, disposition: 'none', receipts: {}, savedWork: null, retained: null,
        retainedBase: null, imported: null, promotions: 0, effectDone: false, deadline: 0,
        counters: {compactions: 0, continuations: 0, acks: 0, 'provider-failures': 0, messages: 0, logs: 0},
        evidence: [],
        assigned: false, legacyDone: false, reconstructed: false, reopening: false, completionReceipt: null,
        depsGeneration: 0, paused: false, notBefore: 0, abandoned: false, route: null, routeOpen: false, probeAt: 0,
        waitingOn: null, waitDeadline: 0, waitExpired: false, chatRequest: 0, chatReconciled: 0,
        archiveConfirmed: null, archived: null, archiveProposed: null,
        valve: {phase: 'working', manifest: null, requirements: null, contract: null, output: null, validation: null,
          main: null, flip: 'absent', flipManifest: null, flipRequirements: null, evaluation: 'absent',
          evalManifest: null, evalRequirements: null, publication: null, publicationOutput: null, publications: 0,
          failure: 'none'},
      };
    }
    for (const [name, seed] of Object.entries(head.initial || {})) this.seed(this.tasks[name], seed);
  }

  // a task as a trace's initial section describes it (docs/vocabulary.md, "Traces")
  seed(t, seed) {
    const a = seed && seed.attempt;
    if (!t || !a) return;
    const state = a.state === undefined ? 'running' : a.state;
    const live = state === 'running';
    const o = a.owner || {};
    const leases = a.leases || {worktree: live, session: live, finish: false};
    const origin = a.origin ? a.origin : this.target;
    Object.assign(t, {
      generation: a.generation, attempt: a.attempt, fence: a.fence, leaseEpoch: a['lease-epoch'], state,
      tokenHash: a.token || null, ownerSeen: a['owner-seen'] === undefined ? 'unverified' : a['owner-seen'],
      owner: live ? {pid: o.pid === undefined ? 0 : o.pid, birth: o.birth === undefined ? 0 : o.birth,
        session: o.session === undefined ? null : o.session,
        'wrapper-epoch': o['wrapper-epoch'] === undefined ? 1 : o['wrapper-epoch'],
        'child-epoch': o['child-epoch'] === undefined ? 1 : o['child-epoch']} : null,
      procBirth: live && a.alive !== false && o.birth ? o.birth : 0,
      leases: {worktree: !!leases.worktree, session: !!leases.session, finish: !!leases.finish},
      worktree: live ? {present: true, content: a.worktree ? a.worktree : this.target, origin}
        : {present: false, content: null, origin: null},
      builtOn: live ? origin : null, worktreeBase: live ? origin : null,
    });
  }

  start(msg) {
    fs.mkdirSync(msg.storage, {recursive: true});
    const issued = {};
    for (const [name, cred] of Object.entries(msg.credentials || {})) issued[sha256(cred)] = name;
    const head = {graph: msg.graph, issued, initial: msg.initial || {}};
    this.fd = fs.openSync(this.log, 'w');
    this.init(head);
    this.append({head});
    return {started: true, capabilities: {kinds: KINDS, worlds: ['memory'], processes: 1,
      'crash-hook': true, env: ENV, reset: true}};
  }

  recover() {
    const lines = fs.readFileSync(this.log, 'utf8').split('\n').filter((l) => l.trim());
    const records = [];
    for (const l of lines) {
      try { records.push(JSON.parse(l)); } catch (e) { break; }   // a torn last line
    }
    this.init(records[0].head);
    for (const r of records.slice(1)) {
      if (r.request) this.decide(r.request, r.principal, true);
      else if (r.env) this.env(r.env, true);
    }
    this.fd = fs.openSync(this.log, 'a');
    return {recovered: true};
  }

  // --- requests -----------------------------------------------------------------------------
  apply(msg) {
    this.crashAfter = Number.isInteger(msg['crash-after']) ? msg['crash-after'] : null;
    this.passed = 0;
    if (this.crashAfter === 0) process.kill(process.pid, 'SIGKILL');
    let principal = null;
    if (this.closed) {
      principal = typeof msg.credential === 'string' ? this.issued[sha256(msg.credential)] : undefined;
      if (!principal) return {decision: {decision: 'rejected', code: 'not-authenticated'}, boundaries: 0};
    }
    const request = Object.assign({}, msg.request);
    if ((request.kind === 'fail' || request.kind === 'fail-review') && request.failure !== undefined &&
        !FAILURES.includes(request.failure)) {
      return {error: `${request.kind}: failure must be one of ${FAILURES.join(', ')}`, kind: 'step'};
    }
    if (typeof request.token === 'string') {       // only the hash is kept, even in the log
      request['token-hash'] = sha256(request.token);
      delete request.token;
    }
    const decision = this.decide(request, principal, false);
    this.crashAfter = null;
    return {decision, boundaries: this.passed};
  }

  decide(r, principal, replaying) {
    const jkey = principal ? `${principal}/${r.key}` : r.key;
    const digest = sha256(canonical(Object.assign({}, r, {key: undefined})));
    const old = this.journal[jkey];
    if (old) {
      if (old.digest === digest) return {decision: 'duplicate', original: old.decision};
      return {decision: 'rejected', code: 'idempotency-conflict'};
    }
    // (1b) names outside the grammar: rejected, not journaled, nothing changed
    if (!this.named(r)) return {decision: 'rejected', code: 'bad-name'};
    const decision = this.rule(r, principal);
    if (decision.decision === 'rejected' && HOLDS.includes(decision.code)) return decision;
    this.journal[jkey] = {digest, decision};
    if (!replaying) this.append({request: r, principal});
    return decision;
  }

  named(r) {
    const cap = r.cap && typeof r.cap === 'object' ? r.cap : {};
    const names = [r.task, cap.graph, cap.task, r.imports, r.candidate, r.base];
    return names.every((n) => n === undefined || n === null || (typeof n === 'string' && NAME.test(n)));
  }

  // checks (2) to (5) of "Order of checks", then the kind's own conditions; a rejection
  // changes nothing (the state is only written once every check passed)
  rule(r, principal) {
    const reject = (code) => ({decision: 'rejected', code});
    if (principal && !(this.roles[principal] || []).includes(r.actor)) return reject('role-not-held');
    const allowed = AUTHORITY[r.kind];
    if (allowed === undefined) return reject('not-authorized');
    if (allowed && !allowed.includes(r.actor)) return reject('not-authorized');
    const t = this.tasks[r.task];
    if (!t) return reject('unknown-task');
    if (!NOT_K.includes(r.kind)) {
      const cap = r.cap || {};
      if (cap.graph !== this.graph.id || cap.task !== r.task) return reject('stale-capability');
      if (t.state === 'none') return reject('unknown-attempt');
      if (cap.generation !== t.generation || cap.attempt !== t.attempt || cap.fence !== t.fence ||
          cap['lease-epoch'] !== t.leaseEpoch) return reject('stale-capability');
      const presents = OWN_PROCESS.includes(r.actor) || r.kind === 'resume';
      if (presents && !(t.tokenHash && same(r['token-hash'], t.tokenHash))) {
        return reject('token-mismatch');
      }
    }
    if (CAS_KINDS.includes(r.kind)) {
      if (t.state !== 'running') return reject('terminal-already');
      const visible = t.exit !== 'none' ? t.exit : t.phase;
      if (r['expected-phase'] !== visible || r['expected-revision'] !== t.revision) return reject('cas-moved');
      const edge = EDGES[r.kind];
      if (edge && !(t.exit === 'none' && edge[0].includes(t.phase))) return reject('illegal-phase-edge');
      return this.transaction(t, r);
    }
    if (r.kind === 'dispatch') return this.dispatch(t, r);
    if (r.kind === 'fail') return this.fail(t, r);
    if (r.kind === 'declare-lost') return this.declareLost(t);
    if (r.kind === 'resume') return this.resume(t, r);
    if (r.kind === 'retry') return this.retry(t, r);
    if (r.kind === 'reset') return this.reset(t, r);
    if (VALVE_KINDS.includes(r.kind)) return this.valve(t, r);
    if (OPERATOR_KINDS.includes(r.kind) || OWNER_KINDS.includes(r.kind)) {
      return this.operator(t, r);
    }
    return this.report(t, r);
  }

  seen(t, kind, id) { return t.evidence.some(([k, i]) => k === kind && i === id); }

  note(t, kind, id) {
    if (this.seen(t, kind, id)) return false;
    t.evidence.push([kind, id]);
    return true;
  }

  alive(t) { return t.owner !== null && t.owner.birth !== 0 && t.procBirth === t.owner.birth; }

  // the evidence kinds (docs/vocabulary.md, "What a report records and may change")
  report(t, r) {
    const running = t.state === 'running';
    const fresh = !this.seen(t, r.kind, r.evidence);
    const evidenceOnly = {decision: 'evidence-only'};
    switch (r.kind) {
      case 'heartbeat': case 'ownership-contention':
        this.note(t, r.kind, r.evidence);
        return evidenceOnly;
      case 'heartbeat-timeout': case 'observe-eof':
        if (running && t.ownerSeen !== 'dead') t.ownerSeen = 'suspect';
        this.note(t, r.kind, r.evidence);
        return evidenceOnly;
      case 'probe-owner': {
        const alive = this.alive(t);
        const provesDeath = running && !alive && t.ownerSeen !== 'dead';
        if (running) t.ownerSeen = alive ? 'live' : 'dead';
        if (provesDeath) t.deadline = this.now + 1;
        this.note(t, r.kind, r.evidence);
        return provesDeath ? {decision: 'applied'} : evidenceOnly;
      }
      case 'compaction': {
        const continues = fresh && running && t.phase === 'absent';
        this.note(t, r.kind, r.evidence);
        if (continues) this.note(t, 'continuation', r.evidence);
        if (fresh) t.counters.compactions += 1;
        if (continues) t.counters.continuations += 1;
        return fresh ? {decision: 'applied'} : evidenceOnly;
      }
      case 'ack-continuation':
        if (!this.seen(t, 'continuation', r.evidence)) return {decision: 'rejected', code: 'unknown-occurrence'};
        this.note(t, r.kind, r.evidence);
        if (fresh) t.counters.acks += 1;
        return fresh ? {decision: 'applied'} : evidenceOnly;
      case 'provider-failure':
        this.note(t, r.kind, r.evidence);
        if (fresh) t.counters['provider-failures'] += 1;
        if (fresh && r.route) {                       // the route's breaker opens for this task
          Object.assign(t, {route: r.route, routeOpen: true, probeAt: r.deadline ? r.deadline : 0});
        }
        return fresh ? {decision: 'applied'} : evidenceOnly;
      case 'message':
        if (this.note(t, r.kind, r.evidence) && running) t.counters.messages += 1;
        return evidenceOnly;
      default:
        return {decision: 'rejected', code: 'not-authorized'};
    }
  }

  // --- closing and opening attempts ---------------------------------------------------------
  dirty(t) { return t.worktree.present && t.worktree.content !== t.worktree.origin; }

  // the attempt is over: its work retained, its leases released, its owner no longer tracked
  close(t, outcome) {
    const dirty = this.dirty(t);
    const retained = dirty ? t.worktree.content : t.savedWork !== null ? t.savedWork : t.retained;
    const retainedBase = dirty ? t.builtOn : t.savedWork !== null ? t.base : t.retainedBase;
    t.retained = retained;
    t.retainedBase = retainedBase;
    t.state = outcome;
    this.release(t);
  }

  release(t) {
    t.leases = {worktree: false, session: false, finish: false};
    t.deadline = 0;
    t.owner = null;
    t.ownerSeen = 'unverified';
    t.procBirth = 0;
  }

  // The first terminal report wins: a running attempt with no completion in flight fails
  // (why: its failure); any other report is evidence only.
  fail(t, r) {
    const first = t.state === 'running' && t.phase === 'absent';
    this.note(t, 'fail', r.evidence);
    if (!first) return {decision: 'evidence-only'};
    this.close(t, 'failed');
    t.failure = r.failure === undefined ? 'none' : r.failure;
    return {decision: 'applied'};
  }

  declareLost(t) {
    if (t.state !== 'running') return {decision: 'rejected', code: 'terminal-already'};
    if (t.ownerSeen !== 'dead') return {decision: 'rejected', code: 'owner-not-proven-dead'};
    if (t.phase !== 'absent') return {decision: 'rejected', code: 'terminal-already'};
    this.close(t, 'lost');
    return {decision: 'applied'};
  }

  afterFailure(t) { return t.attempt !== 0 && (t.state === 'failed' || t.state === 'lost'); }

  // Why a task whose last attempt failed or was lost cannot be dispatched again (null: it
  // can, as a retry).
  held(t) {
    if (!this.afterFailure(t)) return null;
    if (t.failure === 'semantic') return 'repair-required';
    if (t.retries >= t.retryBudget) return 'retry-budget-spent';
    return null;
  }

  graphSaved(t) {
    return t.phase === 'graph-saved' && t.exit === 'none' && t.fence !== 0 &&
      !!t.receipts['graph-save'] && t.receipts['graph-save'].fence === t.fence;
  }

  depsDone(t) { return t.deps.every((d) => this.graphSaved(this.tasks[d])); }

  // the conditions `dispatch` and `retry` share, before the attempt's CAS ("Conditions, kind by kind")
  admission(t) {
    if (t.abandoned) return 'held';
    if (t.state === 'succeeded') return 'terminal-already';
    if (t.exit === 'needs-reconciliation' || t.exit === 'upgrade-blocked' || t.reopening) return 'held';
    if (t.requiresAssignment && !t.assigned) return 'assignment-required';
    if (!this.depsDone(t)) return 'dependency-not-done';
    if (t.waitingOn !== null) return 'waiting';
    if (t.paused) return 'paused';
    if (this.now < t.notBefore) return 'not-due';
    if (t.routeOpen) return 'route-unavailable';
    return null;
  }

  // what closing the attempt now would retain, and the base it was built on
  retainable(t) {
    if (this.dirty(t)) return [t.worktree.content, t.builtOn];
    if (t.savedWork !== null) return [t.savedWork, t.base];
    return [t.retained, t.retainedBase];
  }

  imports(r, retained) {
    if (!r.imports) return null;
    if (retained === null) return 'nothing-retained';
    if (r.imports !== retained) return 'candidate-mismatch';
    return null;
  }

  // the task's effect is prepared or committed, or it is Done (a reopen of a dependency comes too late)
  committed(t) {
    return ['effect-prepared', 'effect-committed', 'cleanup-prepared', 'cleanup-committed', 'graph-saved']
      .includes(t.phase) || t.effectDone;
  }

  chatPending(t) { return t.chatRequest !== 0 && t.chatRequest === t.fence && t.chatReconciled !== t.fence; }

  depsGeneration(t) { return t.deps.reduce((n, d) => n + this.tasks[d].generation, 0); }

  depsCurrent(t) { return this.depsDone(t) && t.depsGeneration === this.depsGeneration(t); }

  dispatch(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    const refused = this.admission(t);
    if (refused) return reject(refused);
    if (r['expected-attempt'] !== t.attempt) return reject('cas-moved');
    if (t.state === 'running') return reject('attempt-live');
    if (t.waitExpired) return reject('held');
    const held = this.held(t);
    if (held) return reject(held);
    const bad = this.imports(r, t.retained);
    if (bad) return reject(bad);
    if (this.afterFailure(t)) t.retries += 1;       // an automatic retry of this generation
    this.open(t, r);
    return {decision: 'applied'};
  }

  // the operator's override: a stuck attempt closed (abandoned, its work retained), a new one
  // opened, and the automatic retries start again
  retry(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    const refused = this.admission(t);
    if (refused) return reject(refused);
    if (r['expected-attempt'] !== t.attempt) return reject('cas-moved');
    const running = t.state === 'running';
    const stuck = !running || (t.ownerSeen === 'dead' && t.phase === 'absent') ||
      t.exit === 'needs-repair' || t.exit === 'aborted-preserved';
    if (!stuck) return reject('attempt-live');
    const bad = this.imports(r, running ? this.retainable(t)[0] : t.retained);
    if (bad) return reject(bad);
    if (running) this.close(t, 'abandoned');
    this.open(t, r);
    t.retries = 0;
    t.waitExpired = false;
    return {decision: 'applied'};
  }

  // opening an attempt (docs/vocabulary.md, "How the facts are kept")
  open(t, r) {
    const o = r.owner || {};
    const start = r.imports ? r.imports : this.target;
    const builtOn = r.imports ? (t.retainedBase !== null ? t.retainedBase : this.target) : this.target;
    Object.assign(t, {
      attempt: t.attempt + 1, fence: t.fence + 1, leaseEpoch: t.leaseEpoch + 1, state: 'running',
      failure: 'none', tokenHash: r.mint || null, ownerSeen: 'unverified',
      owner: {pid: o.pid, birth: o.birth, session: o.session === undefined ? null : o.session,
        'wrapper-epoch': 1, 'child-epoch': 1},
      procBirth: o.birth, leases: {worktree: true, session: true, finish: false},
      worktree: {present: true, content: start, origin: start}, builtOn, worktreeBase: builtOn,
      savedWork: null, imported: r.imports || null,
      phase: 'absent', exit: 'none', reason: 'none', revision: 0, candidate: null, base: null,
      version: 0, disposition: 'none', receipts: {}, deadline: 0, effectDone: false,
      completionReceipt: null, depsGeneration: this.depsGeneration(t),
    });
  }

  // the owner is not proven exited: the attempt runs and its owner is not known dead
  ownerHeld(t) { return t.state === 'running' && t.ownerSeen !== 'dead'; }

  reset(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    if (r['expected-generation'] !== t.generation) return reject('cas-moved');
    if (t.abandoned) return reject('held');
    if (t.state === 'succeeded') return reject('terminal-already');
    if (t.state === 'running' && t.phase !== 'absent' && t.exit === 'none' && this.depsCurrent(t)) {
      return reject('terminal-already');             // a reserved completion wins the race
    }
    if (t.effectDone) return reject('terminal-already');
    if (t.exit === 'needs-reconciliation') return reject('held');
    const held = this.ownerHeld(t);
    if (t.reopening && held) return reject('owner-not-proven-dead');
    if (held) {                                      // only the intent; the old K is fenced
      t.reopening = true;
      t.leaseEpoch += 1;
      return {decision: 'applied'};
    }
    const [retained, retainedBase] = this.retainable(t);
    if (t.state === 'running') this.close(t, 'superseded');
    Object.assign(t, {
      generation: t.generation + 1, attempt: 0, phase: 'absent', exit: 'none', reason: 'none', revision: 0,
      candidate: null, base: null, version: 0, disposition: 'none', receipts: {}, effectDone: false,
      retries: 0, failure: 'none', reopening: false, retained, retainedBase, waitingOn: null, waitDeadline: 0,
      waitExpired: false,
    });
    return {decision: 'applied'};
  }

  // same-attempt continuation (docs/vocabulary.md, "Planned continuation")
  resume(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    const o = r.owner || {};
    if (t.state !== 'running') return reject('terminal-already');
    if (t.ownerSeen !== 'dead') return reject('owner-not-proven-dead');
    if (t.phase !== 'absent') return reject('terminal-already');
    const session = o.session === undefined ? null : o.session;
    if (!(session === t.owner.session && t.leases.session && t.leases.worktree && t.worktree.present)) {
      return reject('continuation-unproven');
    }
    if (!(o['wrapper-epoch'] > t.owner['wrapper-epoch'] && o['child-epoch'] > t.owner['child-epoch'])) {
      return reject('continuation-unproven');
    }
    t.owner = {pid: o.pid, birth: o.birth, session: t.owner.session, 'wrapper-epoch': o['wrapper-epoch'],
      'child-epoch': o['child-epoch']};
    Object.assign(t, {procBirth: o.birth, ownerSeen: 'unverified', deadline: 0, tokenHash: r.mint || null});
    return {decision: 'applied'};
  }

  // the operator's and the legacy import's kinds, log and receipt-completion
  operator(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    const applied = {decision: 'applied'};
    const evidenceOnly = {decision: 'evidence-only'};
    const done = this.graphSaved(t);
    switch (r.kind) {
      case 'log':
        if (t.state !== 'running') return reject('terminal-already');
        t.counters.logs += 1;
        return applied;
      case 'receipt-completion':
        if (t.state !== 'running') return reject('terminal-already');
        if (!(t.phase === 'absent' && t.exit === 'none')) return reject('illegal-phase-edge');
        if (t.completionReceipt !== null) return reject('terminal-already');
        if (!t.worktree.present) return reject('worktree-missing');
        if (t.worktree.content !== r.candidate) return reject('candidate-mismatch');
        t.completionReceipt = r.candidate;
        return applied;
      case 'probe-route': {
        if (!t.routeOpen) return reject('route-available');
        if (this.now < t.probeAt) return reject('probe-not-due');
        const later = r.deadline > this.now ? r.deadline : this.now + 1;
        Object.assign(t, r.succeeded ? {routeOpen: false, probeAt: 0} : {probeAt: later});
        return applied;
      }
      case 'park':
        if (t.state !== 'running' || t.phase !== 'absent') return reject('terminal-already');
        this.close(t, 'parked');
        Object.assign(t, {waitingOn: r.correlation, waitDeadline: r.deadline ? r.deadline : 0, waitExpired: false});
        return applied;
      case 'deliver': {
        const matches = t.waitingOn !== null && r.correlation === t.waitingOn;
        this.note(t, 'deliver', r.evidence);
        if (!matches) return evidenceOnly;
        Object.assign(t, {waitingOn: null, waitDeadline: 0});
        return applied;
      }
      case 'expire-wait':
        if (t.waitingOn === null) return reject('not-waiting');
        if (!(t.waitDeadline !== 0 && this.now >= t.waitDeadline)) return reject('wait-not-due');
        Object.assign(t, {waitingOn: null, waitDeadline: 0, waitExpired: true});
        return applied;
      case 'reopen': {
        if (r['expected-generation'] !== t.generation) return reject('cas-moved');
        if (!done) return reject('illegal-phase-edge');
        if (t.archived !== null) return reject('held');
        if (this.order.some((n) => this.tasks[n].deps.includes(r.task) && this.committed(this.tasks[n]))) {
          return reject('terminal-already');
        }
        const [retained, retainedBase] = this.retainable(t);
        Object.assign(t, {generation: t.generation + 1, fence: t.fence + 1, attempt: 0, state: 'none',
          phase: 'absent', exit: 'none', reason: 'none', revision: 0, candidate: null, base: null, version: 0,
          disposition: 'none', receipts: {}, effectDone: false, promotions: 0, retries: 0, failure: 'none',
          reconstructed: false, imported: null, reopening: false, retained, retainedBase});
        return applied;
      }
      case 'confirm-archive': case 'propose-archive': case 'archive': {
        if (!done) return reject('illegal-phase-edge');
        if (t.archived !== null) return reject('terminal-already');
        if (r.kind === 'archive' && !(t.archiveConfirmed !== null && r.candidate === t.archiveConfirmed)) {
          return reject('archive-unconfirmed');
        }
        if (r.candidate !== t.candidate) return reject('candidate-mismatch');
        if (r.kind === 'propose-archive' && t.archiveProposed === r.candidate) return evidenceOnly;
        const field = {'confirm-archive': 'archiveConfirmed', archive: 'archived', 'propose-archive': 'archiveProposed'};
        t[field[r.kind]] = r.candidate;
        return applied;
      }
      case 'request-chat':
        if (t.state !== 'running') return reject('terminal-already');
        if (t.chatRequest === t.fence) return reject('chat-requested');
        t.chatRequest = t.fence;
        return applied;
      case 'reconcile-chat':
        if (t.state !== 'running') return reject('terminal-already');
        if (t.chatRequest !== t.fence) return reject('chat-unrequested');
        if (t.chatReconciled === t.fence) return evidenceOnly;
        t.chatReconciled = t.fence;
        return applied;
      case 'assign':
        if (t.assigned) return evidenceOnly;
        t.assigned = true;
        return applied;
      case 'abandon': {
        const effectStarted = t.exit === 'none' &&
          ['effect-prepared', 'effect-committed', 'cleanup-prepared', 'cleanup-committed'].includes(t.phase);
        if (t.abandoned || t.state === 'succeeded' || effectStarted) return reject('terminal-already');
        const inTx = t.exit === 'none' && t.phase !== 'absent' && t.phase !== 'graph-saved';
        if (t.state === 'running') this.close(t, 'abandoned');
        t.abandoned = true;
        if (inTx) Object.assign(t, {exit: 'aborted-preserved', reason: 'operator-abort', revision: t.revision + 1});
        return applied;
      }
      case 'pause':
        if (done || t.abandoned) return reject('terminal-already');
        if (t.paused) return evidenceOnly;
        t.paused = true;
        return applied;
      case 'unpause': {
        if (done || t.abandoned) return reject('terminal-already');
        const notBefore = r.deadline ? r.deadline : 0;
        if (!t.paused && t.notBefore === notBefore) return evidenceOnly;
        t.paused = false;
        t.notBefore = notBefore;
        return applied;
      }
      case 'legacy-done': {
        const inert = done || t.abandoned || t.phase !== 'absent' || t.exit !== 'none';
        this.note(t, 'legacy-done', r.evidence);
        if (inert) return evidenceOnly;
        Object.assign(t, {exit: 'needs-reconciliation', reason: 'legacy-unproven', revision: t.revision + 1,
          legacyDone: true});
        return applied;
      }
      case 'reconcile': {
        const legacy = t.exit === 'needs-reconciliation';
        if (!legacy && t.exit !== 'upgrade-blocked') return reject('illegal-phase-edge');
        Object.assign(t, {exit: 'none', reason: 'none', revision: t.revision + 1});
        if (legacy) Object.assign(t, {phase: 'absent', legacyDone: false});
        return applied;
      }
      case 'reconstruct': {
        if (!(t.exit === 'needs-reconciliation' && t.legacyDone)) return reject('illegal-phase-edge');
        if (t.abandoned) return reject('held');
        if (t.state === 'running') return reject('attempt-live');
        if (!this.depsDone(t)) return reject('dependency-not-done');
        if (this.target !== r.candidate) return reject('evidence-missing');
        const fence = t.fence + 1;
        const receipts = {};
        const base = r.base === undefined ? null : r.base;
        for (const k of RECEIPTS) receipts[k] = {fence, candidate: r.candidate, base};
        Object.assign(t, {fence, attempt: t.attempt + 1, leaseEpoch: t.leaseEpoch + 1, state: 'succeeded',
          phase: 'graph-saved', exit: 'none', reason: 'none', revision: t.revision + 1,
          candidate: r.candidate, base, receipts, reconstructed: true,
          effectDone: true, legacyDone: false, imported: null, depsGeneration: this.depsGeneration(t),
          leases: {worktree: false, session: false, finish: false}});
        return applied;
      }
      default:
        return reject('not-authorized');
    }
  }

  // --- the SaveTransaction (docs/vocabulary.md, "The transaction's steps") -----------------
  binding(t) { return {fence: t.fence, candidate: t.candidate, base: t.base}; }

  bound(t, receipt) {
    const b = t.receipts[receipt];
    return !!b && b.fence === t.fence && b.candidate === t.candidate && b.base === t.base;
  }

  advance(t, kind, changes) {
    Object.assign(t, changes || {});
    t.phase = EDGES[kind][1];
    t.revision += 1;
    return {decision: 'applied'};
  }

  leave(t, exit, reason) {
    t.exit = exit;
    t.reason = reason;
    t.revision += 1;
    return {decision: 'applied'};
  }

  transaction(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    const withDeadline = () => ({deadline: r.deadline ? r.deadline : t.deadline});
    switch (r.kind) {
      case 'submit':
        if (!(t.leases.worktree && t.worktree.present)) return reject('stale-capability');
        return this.advance(t, r.kind, withDeadline());
      case 'quiesce': case 'prepare-cleanup':
        return this.advance(t, r.kind);
      case 'save-work':
        if (!t.worktree.present) return reject('worktree-missing');
        if (t.worktree.content !== r.candidate) return reject('candidate-mismatch');
        if (r.base !== t.builtOn) return reject('base-mismatch');
        t.receipts['work-save'] = {fence: t.fence, candidate: r.candidate, base: t.builtOn};
        return this.advance(t, r.kind, {savedWork: t.worktree.content, candidate: r.candidate,
          base: t.builtOn, version: t.version + 1});
      case 'seal-candidate':
        if (t.candidate !== r.candidate) return reject('candidate-mismatch');
        if (this.marked[t.candidate] && t.candidate !== t.base) return this.leave(t, 'needs-repair', 'protected-path');
        t.receipts.candidate = this.binding(t);
        return this.advance(t, r.kind);
      case 'validate':
        if (t.candidate !== r.candidate) return reject('candidate-mismatch');
        if (r.verdict !== 'pass' && r.verdict !== 'fail') return reject('illegal-phase-edge');
        if (r.verdict === 'fail') return this.leave(t, 'needs-repair', 'validation-failed');
        t.receipts.validation = this.binding(t);
        return this.advance(t, r.kind);
      case 'request-review':
        if (!t.reviewRequired) return reject('illegal-phase-edge');
        return this.advance(t, r.kind, withDeadline());
      case 'accept': {
        const awaited = t.phase === 'awaiting-acceptance';
        const speaker = r.verdict === 'not-required' ? 'daemon' : 'evaluator';
        if (r.actor !== speaker) return reject('not-authorized');
        if (t.candidate !== r.candidate) return reject('candidate-mismatch');
        if (r.verdict === 'fail') {
          if (!awaited) return reject('illegal-phase-edge');
          return this.leave(t, 'needs-repair', 'review-failed');
        }
        if (r.verdict === undefined || r.verdict === null) return reject('illegal-phase-edge');
        if (t.reviewRequired && !awaited) return reject('review-required');
        if (!t.reviewRequired && awaited) return reject('illegal-phase-edge');
        if (t.reviewRequired && r.verdict !== 'pass') return reject('review-required');
        t.receipts.review = this.binding(t);
        return this.advance(t, r.kind, withDeadline());
      }
      case 'record-disposition':
        if (!['land', 'deliver', 'report'].includes(r.disposition)) return reject('illegal-phase-edge');
        t.receipts.disposition = this.binding(t);
        return this.advance(t, r.kind, Object.assign(withDeadline(), {disposition: r.disposition,
          leases: Object.assign({}, t.leases, {finish: true})}));
      case 'prepare-effect':
        // every dependency Done on the generation it had when the attempt opened
        if (!this.depsCurrent(t)) return reject('dependency-reopened');
        return this.advance(t, r.kind);
      case 'commit-effect': {
        const land = t.disposition === 'land';
        const happened = t.effectDone;
        if (t.candidate !== r.candidate || t.base !== r.base) return reject('candidate-mismatch');
        if (!this.bound(t, 'review')) return reject('review-required');
        if (!(happened || !land || this.target === t.base)) return reject('cas-moved');
        if (land && !happened) this.target = t.candidate;
        if (!happened) t.promotions += 1;
        t.effectDone = true;
        t.receipts.effect = this.binding(t);
        return this.advance(t, r.kind);
      }
      case 'commit-cleanup':
        if (t.worktree.present && t.worktree.content !== t.savedWork) return reject('worktree-unsaved');
        t.receipts.cleanup = this.binding(t);
        t.worktree.present = false;
        return this.advance(t, r.kind, {leases: Object.assign({}, t.leases, {worktree: false})});
      case 'save-graph':
        if (!RECEIPTS.slice(0, 7).every((k) => this.bound(t, k))) return reject('evidence-missing');
        t.receipts['graph-save'] = this.binding(t);
        this.advance(t, r.kind, {state: 'succeeded'});
        this.release(t);
        return {decision: 'applied'};
      case 'mark-repair':
        if (!this.targetMoved(t)) return reject('illegal-phase-edge');
        t.leases = Object.assign({}, t.leases, {finish: false});
        return this.leave(t, 'needs-repair', 'target-moved');
      case 'revise': {
        if (t.exit !== 'needs-repair') return reject('illegal-phase-edge');
        if (!t.worktree.present) return reject('worktree-missing');
        if (t.worktree.content !== r.candidate) return reject('candidate-mismatch');
        if (r.base !== this.target) return reject('base-mismatch');
        if (!(t.worktreeBase === r.base || r.candidate === r.base)) return reject('base-mismatch');
        if (t.savedWork !== null) { t.retained = t.savedWork; t.retainedBase = t.base; }
        Object.assign(t, {phase: 'work-saved', exit: 'none', reason: 'none', revision: t.revision + 1,
          savedWork: t.worktree.content, candidate: r.candidate, base: this.target,
          builtOn: this.target, version: t.version + 1,
          receipts: {'work-save': {fence: t.fence, candidate: r.candidate, base: this.target}}});
        return {decision: 'applied'};
      }
      case 'block-upgrade':
        if (!(t.phase !== 'absent' && t.phase !== 'graph-saved' && t.exit === 'none')) {
          return reject('illegal-phase-edge');
        }
        return this.leave(t, 'upgrade-blocked', 'version-skew');
      default:
        return reject('not-authorized');
    }
  }

  targetMoved(t) {
    return t.exit === 'none' && t.phase === 'effect-prepared' && t.disposition === 'land' &&
      !t.effectDone && this.target !== t.base;
  }

  // --- the review valve (docs/vocabulary.md, "The review valve") --------------------------
  flipPassed(v) {
    return v.flip === 'pass' && v.flipManifest === v.manifest && v.flipRequirements === v.requirements &&
      v.manifest !== null;
  }

  evaluationPassed(v) {
    return v.evaluation === 'pass' && v.evalManifest === v.manifest && v.evalRequirements === v.requirements &&
      v.manifest !== null;
  }

  valve(t, r) {
    const v = t.valve;
    const done = v.phase === 'done';
    // once Done, every request of the valve passes its conditions and is evidence only
    const check = (ok, code) => (done || ok ? null : {decision: 'rejected', code});
    const names = v.manifest !== null && v.manifest === r.candidate;
    const named = names && v.requirements === (r.requirements === undefined ? null : r.requirements);
    const blocked = (verdict) => (verdict === 'reject' || verdict === 'incomplete-evidence' ? 'review-blocked'
      : verdict === 'unavailable' ? 'review-unavailable' : 'working');
    const noReviews = {flip: 'absent', flipManifest: null, flipRequirements: null, evaluation: 'absent',
      evalManifest: null, evalRequirements: null};
    const noPublication = {publication: null, publicationOutput: null, publications: 0};
    const field = (k) => (r[k] === undefined ? null : r[k]);
    let refused = null;
    let update = null;
    let noop = false;
    switch (r.kind) {
      case 'submit-manifest': {
        const valid = r.resolvable === true && r['protected-free'] === true && !!r.candidate && !!r.requirements &&
          !!r.output && !!r.validation && ['land', 'report', 'explore'].includes(r.contract);
        refused = check(valid, 'manifest-invalid');
        noop = v.manifest === field('candidate') && v.requirements === field('requirements') &&
          v.contract === field('contract') && v.output === field('output') &&
          v.validation === field('validation') && v.main === field('base');
        update = Object.assign({manifest: field('candidate'), requirements: field('requirements'),
          contract: field('contract'), output: field('output'), validation: field('validation'), main: field('base'),
          phase: 'working', failure: 'none'}, noReviews, noPublication);
        break;
      }
      case 'record-flip':
        refused = check(named, 'manifest-mismatch') || check(VERDICTS.includes(r.review), 'evidence-missing');
        update = Object.assign({}, noReviews, noPublication, {phase: blocked(r.review), flip: r.review,
          flipManifest: field('candidate'), flipRequirements: field('requirements')});
        break;
      case 'record-eval':
        refused = check(named, 'manifest-mismatch') || check(this.flipPassed(v), 'review-not-passed') ||
          check(VERDICTS.includes(r.review), 'evidence-missing');
        update = Object.assign({}, noPublication, {phase: r.review === 'pass' ? 'accepted' : blocked(r.review),
          evaluation: r.review, evalManifest: field('candidate'), evalRequirements: field('requirements')});
        break;
      case 'publish':
        refused = check(names, 'manifest-mismatch') || check(v.phase === 'accepted', 'illegal-phase-edge') ||
          check(this.flipPassed(v) && this.evaluationPassed(v), 'review-not-passed') ||
          check(v.contract !== 'land' || field('base') === v.main, 'main-moved') ||
          check(r.succeeded === true && r['outputs-match'] === true, 'publication-unverified');
        update = {phase: 'published', publication: v.manifest, publicationOutput: v.output, publications: 1};
        break;
      case 'complete': {
        const exactly = v.publication === v.manifest && v.publicationOutput === v.output && v.publications === 1 &&
          v.manifest !== null;
        refused = check(names, 'manifest-mismatch') || check(v.phase === 'published', 'illegal-phase-edge') ||
          check(this.flipPassed(v) && this.evaluationPassed(v), 'review-not-passed') ||
          check(exactly && r.resolvable === true, 'publication-unverified');
        update = {phase: 'done', failure: 'none'};
        break;
      }
      case 'fail-review':
        noop = v.phase === 'published';
        update = {phase: 'failed', failure: r.failure === undefined ? 'none' : r.failure};
        break;
      case 'retry-review':
        refused = check(['failed', 'review-blocked', 'review-unavailable'].includes(v.phase), 'illegal-phase-edge');
        update = Object.assign({phase: 'working', failure: 'none'}, noReviews, noPublication);
        break;
      default:
        return {decision: 'rejected', code: 'not-authorized'};
    }
    if (refused) return refused;
    if (done || noop) return {decision: 'evidence-only'};
    Object.assign(v, update);
    return {decision: 'applied'};
  }

  // --- the world ----------------------------------------------------------------------------
  env(step, replaying) {
    const notNow = () => ({error: `${step.env} is not possible now` + (step.task ? ` for task ${step.task}` : ''),
      kind: 'step'});
    const t = step.task !== undefined ? this.tasks[step.task] : null;
    if (step.task !== undefined && !t) return notNow();
    if (step.env === 'tick') {
      const amount = step.amount === undefined ? 1 : step.amount;
      if (!(amount > 0)) return notNow();
      this.now += amount;
    } else if (step.env === 'owner-dies') {
      if (!(t.procBirth !== 0 && t.owner && t.procBirth === t.owner.birth)) return notNow();
      t.procBirth = 0;
    } else if (step.env === 'pid-reuse') {
      const birth = t.owner ? t.owner.birth : 0;
      if (!(t.procBirth !== birth && step.birth !== birth && step.birth && t.procBirth !== step.birth &&
            birth !== 0)) return notNow();
      t.procBirth = step.birth;
    } else if (step.env === 'move-target') {
      if (!step.content || step.content === this.target) return notNow();
      this.target = step.content;
    } else if (step.env === 'edit') {
      const writable = t.state === 'running' && t.worktree.present && this.alive(t) &&
        ((t.exit === 'none' && (t.phase === 'absent' || t.phase === 'prepared')) || t.exit === 'needs-repair');
      if (!(writable && step.content && t.worktree.content !== step.content &&
            (!step.onto || step.onto === this.target))) return notNow();
      t.worktree.content = step.content;
      if (step.onto) t.worktreeBase = step.onto;
      const paths = ['work.txt', ...(step.paths || [])];
      if (this.protect.some((m) => paths.some(m))) this.marked[step.content] = true;
    } else if (step.env === 'revoke') {           // the operator revokes a principal's credential
      for (const [hash, name] of Object.entries(this.issued)) if (name === step.principal) delete this.issued[hash];
      this.revoked.add(step.principal);
    } else if (step.env === 'converge') {
      this.converge();
      return {ok: true};                          // each request it sends is its own record
    } else if (step.env === 'crash' || step.env === 'lost-response') return {ok: true};
    else return {error: `environment step ${step.env} is not supported`, kind: 'step'};
    if (!replaying) this.append({env: step});
    return {ok: true};
  }

  // --- convergence (docs/vocabulary.md, "Convergence") -------------------------------------
  rank(t) {
    const last = PHASES.length;
    const held = t.exit !== 'none' || t.legacyDone || t.abandoned || (t.waitExpired && t.waitingOn === null);
    if (this.graphSaved(t) || held) return 0;
    if (t.state === 'running' && t.phase !== 'absent') return 1 + (last - 1) - PHASES.indexOf(t.phase);
    if (t.state === 'running') {
      const chat = this.chatPending(t) ? 1 : 0;
      if (t.ownerSeen === 'dead') return last + 5 + chat;
      const gone = t.ownerSeen === 'suspect' || !this.alive(t);
      return (gone ? last + 6 : 0) + chat;
    }
    if (t.routeOpen) return this.now >= t.probeAt ? last + 4 : last + 3;
    return t.requiresAssignment && !t.assigned ? last + 2 : last + 1;
  }

  nextEdge(t) {
    for (const [kind, [from]] of Object.entries(EDGES)) {
      if (kind === 'request-review' && !t.reviewRequired) continue;
      const sources = kind === 'accept' ? [t.reviewRequired ? 'awaiting-acceptance' : 'validated'] : from;
      if (sources.includes(t.phase)) return kind;
    }
    return null;
  }

  convergeRequest(name, t, probed) {
    const p = this.plan(name, t);
    if (!p || !['live-owner', 'scheduled'].includes(p.way) || p.deadline > this.now) return null;
    const base = {actor: 'daemon', task: name, cap: {graph: this.graph.id, task: name, generation: t.generation,
      attempt: t.attempt, fence: t.fence, 'lease-epoch': t.leaseEpoch}};
    if (p.action === 'probe-owner' || p.action === 'await-handoff') {
      if (probed.has(name)) return null;
      probed.add(name);
      const evidence = `pid:${t.owner.pid}:birth:${t.procBirth ? t.procBirth : 'none'}`;
      return Object.assign(base, {kind: 'probe-owner', evidence,
        key: `converge:${name}:f${t.fence}:probe:${evidence}:${t.ownerSeen}:t${this.now}`});
    }
    if (p.action === 'reconcile-chat') {
      return Object.assign(base, {kind: 'reconcile-chat', key: `converge:${name}:f${t.fence}:reconcile-chat`});
    }
    if (p.action === 'declare-lost') {
      return Object.assign(base, {kind: 'declare-lost', key: `converge:${name}:g${t.generation}:f${t.fence}:declare-lost`});
    }
    const tx = Object.assign(base, {'expected-phase': t.exit !== 'none' ? t.exit : t.phase,
      'expected-revision': t.revision});
    if (p.action === 'mark-repair') {
      return Object.assign(tx, {kind: 'mark-repair', key: `converge:${name}:f${t.fence}:r${t.revision}:mark-repair`});
    }
    if (p.action !== 'drive-transaction') return null;
    const kind = this.nextEdge(t);
    if (!kind) return null;
    const params = {
      accept: {candidate: t.candidate, verdict: 'not-required'},
      'save-work': {candidate: t.worktree.present ? t.worktree.content : undefined, base: t.builtOn},
      'seal-candidate': {candidate: t.candidate},
      'record-disposition': {disposition: 'land'},
      'commit-effect': {candidate: t.candidate, base: t.base},
    }[kind] || {};
    const request = Object.assign(tx, params, {kind,
      key: `converge:${name}:g${t.generation}:f${t.fence}:r${t.revision}:${kind}`});
    for (const k of Object.keys(request)) if (request[k] === undefined || request[k] === null) delete request[k];
    return request;
  }

  converge() {
    // a closed graph without a principal holding the role daemon: every request convergence
    // would send is not authenticated, and changes nothing
    if (this.closed && (this.daemon === null || this.revoked.has(this.daemon))) return;
    const probed = new Set();
    const stalled = new Set();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      let progressed = false;
      for (const name of this.order) {
        const t = this.tasks[name];
        if (!['in-progress', 'completing'].includes(this.status(t)) || stalled.has(name)) continue;
        const request = this.convergeRequest(name, t, probed);
        if (!request) continue;
        const rank = this.rank(t);
        const d = this.decide(request, this.daemon, false);
        if (d.decision === 'applied' && request.kind !== 'probe-owner') {
          if (this.rank(t) < rank) progressed = true;
          else stalled.add(name);
        }
      }
      if (!progressed) break;
    }
  }

  // --- the observable projection -------------------------------------------------------------
  status(t) {
    if (this.graphSaved(t)) return 'done';
    if (t.abandoned) return 'abandoned';
    if (t.legacyDone) return 'needs-reconciliation';
    if (t.exit !== 'none') return t.exit;
    if (t.state === 'running') return t.phase !== 'absent' ? 'completing' : 'in-progress';
    return 'open';
  }

  // the planner's one way forward (docs/vocabulary.md, "The planner")
  plan(name, t) {
    if (this.graphSaved(t)) {
      const proposed = t.archived === null && t.candidate !== null && t.archiveProposed === t.candidate;
      if (!(proposed && t.archiveConfirmed !== t.candidate)) return null;
      return {task: name, way: 'wait', action: 'await-archive-confirmation', reason: 'await-archive-confirmation',
        deadline: t.deadline};
    }
    if (t.abandoned) return null;                    // finished
    const depAbandoned = t.deps.some((d) => this.tasks[d].abandoned);
    const running = t.state === 'running';
    const reserved = t.phase !== 'absent';
    const held = t.exit !== 'none' || t.legacyDone;
    const waiting = t.waitingOn !== null;
    const parked = waiting || t.waitExpired;
    const waitDue = waiting && t.waitDeadline !== 0 && this.now >= t.waitDeadline;
    const idle = !running && !held && !parked && !t.reopening;
    const chat = this.chatPending(t);
    const due = this.now >= t.notBefore;
    const open = idle && !t.paused && due && !t.routeOpen;
    const routeClosed = idle && !t.paused && due && t.routeOpen;
    const deps = this.depsDone(t);
    const assigned = !t.requiresAssignment || t.assigned;
    const h = this.held(t);
    const waitsOnOther = t.phase === 'candidate-sealed' || (t.reviewRequired && t.phase === 'awaiting-acceptance');
    const continuation = t.leases.session && t.leases.worktree && t.worktree.present && this.now < t.deadline;
    const owned = running && !reserved && !held;
    const ownerLive = t.ownerSeen === 'unverified' || t.ownerSeen === 'live';
    const dead = t.ownerSeen === 'dead';
    const depReopened = running && reserved && !held && t.phase === 'disposition-recorded' && !this.depsCurrent(t);
    const ways = [
      ['assign', 'runnable', 'assign', open && !assigned],
      ['dispatch', 'runnable', 'dispatch', open && deps && assigned && !h],
      ['repair-required', 'hold', 'await-operator', open && deps && assigned && h === 'repair-required'],
      ['retry-budget-spent', 'hold', 'await-operator', open && deps && assigned && h === 'retry-budget-spent'],
      ['await-dependencies', 'wait', 'await-dependencies', open && !deps && !depAbandoned && assigned],
      ['dependency-abandoned', 'hold', 'await-operator', open && depAbandoned && assigned],
      ['live-owner', 'live-owner', 'probe-owner', owned && ownerLive && t.completionReceipt === null && !chat],
      ['await-handoff', 'live-owner', 'await-handoff', owned && ownerLive && t.completionReceipt !== null && !chat],
      ['reconcile-chat-request', 'scheduled', 'reconcile-chat', owned && ownerLive && chat],
      ['probe-suspect', 'scheduled', 'probe-owner', owned && t.ownerSeen === 'suspect'],
      ['resume-continuation', 'wait', 'resume', owned && dead && continuation && !t.reopening],
      ['declare-lost', 'scheduled', 'declare-lost', owned && dead && (!continuation || t.reopening)],
      ['drive-transaction', 'scheduled', 'drive-transaction',
        running && reserved && !held && !this.targetMoved(t) && !waitsOnOther && !depReopened],
      ['await-review', 'wait', 'await-review', running && !held && waitsOnOther],
      ['mark-repair', 'scheduled', 'mark-repair', running && !held && this.targetMoved(t)],
      ['await-external', 'wait', 'await-external', !running && !held && waiting && !waitDue],
      ['expire-wait', 'scheduled', 'expire-wait', !running && !held && waitDue],
      ['wait-expired', 'hold', 'await-operator', !running && !held && !waiting && t.waitExpired],
      ['paused', 'hold', 'await-operator', idle && t.paused],
      ['not-yet-due', 'wait', 'await-not-before', idle && !t.paused && !due],
      ['await-route-probe', 'wait', 'await-route-probe', routeClosed && this.now < t.probeAt],
      ['probe-route', 'runnable', 'probe-route', routeClosed && this.now >= t.probeAt],
      ['reopen-pending', 'hold', 'await-operator', !running && !held && !parked && t.reopening],
      ['hold', 'hold', 'await-operator', held],
      ['dependency-reopened', 'hold', 'await-operator', depReopened],
    ].filter((w) => w[3]);
    if (ways.length !== 1) {
      const why = ways.length ? 'several ways: ' + ways.map((w) => w[0]).join(', ') : 'no way forward';
      return {task: name, way: 'hold', action: 'await-operator', reason: why, deadline: 0};
    }
    const [reason, way, action] = ways[0];
    const hold = t.exit === 'none' ? 'needs-reconciliation: legacy-unproven' : `${t.exit}: ${t.reason}`;
    return {task: name, way, action, reason: reason === 'hold' ? hold : reason,
      deadline: reason === 'not-yet-due' ? t.notBefore : reason === 'await-route-probe' || reason === 'probe-route'
        ? t.probeAt : reason === 'await-external' || reason === 'expire-wait' ? t.waitDeadline : t.deadline};
  }

  // the evidence rows, with the archive's receipts by their digest and the current attempt's chat
  // by its opening key (docs/vocabulary.md, "The observable projection")
  evidence(t) {
    const rows = t.evidence.slice();
    if (t.chatRequest !== 0 && t.chatRequest === t.fence) rows.push(['request-chat', String(t.fence)]);
    if (t.chatReconciled !== 0 && t.chatReconciled === t.fence) rows.push(['reconcile-chat', String(t.fence)]);
    if (t.archiveConfirmed !== null) rows.push(['confirm-archive', t.archiveConfirmed]);
    if (t.archived !== null) rows.push(['archive', t.archived]);
    if (t.archiveProposed !== null) rows.push(['propose-archive', t.archiveProposed]);
    return rows.sort(byPair);
  }

  project() {
    const tasks = {};
    const ready = [];
    for (const name of this.order) {
      const t = this.tasks[name];
      const plan = this.plan(name, t);
      if (plan && plan.reason === 'dispatch') ready.push(name);
      const after = ['effect-prepared', 'effect-committed', 'cleanup-prepared', 'cleanup-committed'];
      const receipts = {};
      for (const k of RECEIPTS) if (t.receipts[k]) receipts[k] = Object.assign({}, t.receipts[k]);
      tasks[name] = {
        status: this.status(t), 'dependency-satisfied': this.graphSaved(t), plan,
        generation: t.generation, attempt: t.attempt, fence: t.fence, 'lease-epoch': t.leaseEpoch,
        'attempt-state': t.state, 'owner-seen': t.ownerSeen,
        owner: t.state === 'running' ? t.owner : null,
        leases: Object.assign({}, t.leases),
        phase: t.phase, exit: t.exit, reason: t.reason, revision: t.revision,
        candidate: t.candidate, base: t.base, version: t.version, disposition: t.disposition, receipts,
        worktree: Object.assign({}, t.worktree),
        'saved-work': t.savedWork, retained: t.retained, imported: t.imported, promotions: t.promotions,
        'completion-receipt': t.completionReceipt,
        'effect-done': t.effectDone, deadline: t.deadline,
        'recovery-rank': t.state === 'running' && t.phase !== 'absent' ? (after.includes(t.phase) ? 2 : 1) : 0,
        counters: Object.assign({}, t.counters),
        evidence: this.evidence(t), failure: t.failure, retries: t.retries, 'waiting-on': t.waitingOn,
        'wait-deadline': t.waitDeadline, 'wait-expired': t.waitExpired, assigned: t.assigned, 'legacy-done': t.legacyDone,
        reconstructed: t.reconstructed, abandoned: t.abandoned, paused: t.paused, 'not-before': t.notBefore,
        reopening: t.reopening,
        route: t.route, 'route-breaker': t.routeOpen ? 'unavailable' : 'available', 'route-probe-at': t.probeAt,
        review: {phase: t.valve.phase, manifest: t.valve.manifest, flip: t.valve.flip,
          evaluation: t.valve.evaluation, publication: t.valve.publication, publications: t.valve.publications,
          failure: t.valve.failure},
      };
    }
    const journal = {};
    for (const [k, v] of Object.entries(this.journal)) journal[k] = v.decision;
    return {target: this.target, now: this.now, tasks, journal, ready: ready.sort()};
  }
}

// --- the protocol loop -------------------------------------------------------------------------
let kernel = null;

function handle(msg) {
  if (msg.op === 'start' || msg.op === 'recover') {
    if (msg.protocol !== PROTOCOL) return {error: `unsupported protocol ${JSON.stringify(msg.protocol)}`};
    kernel = new Kernel(msg.storage);
    return msg.op === 'start' ? kernel.start(msg) : kernel.recover();
  }
  if (msg.op === 'stop') return {stopped: true};
  if (msg.op === 'reset') {                // the storage closed, all forgotten: as if just started
    if (kernel && kernel.fd !== null) fs.closeSync(kernel.fd);
    kernel = null;
    return {reset: true};
  }
  if (!kernel) return {error: 'send start or recover first'};
  if (msg.op === 'apply') return kernel.apply(msg);
  if (msg.op === 'env') return kernel.env(msg.step, false);
  if (msg.op === 'project') return {projection: kernel.project()};
  return {error: `unknown op ${JSON.stringify(msg.op)}`};
}

const rl = readline.createInterface({input: process.stdin});
rl.on('line', (line) => {
  if (!line.trim()) return;
  let reply;
  try {
    reply = handle(JSON.parse(line));
  } catch (e) {
    reply = {error: `bad message: ${String(e.message).split('\n')[0]}`};
  }
  fs.writeSync(1, JSON.stringify(reply) + '\n');
  if (reply.stopped) process.exit(0);
});
