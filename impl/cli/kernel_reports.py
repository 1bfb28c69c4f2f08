"""``wgk kernel`` subcommands that read and report: status, show, converge, audit, import,
rebuild, verify-ledger."""
from __future__ import annotations

from ..front.kernel import Kernel
from .kernel_anchor import read_anchors
from .kernel_open import require_task
from .kernel_principals import read_credential
from .kernel_requests import authenticated
from .output import emit, emit_json


def do_status(k: Kernel, args) -> int:
    rows = []
    for name in k.names():
        t = k.record(name)
        p = k.plan(name)
        rows.append({"task": name, "status": k.status(name),
                     "way": p.way if p else "-", "action": p.action if p else "-",
                     "reason": p.reason if p else "-", "deadline": p.deadline if p else 0,
                     "generation": t.generation, "attempt": t.attempt, "phase": t.visible_phase,
                     "candidate": t.candidate})
    if getattr(args, "json", False):
        emit_json({"tasks": rows, "ready": k.ready()})
        return 0
    header = ("TASK", "STATUS", "WAY", "ACTION", "REASON", "GEN", "ATT", "PHASE", "CANDIDATE")
    table = [header] + [(r["task"], r["status"], r["way"], r["action"], r["reason"],
                         str(r["generation"]), str(r["attempt"]), r["phase"],
                         (r["candidate"] or "-")[:12]) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def do_show(k: Kernel, args) -> int:
    require_task(k, args.name)
    shown = k.show(args.name)
    if getattr(args, "json", False):
        emit_json(shown)
        return 0
    print(f"{shown['task']}: {shown['status']}  (generation {shown['generation']}, attempt "
          f"{shown['attempt']}, fence {shown['fence']}, {shown['attempt-state']})")
    print(f"  admission: {'paused' if shown['paused'] else 'not paused'}, not before "
          f"{shown['not-before'] or '-'}"
          + (", a reset's intent pending (the old owner's exit not yet proven or released)"
             if shown["reopening"] else ""))
    if shown["route"]:
        print(f"  provider route: {shown['route']}, breaker {shown['route-breaker']}"
              + (f", next probe at {shown['route-probe-at']}"
                 if shown["route-breaker"] == "unavailable" else ""))
    if shown["plan"]:
        pl = shown["plan"]
        print(f"  way forward: {pl['way']} / {pl['action']} ({pl['reason']}, due {pl['deadline']})")
    print(f"  transaction: {shown['phase']} exit {shown['exit']} ({shown['reason']}) "
          f"revision {shown['revision']} candidate {shown['candidate']} base {shown['base']}")
    print("  receipts:")
    for name, b in shown["receipts"].items():
        print(f"    {name:12} fence {b['fence']} candidate {b['candidate']} base {b['base']}")
    print("  phases:")
    for ph in shown["phases"]:
        moved = ", ".join(f"{f} {ph[f]}" for f in ("phase", "exit", "reason") if f in ph)
        print(f"    #{ph['seq']:<5} {ph['kind'] or 'seed':20} {moved}  [{ph['key']}]")
    print("  evidence:")
    for kind, ident, seq in shown["evidence"]:
        print(f"    #{seq:<5} {kind:18} {ident}")
    for section in ("attempts", "pins", "effects", "worktrees", "legacy"):
        if shown[section]:
            print(f"  {section}:")
            for row in shown[section]:
                print("    " + ", ".join(f"{k_}={v}" for k_, v in row.items()))
    return 0


def do_converge(k: Kernel, args) -> int:
    report = k.converge(credential=read_credential(args))
    for s in report.sent:
        authenticated(s.response)
    if getattr(args, "json", False):
        emit_json(report.to_json())
        return 0
    for s in report.sent:
        r = s.request
        print(f"sent {r['kind']} for {r['task']}: {s.response['decision']}"
              + (f" ({s.response['code']})" if "code" in s.response else ""))
    for p in report.plans:
        print(f"{p.task}: {p.way} / {p.action} ({p.reason})")
    return 0


def do_audit(k: Kernel, args) -> int:
    report = k.audit(read_anchors(args.anchor, k.graph_id))
    lines = [f"{f.check}: {f.task or '-'}: {f.detail}" for f in report.findings]
    text = "\n".join(lines) if lines else f"audit ok: {report.tasks} tasks, {report.events} events"
    return emit(args, report.to_json(), text, 0 if report.ok else 1)


def do_import(k: Kernel, args) -> int:
    report = k.import_legacy(args.file, read_credential(args))
    lines = [f"added {len(report.added)} tasks, {len(report.existing)} already known"]
    for q in report.quarantined:
        lines.append(f"quarantined {q['task']} (line {q['line']}): {q['status']}; would have "
                     f"unlocked: {', '.join(q['would-have-unlocked']) or 'nothing'}")
    for o in report.other:
        lines.append(f"{o['task']} (line {o['line']}): legacy {o['legacy-status']}, now {o['now']}")
    return emit(args, report.to_json(), "\n".join(lines))


def do_rebuild(k: Kernel, args) -> int:
    report = k.rebuild(apply=args.apply)
    text = (f"rebuild ok: {report.events} events reproduce every table and the projection"
            if report.ok else "\n".join(report.differences)
            + ("\nthe tables were replaced by the rebuilt ones" if report.applied else ""))
    return emit(args, report.to_json(), text, 0 if report.ok else 1)


def do_verify(k: Kernel, args) -> int:
    v = k.verify_ledger(anchors=read_anchors(args.anchor, k.graph_id))
    return emit(args, v.to_json(), "\n".join(v.lines()), 0 if v.ok else 1)
