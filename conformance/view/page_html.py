"""The page's HTML skeleton and style (no build step, no external asset)."""
from __future__ import annotations

import html
import json

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { background: #243447; color: #fff; padding: 10px 16px; }
header h1 { font-size: 17px; margin: 0 0 4px; }
header .meta { font-size: 12px; opacity: .85; }
header select, header button, header a { font-size: 13px; }
main { display: grid; grid-template-columns: minmax(340px, 34%) 1fr; gap: 12px; padding: 12px; }
section { background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: 8px 10px;
          margin-bottom: 12px; }
h2 { font-size: 14px; margin: 2px 0 8px; color: #243447; }
table { border-collapse: collapse; width: 100%; }
td, th { padding: 2px 6px; text-align: left; vertical-align: top; border-bottom: 1px solid #eef0f3; }
th { font-weight: 600; background: #f0f2f5; }
#steps tr { cursor: pointer; }
#steps tr.current { background: #dbe9ff; }
#steps tr.breaks td.label { color: #b00020; font-weight: 600; }
#steps td.n { color: #667; width: 3em; }
td.diverges { background: #ffe0e0; font-weight: 600; }
.decision.applied { color: #1b7f3b; } .decision.rejected { color: #a35b00; }
.badge { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 8px;
         background: #b00020; color: #fff; margin-left: 4px; }
.toolbar { display: flex; gap: 6px; align-items: center; margin-bottom: 8px; flex-wrap: wrap; }
.toolbar button, .toolbar a { padding: 3px 10px; }
#broken li { color: #b00020; } #broken li b { font-family: monospace; }
.ok { color: #1b7f3b; }
td.changed { background: #fff3c4; font-weight: 600; }
td.key { font-family: monospace; font-size: 12px; color: #445; white-space: nowrap; }
tr.section th { background: #e4e8ee; text-transform: uppercase; font-size: 11px; letter-spacing: .5px; }
details.fold summary { color: #667; cursor: pointer; font-size: 12px; }
.tasks { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
.task { border: 2px solid #8894a8; border-radius: 6px; padding: 4px 8px; min-width: 140px; }
.task .name { font-weight: 700; } .task .way { font-size: 12px; color: #445; }
.task.done { border-color: #1b7f3b; } .task.needs-repair, .task.needs-reconciliation { border-color: #b00020; }
.task.in-progress { border-color: #2962ff; }
.arrow { color: #8894a8; }
#enabled button.choice { display: block; width: 100%; text-align: left; margin: 2px 0;
         padding: 3px 6px; background: #f8f9fb; border: 1px solid #d8dce3; border-radius: 4px; cursor: pointer; }
#enabled button.choice:hover { background: #e8f0ff; }
#enabled button.choice.breaks { border-color: #b00020; }
#enabled .muted { color: #889; font-size: 12px; }
#message { color: #b00020; min-height: 1.2em; } #message.ok { color: #1b7f3b; }
.static .live { display: none; }
"""

BODY = """
<header>
  <h1 id="title"></h1>
  <div class="meta" id="meta"></div>
  <div class="meta live">semantics <select id="semantics"></select></div>
</header>
<main>
  <div>
    <section>
      <div class="toolbar">
        <button id="back" title="previous state">&#9664; back</button>
        <button id="forward" title="next state">forward &#9654;</button>
        <a id="export" href="/api/export" download="path.trace.json">export trace</a>
        <span id="position"></span>
      </div>
      <h2>Steps</h2>
      <table id="steps"></table>
    </section>
    <section class="live" id="ask">
      <h2>Ask z3</h2>
      <form id="ask-form">
        <select id="ask-kind"><option value="reach">reach</option>
          <option value="invariant">invariant</option></select>
        <input id="ask-text" size="34" placeholder='t1.status == "needs-repair"'>
        depth <input id="ask-depth" type="number" value="10" min="0" max="30" style="width:4em">
        <button id="ask-go" type="submit">ask</button>
      </form>
    </section>
    <div id="message"></div>
  </div>
  <div>
    <section id="invariants-box"><h2>Invariants</h2><div id="invariants"></div></section>
    <section><h2>Task graph</h2><div id="graph" class="tasks"></div></section>
    <section><h2 id="state-title">State</h2><div id="state"></div></section>
    <section id="enabled-box"><h2>Enabled from this state</h2><div id="enabled"></div></section>
  </div>
</main>
"""


def page(script: str, data: dict | None = None, title: str = "wgk view") -> str:
    """The whole page; with ``data`` the stepper reads it instead of the API (a static report)."""
    embedded = ""
    if data is not None:
        text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        embedded = f'<script id="wgk-data" type="application/json">{text}</script>\n'
    klass = ' class="static"' if data is not None else ""
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style></head>\n"
            f"<body{klass}>{BODY}\n{embedded}"
            f"<script>{script}</script>\n</body></html>\n")
