"""The HTML report in a real browser: headless Chromium renders it, takes a screenshot, dumps the DOM.

Skips with a reason when /usr/bin/chromium is absent, unless AFP_REQUIRE_SERVICES=1 (then it fails).
Install: apt-get update && apt-get install -y chromium
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from afpbench.api.report import render_report
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.conftest import need
from tests.unit.sweep_builder import CellMaker, make_sweep

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE_LABEL = '<script>document.title="pwned"</script><img src=x onerror=alert(1)> & "model"'


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--window-size=1200,2000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def report_html(tmp_path, sqlite_url, settings_env) -> Path:
    """A small synthetic (SIMULATED) sweep: condition C 7/10 pass on P01, a hostile model label."""
    settings_env(AFP_DATABASE_URL=sqlite_url)
    spec = parse_spec({"name": "chromium <check>", "judges": [], "models": [
        {"provider": "sim", "model": "sim-1", "label": HOSTILE_LABEL}]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "html", spec=spec))
        for state in ["MODEL_PASS"] * 7 + ["MODEL_FAIL"] * 3:
            cells.add("C", "P01", state, output_tokens=420)
        for state in ["MODEL_PASS"] * 2 + ["MODEL_FAIL"] * 2 + ["INFRA_ERROR", "PROVIDER_BLOCK"]:
            cells.add("A", "P02", state, output_tokens=180)
        cells.add("B", "P03", "GRADER_DISPUTE")
    page = tmp_path / "report.html"
    page.write_text(render_report(snapshot("html", interim=None), "html"), encoding="utf-8")
    return page


def test_report_renders_in_headless_chromium(tmp_path, report_html):
    """The self-contained page renders (screenshot) and shows the numbers; hostile text stays inert text."""
    if not CHROMIUM.exists():
        need("Chromium", f"{CHROMIUM} not found (apt-get install -y chromium)")
    shot = tmp_path / "report.png"
    result = _chromium(tmp_path, f"--screenshot={shot}", report_html.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a real page, not a blank
    dom = _chromium(tmp_path, "--dump-dom", report_html.as_uri()).stdout
    assert "70.0%" in dom and "7/10" in dom  # condition C pass rate and pass/n
    assert "3/10 failures (30.0%, 95% CI" in dom
    assert "SIMULATED" in dom and 'id="simulated-banner"' in dom
    assert "<svg" in dom and "INFRA_ERROR" in dom
    # The hostile model label is shown as text: no script element, no img element from data.
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert "&lt;script&gt;" in dom
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]


def test_report_page_loads_nothing_external(report_html):
    """Self-contained: no script or img element, no http(s) resource (the SVG namespace is only a name)."""
    text = report_html.read_text()
    assert "<script" not in text and "<img" not in text and "<link" not in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
