"""The traces wing is the lowest of conformance/: it imports nothing above it, and the prover
and BMC reach only its writer (traces/export), never the oracle's replayer."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parent.parent / "conformance" / "traces"


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted(TRACES.rglob("*.py")), ids=lambda p: str(p.relative_to(TRACES)))
def test_a_traces_module_imports_no_higher_wing(path):
    above = [m for m in _imports(path)
             if m.startswith("wgk.conformance.") and not m.startswith("wgk.conformance.traces")]
    assert above == [], f"{path.name} imports {above}"


@pytest.mark.parametrize("module", ["wgk.conformance.z3.prove", "wgk.conformance.z3.bmc",
                                    "wgk.conformance.traces.export"])
def test_writing_traces_does_not_load_the_replayer(module):
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in sys.modules if m.startswith('wgk.conformance.oracle')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
