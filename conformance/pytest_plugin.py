"""The gate inside pytest.

Installed with wgk (entry point ``pytest11``) and inert unless asked for:

- ``pytest --wgk-gate quick`` adds one test item per gate section (explore,
  replay, fuzz, ...) to the run; ``--wgk-traces PATH`` selects the traces;
- the ``wgk_gate`` fixture runs the gate from a test:
  ``result = wgk_gate("quick"); assert result.verdict == "pass", result.summary()``.
"""
from __future__ import annotations

import pytest

from wgk.conformance.reports import gate as gate_mod


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wgk", "the wgk conformance gate")
    group.addoption("--wgk-gate", choices=sorted(gate_mod.BUDGETS), default=None,
                    help="run the wgk gate on this budget as part of the test run")
    group.addoption("--wgk-traces", nargs="+", default=None, metavar="PATH",
                    help="trace files or folders for the gate's replay section")


class GateSectionItem(pytest.Item):
    def __init__(self, *, section: str, budget: str, traces, **kw):
        super().__init__(**kw)
        self.section, self.budget, self.traces = section, budget, traces

    def runtest(self) -> None:
        from wgk.conformance.traces.format import load_traces
        fn = dict(gate_mod.SECTIONS)[self.section]
        if self.section in gate_mod.TRACE_SECTIONS:
            loaded = load_traces([str(p) for p in (self.traces or [gate_mod.BUNDLED_TRACES])])
            checks = fn(self.budget, None, loaded)
        elif self.section == "fuzz":
            checks = fn(self.budget, None, str(self.path.parent / ".wgk-counterexamples"))
        else:
            checks = fn(self.budget, None)
        bad = [c for c in checks if c.verdict != "pass"]
        if bad:
            raise GateFailure(self.section, bad)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GateFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"wgk gate [{self.section}] ({self.budget})"


class GateFailure(AssertionError):
    def __init__(self, section: str, checks: list):
        lines = [f"wgk gate section {section}: {len(checks)} check(s) failed"]
        lines += [f"  {c.name}: {c.detail}" for c in checks]
        super().__init__("\n".join(lines))


class GateCollector(pytest.Collector):
    def collect(self):
        budget = self.config.getoption("--wgk-gate")
        traces = self.config.getoption("--wgk-traces")
        for section, _ in gate_mod.SECTIONS:
            if section in gate_mod.BUDGETS[budget]:
                yield GateSectionItem.from_parent(self, name=section, section=section, budget=budget,
                                                  traces=traces)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if not config.getoption("--wgk-gate"):
        return
    collector = GateCollector.from_parent(session, name="wgk-gate")
    items.extend(collector.collect())


@pytest.fixture
def wgk_gate():
    """Run the gate: ``wgk_gate(budget="quick", traces=None) -> GateResult``."""
    def run(budget: str = "quick", traces=None):
        return gate_mod.run_gate(budget, traces=traces)
    return run
