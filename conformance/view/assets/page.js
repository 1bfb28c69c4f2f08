"use strict";
const embedded = document.getElementById("wgk-data");
const STATIC = embedded ? JSON.parse(embedded.textContent) : null;
let session = null, k = 0;

const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [a, v] of Object.entries(attrs || {})) {
    if (a === "text") e.textContent = v; else if (a === "cls") e.className = v; else e.setAttribute(a, v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined)
    e.append(typeof kid === "string" ? document.createTextNode(kid) : kid);
  return e;
}
async function api(method, path, body) {
  if (STATIC) {
    const q = new URLSearchParams(path.split("?")[1] || "");
    if (path.startsWith("/api/session")) return STATIC.session;
    if (path.startsWith("/api/state")) return STATIC.states[+q.get("k")];
    if (path.startsWith("/api/enabled")) return STATIC.enabled[+q.get("k")];
    throw new Error("not available in a static report");
  }
  const r = await fetch(path, {method, headers: {"Content-Type": "application/json"},
                               body: body === undefined ? undefined : JSON.stringify(body)});
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}
function say(text, ok) { $("message").textContent = text || ""; $("message").className = ok ? "ok" : ""; }
function decisionCell(text) {
  const cls = "decision " + (text || "").split(":")[0];
  return el("td", {cls, text: text || "-"});
}

function implCell(s) {
  const td = decisionCell(s.impl);
  if (s.impl !== s.decision) { td.classList.add("diverges"); td.title = "the implementation decides otherwise"; }
  return td;
}

function renderSession() {
  $("title").textContent = session.title;
  const inst = session.instance;
  $("meta").textContent = `${session.source.kind} \u00b7 ${session.source.provenance} \u00b7 ` +
    `${session.steps.length} steps \u00b7 semantics: ${session.semantics}` +
    ` \u00b7 groups ${inst.groups.join(",")}`;
  const sel = $("semantics");
  sel.replaceChildren(...["model", ...session.mutants].map(m => {
    const o = el("option", {value: m, text: m}); if (m === session.semantics) o.selected = true; return o;
  }));
  const head = el("tr", {}, el("th", {text: "step"}), el("th", {text: "actor"}),
                  el("th", {text: "request / environment"}), el("th", {text: "model"}),
                  session.system === "both" ? el("th", {text: "impl"}) : null);
  const rows = [head, el("tr", {"data-k": "0"}, el("td", {cls: "n", text: ""}),
                         el("td", {text: ""}), el("td", {cls: "label", text: "initial state"}),
                         el("td", {text: ""}), session.system === "both" ? el("td") : null)];
  for (const s of session.steps) {
    const label = el("td", {cls: "label", text: s.label});
    for (const b of s.breaks) label.append(el("span", {cls: "badge", text: b}));
    rows.push(el("tr", {"data-k": String(s.index + 1), cls: s.breaks.length ? "breaks" : ""},
                 el("td", {cls: "n", text: String(s.index)}), el("td", {text: s.actor}), label,
                 decisionCell(s.decision), session.system === "both" ? implCell(s) : null));
  }
  $("steps").replaceChildren(...rows);
  $("invariant-ids").replaceChildren(...session.invariants.map(i => el("option", {value: i})));
  for (const tr of $("steps").querySelectorAll("tr[data-k]"))
    tr.addEventListener("click", () => go(+tr.dataset.k));
}

function renderInvariants(st) {
  const box = $("invariants");
  const parts = [];
  if (st.invariants.broken.length) {
    parts.push(el("ul", {id: "broken"}, ...st.invariants.broken.map(b =>
      el("li", {}, el("b", {text: b.id}), ` (${b.scope}): ${b.doc}`))));
  } else parts.push(el("div", {id: "broken-none", cls: "ok", text: "no invariant broken here"}));
  const fb = session.first_break;
  if (fb) parts.push(el("div", {id: "first-break"}, `first break on this path: step ${fb.step} ` +
                        `breaks ${fb.id}`));
  parts.push(el("details", {cls: "fold"}, el("summary", {text: `${st.invariants.holds.length} hold`}),
                el("div", {id: "holds", text: st.invariants.holds.join(", ")})));
  box.replaceChildren(...parts);
}

function renderGraph(st) {
  const out = [];
  st.graph.forEach((t, i) => {
    if (i) out.push(el("span", {cls: "arrow", text: t.deps.length ? `\u2190 ${t.deps.join(", ")}` : "\u00b7"}));
    out.push(el("div", {cls: "task " + t.status, "data-task": t.name},
                el("div", {cls: "name", text: `${t.name} \u00b7 ${t.status}`}),
                el("div", {cls: "way", text: `${t["attempt-state"]}, ${t.exit !== "none" ? t.exit : t.phase}`}),
                el("div", {cls: "way", text: `way forward: ${t.way}`})));
  });
  $("graph").replaceChildren(...out);
}

