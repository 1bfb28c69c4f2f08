#!/usr/bin/env node
// A small attempt-control kernel for Node.js, written from docs/vocabulary.md and
// docs/conformance-protocol.md, gated with:
//
//   wgk gate --quick --external 'node examples/node-kernel/kernel.js'
//
// It declares a subset of the kinds (dispatch, heartbeat, message, fail): admission of an
// attempt (a retry after a failed one within the task's retry budget, none after a semantic
// failure), its capability token, the first terminal report, evidence by id, the journal. Everything it must
// not lose is one append-only log in the storage directory, fsynced before each answer;
// recover replays the log. Each appended record is a durable boundary (crash-after).
// No package is needed.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const readline = require('readline');

const PROTOCOL = 'wgk-conformance/2';
const KINDS = ['dispatch', 'heartbeat', 'message', 'fail'];
const ENV = ['tick', 'owner-dies'];
const AUTHORITY = {dispatch: ['daemon'], heartbeat: ['worker', 'wrapper'], message: null,
  fail: ['worker', 'wrapper']};
const OWN_PROCESS = ['worker', 'wrapper', 'broker'];
const K_KINDS = ['heartbeat', 'fail'];
const FAILURES = ['none', 'nothing-saved', 'zero-progress', 'provider', 'semantic'];
const DEFAULT_RETRY_BUDGET = 2;
const HOLDS = ['assignment-required', 'dependency-not-done'];

const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const same = (a, b) => typeof a === 'string' && typeof b === 'string' && a.length === b.length &&
  crypto.timingSafeEqual(Buffer.from(a), Buffer.from(b));

// evidence is a set of [kind, id] pairs, projected sorted (docs/vocabulary.md)
const byPair = ([k1, i1], [k2, i2]) => (k1 < k2 ? -1 : k1 > k2 ? 1 : i1 < i2 ? -1 : i1 > i2 ? 1 : 0);

