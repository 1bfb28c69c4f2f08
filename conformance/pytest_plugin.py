"""The gate inside pytest.

Installed with wgk (entry point ``pytest11``) and inert unless asked for:

- ``pytest --wgk-gate quick`` adds one test item per gate section (explore,
  replay, fuzz, ...) to the run, skipped when the budget does not run it, failed
  when the section checks nothing or raises; ``--wgk-traces PATH`` selects
  the traces (default: the corpus bundled with wgk); ``--wgk-external CMD`` gates
  the kernel CMD serves over the conformance protocol instead of wgk's own (a
  section whose every check is skipped for what it does not declare is a
  skipped item with the reasons);
- the ``wgk_gate`` fixture runs the gate from a test:
  ``result = wgk_gate("quick"); assert result.verdict == "pass", result.summary()``.
"""
from __future__ import annotations

import importlib

import pytest


def _gate():
    """The gate module, imported only when the plugin is used (it brings z3 and hypothesis,
    which a project's test run that does not ask for the gate should not pay for)."""
    return importlib.import_module("wgk.conformance.reports.gate")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wgk", "the wgk conformance gate")
    group.addoption("--wgk-gate", default=None, metavar="BUDGET",
                    help="run the wgk gate on this budget (quick, default, deep) as part of the "
                         "test run")
    group.addoption("--wgk-traces", nargs="+", default=None, metavar="PATH",
                    help="trace files or folders for the gate's replay section")
    group.addoption("--wgk-external", default=None, metavar="CMD",
                    help="gate the kernel CMD serves over the conformance protocol "
                         "(docs/gate-your-kernel.md) instead of wgk's own, in process")
    group.addoption("--wgk-timeout", type=float, default=30.0, metavar="SECONDS",
                    help="with --wgk-external: seconds one message may take (default 30)")


def pytest_configure(config: pytest.Config) -> None:
    budget = config.getoption("--wgk-gate")
    if budget and budget not in _gate().BUDGETS:
        raise pytest.UsageError(f"--wgk-gate: unknown budget {budget!r} "
                                f"(known: {', '.join(_gate().BUDGETS)})")


class GateSectionItem(pytest.Item):
    def __init__(self, *, section: str, budget: str, traces, external=None, **kw):
        super().__init__(**kw)
        self.section, self.budget, self.traces = section, budget, traces
        self.external = external

    def runtest(self) -> None:
        from wgk.conformance.traces.format import load_traces
        gate_mod = _gate()
        sources = [str(p) for p in (self.traces or [gate_mod.bundled_traces()])]
        loaded = load_traces(sources) if self.section in gate_mod.TRACE_SECTIONS else None
        section = gate_mod.run_section(self.section, self.budget, loaded=loaded, sources=sources,
                                       counterexamples=str(self.path.parent / ".wgk-counterexamples"),
                                       external=self.external)
        if section.skipped:
            pytest.skip(section.skipped)
        bad = [c for c in section.checks if c.verdict not in ("pass", "skip")]
        if bad:
            raise GateFailure(self.section, bad)
        if section.verdict == "skipped":
            reasons = sorted({c.detail for c in section.checks})
            pytest.skip(f"every check skipped: {'; '.join(reasons)}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GateFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"wgk gate [{self.section}] ({self.budget})"


class GateFailure(AssertionError):
    def __init__(self, section: str, checks: list):
        lines = [f"wgk gate section {section}: {len(checks)} check(s) failed"]
        lines += [f"  {c.verdict.upper()} {c.name}: {c.detail}" for c in checks]
        super().__init__("\n".join(lines))


class GateCollector(pytest.Collector):
    def collect(self):
        budget = self.config.getoption("--wgk-gate")
        traces = self.config.getoption("--wgk-traces")
        command = self.config.getoption("--wgk-external")
        external = None
        if command:
            from wgk.conformance.oracle.external_runs import Kernel
            external = Kernel(command, self.config.getoption("--wgk-timeout"))
        for section, _ in _gate().SECTIONS:       # a section its budget skips is a skipped item
            yield GateSectionItem.from_parent(self, name=section, section=section, budget=budget,
                                              traces=traces, external=external)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if not config.getoption("--wgk-gate"):
        return
    collector = GateCollector.from_parent(session, name="wgk-gate")
    items.extend(collector.collect())


@pytest.fixture
def wgk_gate():
    """Run the gate: ``wgk_gate(budget="quick", traces=None) -> GateResult``."""
    def run(budget: str = "quick", traces=None):
        return _gate().run_gate(budget, traces=traces)
    return run
