"""A readable piece of the state graph as Graphviz DOT: labelled and bounded.

``neighbourhood`` draws the states within ``radius`` steps of one state (at
most ``max_nodes``); ``path_with_alternatives`` draws a path (bold) and, from
each of its states, the other steps the enumeration offers (dashed, one step
deep). A node is labelled with each task's status, attempt state and phase
(or exit) and the target; an edge with the step and the model's decision.
Steps that change nothing (rejections, evidence already known) are counted
in the node's label instead of drawn as loops.
"""
from __future__ import annotations

from collections import deque

from wgk.model.observe import observe
from wgk.model.state import State

from wgk.conformance.view.session import Session, describe


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Dot:
    def __init__(self, session: Session, title: str):
        self.session = session
        self.title = title
        self.ids: dict[State, str] = {}
        self.nodes: list[str] = []
        self.edges: list[str] = []
        self.quiet: dict[str, int] = {}

    def node(self, s: State, *, style: str = "") -> tuple[str, bool]:
        if s in self.ids:
            return self.ids[s], False
        ident = f"s{len(self.ids)}"
        self.ids[s] = ident
        self.nodes.append((ident, s, style))
        return ident, True

    def label(self, s: State) -> str:
        obs = observe(s, self.session.names)
        lines = [f"{n}: {t['status']}, {t['attempt-state']}, "
                 f"{t['exit'] if t['exit'] != 'none' else t['phase']}" for n, t in obs["tasks"].items()]
        lines.append(f"target {obs['target']}")
        return "\n".join(lines)

    def edge(self, a: str, b: str, text: str, style: str = "") -> None:
        self.edges.append(f"  {a} -> {b} [label={_q(text)}{style}];")

    def render(self) -> str:
        out = [f"digraph {_q(self.title)} {{", '  rankdir=LR; node [shape=box, fontname="monospace", '
               'fontsize=10]; edge [fontname="monospace", fontsize=9];']
        for ident, s, style in self.nodes:
            text = self.label(s)
            if self.quiet.get(ident):
                text += f"\n({self.quiet[ident]} steps change nothing)"
            out.append(f"  {ident} [label={_q(text)}{style}];")
        return "\n".join(out + self.edges + ["}"]) + "\n"

    def expand(self, s: State, ident: str, n: int) -> list[tuple[State, str, str, bool]]:
        """``(state after, edge label)`` for every step that changes ``s``."""
        out = []
        for _, e in self.session.successors(s, n):
            if e.state == s:
                self.quiet[ident] = self.quiet.get(ident, 0) + 1
                continue
            text = self.session.label_of(e) + (f" -> {describe(e.decision)}" if e.decision else "")
            out.append((e.state, text))
        return out


def neighbourhood(session: Session, k: int = 0, radius: int = 2, max_nodes: int = 150) -> str:
    """The states within ``radius`` steps of the path's state ``k``."""
    d = _Dot(session, f"within {radius} steps of state {k}")
    start = session.state(k)
    root, _ = d.node(start, style=", penwidth=2")
    queue = deque([(start, root, 0)])
    while queue:
        s, ident, dist = queue.popleft()
        if dist >= radius:
            continue
        for s2, text in d.expand(s, ident, k + dist):
            if s2 not in d.ids and len(d.ids) >= max_nodes:
                continue
            b, new = d.node(s2)
            d.edge(ident, b, text)
            if new:
                queue.append((s2, b, dist + 1))
    return d.render()


def path_with_alternatives(session: Session, max_alternatives: int = 12) -> str:
    """The path (bold) and from each of its states the other steps, one step deep (dashed)."""
    d = _Dot(session, session.id)
    states = session.states()
    ids = [d.node(s, style=", penwidth=2")[0] for s in states]
    for n, e in enumerate(session.entries):
        text = f"{n}. {session.label_of(e)}" + (f" -> {describe(e.decision)}" if e.decision else "")
        d.edge(ids[n], ids[n + 1], text, ", penwidth=2")
    for n, s in enumerate(states):
        taken = states[n + 1] if n + 1 < len(states) else None
        shown = 0
        for s2, text in d.expand(s, ids[n], n):
            if s2 == taken or shown >= max_alternatives:
                continue
            b, _ = d.node(s2, style=", style=dashed")
            d.edge(ids[n], b, text, ", style=dashed")
            shown += 1
    return d.render()