function renderState(st) {
  $("state-title").textContent = st.k ? `State after step ${st.step.index}: ${st.step.label} \u2192 ${st.step.decision}`
                                      : "Initial state";
  const names = st.tasks.map(t => t.name);
  const byKey = {};
  st.tasks.forEach((t, ti) => t.rows.forEach(r => {
    (byKey[r.key] = byKey[r.key] || {key: r.key, section: r.section, cells: []}).cells[ti] = r;
  }));
  const table = el("table", {id: "state-table"},
                   el("tr", {}, el("th", {text: "field"}), ...names.map(n => el("th", {text: n}))));
  const g = st.globals;
  for (const key of ["target", "now"]) {
    const v = g[key], changed = "before" in v;
    table.append(el("tr", {"data-key": key}, el("td", {cls: "key", text: key}),
                    el("td", {cls: changed ? "changed" : "", colspan: String(names.length),
                              text: changed ? `${v.before} \u2192 ${v.value}` : String(v.value)})));
  }
  for (const section of st.sections) {
    const rows = Object.values(byKey).filter(r => r.section === section);
    if (!rows.length) continue;
    table.append(el("tr", {cls: "section"}, el("th", {colspan: String(names.length + 1), text: section})));
    const changed = rows.filter(r => r.cells.some(c => c && "before" in c));
    const same = rows.filter(r => !changed.includes(r));
    for (const r of changed) table.append(fieldRow(r, names.length));
    if (same.length) {
      const inner = el("table", {cls: "folded"}, ...same.map(r => fieldRow(r, names.length)));
      table.append(el("tr", {}, el("td", {colspan: String(names.length + 1)},
        el("details", {cls: "fold"}, el("summary", {text: `${same.length} unchanged`}), inner))));
    }
  }
  $("state").replaceChildren(table);
}
function fieldRow(r, n) {
  const cells = [];
  for (let i = 0; i < n; i++) {
    const c = r.cells[i];
    const changed = c && "before" in c;
    cells.push(el("td", {cls: changed ? "changed" : "", text: !c ? "" :
                         changed ? `${c.before} \u2192 ${c.value}` : c.value}));
  }
  return el("tr", {"data-key": r.key}, el("td", {cls: "key", text: r.key}), ...cells);
}

function renderEnabled(en) {
  if (!en) { $("enabled").replaceChildren(el("div", {cls: "muted", text: "not recorded"})); return; }
  const kids = en.steps.map(c => {
    const b = el("button", {cls: "choice" + (c.breaks.length ? " breaks" : ""), "data-label": c.label},
                 el("span", {text: c.label}), ` \u2192 ${c.decision === "-" ? "taken" : c.decision}`,
                 el("span", {cls: "muted", text: ` (${c.changes} field${c.changes === 1 ? "" : "s"} change)`}),
                 ...c.breaks.map(x => el("span", {cls: "badge", text: x})));
    if (STATIC) b.disabled = true; else b.addEventListener("click", () => extend(c));
    return b;
  });
  $("enabled").replaceChildren(...(kids.length ? kids : [el("div", {cls: "muted", text: "nothing enabled"})]));
}

async function go(target) {
  k = Math.max(0, Math.min(target, session.steps.length));
  const [st, en] = await Promise.all([api("GET", `/api/state?k=${k}`), api("GET", `/api/enabled?k=${k}`)]);
  for (const tr of $("steps").querySelectorAll("tr[data-k]"))
    tr.classList.toggle("current", +tr.dataset.k === k);
  $("position").textContent = `state ${k} of ${session.steps.length}`;
  $("back").disabled = k === 0; $("forward").disabled = k === session.steps.length;
  renderInvariants(st); renderGraph(st); renderState(st); renderEnabled(en);
  document.body.dataset.k = String(k);
}
async function reload(target) { session = await api("GET", "/api/session"); renderSession(); await go(target); }
async function extend(choice) {
  try { session = await api("POST", "/api/extend", {at: k, step: choice.wire}); say("");
        renderSession(); await go(k + 1); } catch (e) { say(e.message); }
}

function wire() {
  $("back").addEventListener("click", () => go(k - 1));
  $("forward").addEventListener("click", () => go(k + 1));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") return;
    if (e.key === "ArrowLeft") go(k - 1); if (e.key === "ArrowRight") go(k + 1);
  });
  if (STATIC) {
    const blob = new Blob([JSON.stringify(STATIC.export, null, 2) + "\n"], {type: "application/json"});
    $("export").href = URL.createObjectURL(blob);
    return;
  }
  $("semantics").addEventListener("change", async (e) => {
    try { session = await api("POST", "/api/semantics", {mutant: e.target.value}); say("");
          renderSession(); await go(k); } catch (err) { say(err.message); }
  });
  $("ask-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {depth: +$("ask-depth").value}; body[$("ask-kind").value] = $("ask-text").value;
    say("asking z3\u2026", true);
    try { session = await api("POST", "/api/ask", body); renderSession();
          say(`found: ${session.steps.length} steps`, true); await go(session.steps.length); }
    catch (err) { say(err.message); }
  });
}

wire();
reload(STATIC ? STATIC.start : 0).then(() => { document.body.dataset.ready = "1"; })
  .catch(e => say(e.message));
