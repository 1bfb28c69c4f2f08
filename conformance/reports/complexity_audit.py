"""The peer's audited baseline for the complexity budget, read from the deletion-map traces the
repository holds (translated from the peer's deletion audit by ``wgk import-wg``)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from wgk.conformance.reports.complexity_source import ROOT

AUDIT_DIR = "traces/peers/wg/deletion-map"


@dataclass(frozen=True)
class Baseline:
    """What the peer's deletion audit states for a figure (``value`` None: not stated)."""

    value: int | None
    counted: str


# --- the peer's audited baseline --------------------------------------------------------------

_HISTORY = re.compile(r"(?:Historical trace: |; )\d+\. ([^:;]+?): ")
_EVIDENCE = re.compile(r"(?:Source evidence: |; )(\S+[/.]\S+) (.+?) (\d+-\d+(?:,\d+-\d+)*): ")


@dataclass(frozen=True)
class AuditEntry:
    trace: str
    path: str
    symbol: str
    lines: tuple[tuple[int, int], ...]

    @property
    def span(self) -> int:
        return sum(b - a + 1 for a, b in self.lines)


@dataclass(frozen=True)
class Audit:
    """What the deletion audit states, parsed from the translated deletion-map traces."""

    traces: tuple[str, ...]
    authorities: tuple[str, ...]
    evidence: tuple[AuditEntry, ...]
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def source_entries(self) -> list[AuditEntry]:
        unique = {(e.path, e.symbol, e.lines): e for e in self.evidence if e.path.startswith("src/")}
        return list(unique.values())       # an entry cited by two traces counts once

    @property
    def source_files(self) -> list[str]:
        return sorted({e.path for e in self.source_entries})

    @property
    def audited_lines(self) -> int:
        return sum(e.span for e in self.source_entries)


def load_audit(root: Path = ROOT) -> Audit:
    traces, authorities, evidence, descriptions = [], set(), [], {}
    for path in sorted((root / AUDIT_DIR).glob("*.json")):
        text = json.loads(path.read_text())["description"]
        rel = str(path.relative_to(root))
        traces.append(rel)
        descriptions[rel] = text
        history = text.split("Historical trace: ", 1)[1].split(". Contradiction: ", 1)[0]
        authorities.update(a.strip() for a in _HISTORY.findall("Historical trace: " + history))
        cited = text.split("Source evidence: ", 1)[1].rsplit(". Invariants: ", 1)[0]
        for p, sym, ranges in _EVIDENCE.findall("Source evidence: " + cited):
            spans = tuple(tuple(int(x) for x in r.split("-")) for r in ranges.split(","))
            evidence.append(AuditEntry(rel, p, sym, spans))
    return Audit(tuple(traces), tuple(sorted(authorities)), tuple(evidence), descriptions)


#: Audit facts that are classifications of cited entries, each with the exact
#: symbol the audit names; a test checks every one appears in its trace.
AUDIT_TERMINAL_PATHS: tuple[tuple[str, str, str], ...] = (
    ("08-completion-response-replay.json", "run/commit_done", "Done written directly to graph.jsonl"),
    ("08-completion-response-replay.json", "replay_pending_completion", "re-runs completion_done to rebuild a lost Done response"),
    ("07-assignment-plumbing-completion.json", "build_auto_assign_tasks", "marks the synthetic assignment task Done"),
    ("07-assignment-plumbing-completion.json", "committed spawn audit", "creates an already-Done assignment receipt"),
    ("02-live-pid-missing-heartbeat.json", "cleanup_dead_agents", "HeartbeatTimeout marks Dead and requests AttemptLost"),
    ("05-child-exit-observer-eof.json", "wrapper fallback", "a still-in-progress check may call wg fail"),
)
AUDIT_STORES: tuple[tuple[str, str], ...] = (
    ("01-lost-ipc-response-after-durable-mutation.json", "worker-capabilities.json"),
    ("02-live-pid-missing-heartbeat.json", "registry.json"),
    ("03-duplicate-provider-event.json", "provider_health.json"),
    ("03-duplicate-provider-event.json", "provider-telemetry.jsonl"),
    ("08-completion-response-replay.json", "graph.jsonl"),
)
AUDIT_REDUCERS = ("06-stale-capability.json", "three reducers")


def audit_file(audit: Audit, name: str) -> str:
    return f"{AUDIT_DIR}/{name}"


def baselines(audit: Audit) -> dict[str, Baseline]:
    none = lambda what: Baseline(None, f"not stated ({what})")
    return {
        "actors": Baseline(len(audit.authorities),
                           "distinct authorities named in the audit's historical traces"),
        "authority-pairs": none("the audit names authorities, not their grants"),
        "request-kinds": none("the audit does not enumerate the peer's requests"),
        "env-step-kinds": none("no environment model in the audit"),
        "rule-functions": Baseline(len({(e.path, e.symbol) for e in audit.source_entries}),
                                   "distinct source symbols (files x symbols) the audit cites"),
        "reducers": Baseline(3, "'implemented in three reducers' (deletion-map 06)"),
        "model-reducers": none("the peer's formal model is outside the audit"),
        "kernel-public-methods": none("the peer's API surface is not counted"),
        "terminal-writers-model": Baseline(len(AUDIT_TERMINAL_PATHS),
                                           "cited paths that write a terminal state (listed in the document)"),
        "terminal-writers-impl": Baseline(len(AUDIT_TERMINAL_PATHS), "as above"),
        "stores-of-record": Baseline(len(AUDIT_STORES), "separately persisted files the audit names"),
        "journals": Baseline(len(AUDIT_STORES), "as above: each is written on its own"),
        "databases": none("file stores, see stores-of-record"),
        "helper-processes": none("the audit names a wrapper, an observer, a watchdog and a "
                                 "stream bridge, not which run as their own process"),
        "child-commands": none("not counted by the audit"),
        "loc-model": none("no model in the audited baseline"),
        "loc-impl": Baseline(audit.audited_lines,
                             "lines spanned by the cited source symbols (a lower bound; total not stated)"),
        "loc-conformance": none("no conformance suite in the audited baseline"),
        "loc-total": none("the peer's production LOC is not stated"),
    }