function canonical(v) {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  if (v && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
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
    this.issued = head.issued || {};               // sha256(credential) -> principal
    this.closed = Array.isArray(g.principals);
    this.roles = {};
    for (const p of g.principals || []) this.roles[p.name] = p.roles || [];
    this.dead = {};                                 // "pid:birth" -> true (the world)
    this.journal = {};
    this.tasks = {};
    for (const t of g.tasks) {
      this.tasks[t.name] = {
        deps: t.deps || [], requiresAssignment: !!t['requires-assignment'],
        attempt: 0, fence: 0, leaseEpoch: 0, state: 'none', owner: null, tokenHash: null,
        worktree: null, evidence: [], messages: 0, failure: 'none', retries: 0,
        retryBudget: t['retry-budget'] === undefined ? DEFAULT_RETRY_BUDGET : t['retry-budget'],
      };
    }
  }

  start(msg) {
    fs.mkdirSync(msg.storage, {recursive: true});
    const issued = {};
    for (const [name, cred] of Object.entries(msg.credentials || {})) issued[sha256(cred)] = name;
    const head = {graph: msg.graph, issued};
    if (msg.initial && Object.keys(msg.initial).length) {
      return {error: 'seeded attempts are not supported by this kernel', kind: 'step'};
    }
    this.fd = fs.openSync(this.log, 'w');
    this.init(head);
    this.append({head});
    return {started: true, capabilities: {kinds: KINDS, worlds: ['memory'], processes: 1,
      'crash-hook': true, env: ENV, seeds: false}};
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
    if (request.kind === 'fail' && request.failure !== undefined && !FAILURES.includes(request.failure)) {
      return {error: `fail: failure must be one of ${FAILURES.join(', ')}`, kind: 'step'};
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
    const decision = this.rule(r, principal);
    if (decision.decision === 'rejected' && HOLDS.includes(decision.code)) return decision;
    this.journal[jkey] = {digest, decision};
    if (!replaying) this.append({request: r, principal});
    return decision;
  }

  rule(r, principal) {
    const reject = (code) => ({decision: 'rejected', code});
    if (principal && !(this.roles[principal] || []).includes(r.actor)) return reject('role-not-held');
    const allowed = AUTHORITY[r.kind];
    if (allowed === undefined) return reject('not-authorized');
    if (allowed && !allowed.includes(r.actor)) return reject('not-authorized');
    const t = this.tasks[r.task];
    if (!t) return reject('unknown-task');
    if (K_KINDS.includes(r.kind)) {
      const cap = r.cap || {};
      if (cap.graph !== this.graph.id || cap.task !== r.task || t.attempt === 0) return reject('unknown-attempt');
      if (cap.generation !== 0 || cap.attempt !== t.attempt || cap.fence !== t.fence ||
          cap['lease-epoch'] !== t.leaseEpoch) return reject('stale-capability');
      if (OWN_PROCESS.includes(r.actor) && !(t.tokenHash && same(r['token-hash'], t.tokenHash))) {
        return reject('token-mismatch');
      }
    }
    if (r.kind === 'dispatch') return this.dispatch(t, r);
    if (r.kind === 'heartbeat') {
      this.evidence(t, 'heartbeat', r.evidence);
      return {decision: 'evidence-only'};
    }
    if (r.kind === 'message') {
      if (this.evidence(t, 'message', r.evidence) && t.state === 'running') t.messages += 1;
      return {decision: 'evidence-only'};
    }
    if (r.kind === 'fail') return this.fail(t, r);
    return reject('not-authorized');
  }

  evidence(t, kind, id) {
    if (t.evidence.some(([k, i]) => k === kind && i === id)) return false;
    t.evidence.push([kind, id]);
    return true;
  }

  // The first terminal report wins: a running attempt fails (why: its failure); a report on
  // an attempt already failed is evidence only.
  fail(t, r) {
    const failure = r.failure === undefined ? 'none' : r.failure;
    this.evidence(t, 'fail', r.evidence);
    if (t.state !== 'running') return {decision: 'evidence-only'};
    t.state = 'failed';
    t.failure = failure;
    return {decision: 'applied'};
  }

  // Why a task whose last attempt failed cannot be dispatched again (null: it can, as a retry).
  held(t) {
    if (t.state !== 'failed') return null;
    if (t.failure === 'semantic') return 'repair-required';
    if (t.retries >= t.retryBudget) return 'retry-budget-spent';
    return null;
  }

  dispatch(t, r) {
    const reject = (code) => ({decision: 'rejected', code});
    if (t.requiresAssignment) return reject('assignment-required');
    if (t.deps.length) return reject('dependency-not-done');     // no task of this kernel is Done
    if (r['expected-attempt'] !== t.attempt) return reject('cas-moved');
    if (t.state === 'running') return reject('attempt-live');
    const held = this.held(t);
    if (held) return reject(held);
    if (r.imports) return reject('nothing-retained');
    const o = r.owner || {};
    if (t.state === 'failed') t.retries += 1;        // an automatic retry of this generation
    t.failure = 'none';
    t.attempt += 1; t.fence += 1; t.leaseEpoch += 1;
    t.state = 'running';
    t.owner = {pid: o.pid, birth: o.birth, session: o.session === undefined ? null : o.session,
      'wrapper-epoch': o['wrapper-epoch'] || 1, 'child-epoch': o['child-epoch'] || 1};
    t.tokenHash = r.mint || null;
    t.worktree = this.target;
    return {decision: 'applied'};
  }

  // --- the world ----------------------------------------------------------------------------
  env(step, replaying) {
    if (step.env === 'tick') this.now += step.amount === undefined ? 1 : step.amount;
    else if (step.env === 'owner-dies') {
      const t = this.tasks[step.task];
      const o = t && t.owner;
      if (!o || this.dead[`${o.pid}:${o.birth}`]) {
        return {error: `owner-dies is not possible now for task ${step.task}`, kind: 'step'};
      }
      this.dead[`${o.pid}:${o.birth}`] = true;
    } else if (step.env === 'crash' || step.env === 'lost-response') return {ok: true};
    else return {error: `environment step ${step.env} is not supported`, kind: 'step'};
    if (!replaying) this.append({env: step});
    return {ok: true};
  }

  // --- the observable projection -------------------------------------------------------------
  project() {
    const tasks = {};
    const ready = [];
    for (const [name, t] of Object.entries(this.tasks)) {
      const running = t.state === 'running';
      const held = this.held(t);
      const open = t.attempt === 0 || (t.state === 'failed' && !held);
      if (open && t.deps.length === 0) ready.push(name);
      const plan = running
        ? {task: name, way: 'live-owner', action: 'probe-owner', reason: 'live-owner', deadline: 0}
        : held ? {task: name, way: 'hold', action: 'await-operator', reason: held, deadline: 0}
        : t.deps.length
          ? {task: name, way: 'wait', action: 'await-dependencies', reason: 'await-dependencies', deadline: 0}
          : {task: name, way: 'runnable', action: 'dispatch', reason: 'dispatch', deadline: 0};
      tasks[name] = {
        status: running ? 'in-progress' : 'open', 'dependency-satisfied': false, plan,
        generation: 0, attempt: t.attempt, fence: t.fence, 'lease-epoch': t.leaseEpoch,
        'attempt-state': t.state, 'owner-seen': 'unverified', owner: running ? t.owner : null,
        leases: {worktree: running, session: running, finish: false},
        phase: 'absent', exit: 'none', reason: 'none', revision: 0, candidate: null, base: null,
        version: 0, disposition: 'none', receipts: {},
        worktree: {present: t.worktree !== null, content: t.worktree, origin: t.worktree},
        'saved-work': null, retained: null, imported: null, promotions: 0, 'effect-done': false,
        deadline: 0, 'recovery-rank': 0,
        counters: {compactions: 0, continuations: 0, acks: 0, 'provider-failures': 0,
          messages: t.messages, logs: 0},
        evidence: t.evidence.slice().sort(byPair), failure: t.failure, retries: t.retries, 'waiting-on': null,
        'wait-deadline': 0, 'wait-expired': false, assigned: false, 'legacy-done': false,
        reconstructed: false, abandoned: false, paused: false, 'not-before': 0, reopening: false,
        // the review valve: this kernel declares none of its kinds, so every task's valve is
        // the initial one
        review: {phase: 'working', manifest: null, flip: 'absent', evaluation: 'absent',
          publication: null, publications: 0, failure: 'none'},
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
