"""wgk view in a real browser: headless Chromium from the distribution, driven by Playwright.

Used as a person would: open a counterexample, step to the breaking state, read
the broken invariant and the highlighted fields, go back and extend the path by
one enabled step, export it and replay the file, ask z3, open the static
report. Screenshots of each view land in the test's tmp_path; with
``WGK_VIEW_DOCS_SCREENSHOT=1`` the stepper's is also saved as
docs/view-stepper.png (the README's picture).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[1]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is missing (pip install playwright)")


def wgk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgk.conformance", *args],
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def counterexample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cx") / "cx.json"
    run = wgk("check", "--invariant", "cas-base-exact", "--mutant", "cas-ignores-moved-target",
              "--depth", "11", "--tasks", "1", "--out", str(out))
    assert run.returncode == 1, run.stderr
    return out


def _step_of(counterexample: Path, pred) -> tuple[int, dict]:
    """(index, step) of the first step of the counterexample ``pred`` accepts (the solver
    picks the path, so where a step lies is read from the trace)."""
    steps = json.loads(counterexample.read_text())["steps"]
    return next((n, s) for n, s in enumerate(steps) if pred(s))


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert errors == []


def served(*args: str):
    """``wgk view ARGS --no-open`` as a child; returns (process, url)."""
    proc = subprocess.Popen([sys.executable, "-m", "wgk.conformance", "view", *args, "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(5):
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if m:
            return proc, m.group(0)
    proc.kill()
    raise AssertionError("wgk view printed no URL: " + proc.stderr.read())


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def at(page, k: int) -> None:
    page.wait_for_selector(f"body[data-k='{k}']", timeout=15000)


def test_step_to_the_break_extend_export_and_replay(page, counterexample, tmp_path):
    proc, url = served(str(counterexample))
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        at(page, 0)
        page.screenshot(path=str(tmp_path / "1-opened.png"), full_page=True)
        assert page.locator("#steps tr[data-k]").count() == 12        # the initial state + 11 steps
        assert page.locator("#broken-none").is_visible()
        for k in range(1, 12):                                        # forward, step by step
            page.click("#forward")
            at(page, k)
        assert page.locator("#forward").is_disabled()
        broken = page.inner_text("#broken")
        assert "cas-base-exact" in broken
        assert "The kernel moves the target only from the exact base to the exact candidate." in broken
        assert "step 10: commit-effect(t1)" in page.inner_text("#state-title")
        changed = page.locator("#state-table td.changed").all_inner_texts()
        _, move = _step_of(counterexample, lambda s: s.get("env") == "move-target")
        assert "effect-prepared \u2192 effect-committed" in changed
        assert f"{move['content']} \u2192 c1" in changed                 # the land from the moved target
        assert page.locator("#state-table tr[data-key='attempt'] td.changed").count() == 0
        assert not page.locator("#state-table tr[data-key='attempt']").is_visible()   # folded
        assert "t1 \u00b7 completing" in page.inner_text("#graph")
        page.screenshot(path=str(tmp_path / "2-broken.png"), full_page=True)
        if os.environ.get("WGK_VIEW_DOCS_SCREENSHOT") == "1":
            page.screenshot(path=str(ROOT / "docs" / "view-stepper.png"), full_page=True)

        page.click("#back")
        at(page, 10)
        assert page.locator("#broken-none").is_visible()
        choice = page.locator("#enabled button.choice[data-label='mark-repair(t1)']")
        assert "applied" in choice.inner_text()
        page.screenshot(path=str(tmp_path / "3-enabled.png"), full_page=True)
        choice.click()
        at(page, 11)
        assert page.inner_text("#steps tr[data-k='11'] td.label") == "mark-repair(t1)"
        assert page.locator("#broken-none").is_visible()
        assert "needs-repair" in page.inner_text("#graph")
        page.screenshot(path=str(tmp_path / "4-extended.png"), full_page=True)

        with page.expect_download() as download:
            page.click("#export")
        exported = tmp_path / "explored.json"
        download.value.save_as(exported)
    finally:
        stop(proc)
    run = wgk("replay", str(exported))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("PASS") and "(11 steps" in run.stdout


def test_ask_z3_from_the_page(page, tmp_path):
    proc, url = served("--tasks", "1")
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        assert page.locator("#steps tr[data-k]").count() == 1        # the initial state only
        page.select_option("#ask-kind", "reach")
        page.fill("#ask-text", 't1.attempt_state == "lost"')
        page.fill("#ask-depth", "5")
        page.click("#ask-go")
        page.wait_for_selector("#message:has-text('found')", timeout=60000)
        steps = page.locator("#steps tr[data-k]").count() - 1
        at(page, steps)
        assert steps >= 1 and page.inner_text("#steps tr[data-k='1'] td.label") == "dispatch(t1)"
        rows = page.locator("#state-table tr[data-key='attempt-state']").inner_text()
        assert "lost" in rows
        page.screenshot(path=str(tmp_path / "5-asked.png"), full_page=True)
        page.fill("#ask-text", "t1.promotions >= 2")
        page.fill("#ask-depth", "3")
        page.click("#ask-go")
        page.wait_for_selector("#message:has-text('nothing found')", timeout=60000)
    finally:
        stop(proc)


def test_static_report_opens_without_a_server(page, counterexample, tmp_path):
    out = tmp_path / "cx.html"
    assert wgk("view", str(counterexample), "--html", str(out)).returncode == 0
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    at(page, 11)                                    # opened at the first break
    assert "cas-base-exact" in page.inner_text("#broken")
    assert not page.locator("#ask").is_visible()
    n, _ = _step_of(counterexample, lambda s: s.get("request", {}).get("kind") == "save-work")
    page.click(f"#steps tr[data-k='{n + 1}']")
    at(page, n + 1)
    assert "save-work(t1)" in page.inner_text("#state-title")
    page.screenshot(path=str(tmp_path / "6-static.png"), full_page=True)
    with page.expect_download() as download:
        page.click("#export")
    saved = tmp_path / "from-report.json"
    download.value.save_as(saved)
    run = wgk("replay", str(saved))          # the mutant's decisions, which the model refuses at step 10
    assert run.returncode == 1 and "step 10" in run.stdout and "rejected:cas-moved" in run.stdout, run.stdout


def test_ask_for_an_invariant_by_its_id(page, tmp_path):
    proc, url = served("--tasks", "1", "--mutant", "cas-ignores-moved-target")
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=15000)
        assert page.locator("#invariant-ids option[value='cas-base-exact']").count() == 1
        page.select_option("#ask-kind", "invariant")
        page.fill("#ask-text", "cas-base-exact")
        page.fill("#ask-depth", "11")
        page.click("#ask-go")
        page.wait_for_selector("#message:has-text('found')", timeout=60000)
        steps = page.locator("#steps tr[data-k]").count() - 1
        at(page, steps)
        assert "cas-base-exact" in page.inner_text("#broken")
        assert page.inner_text(f"#steps tr[data-k='{steps}'] td.label").startswith("commit-effect(t1)")
        page.screenshot(path=str(tmp_path / "7-asked-invariant.png"), full_page=True)
    finally:
        stop(proc)
