"""The results viewer in a real browser: a real `afpbench serve` (embedded mode, SQLite, a token), the
demo sweep and a judge-less sweep posted over HTTP, and headless Chromium driven by Playwright.

Acceptance (issue #13): sign in with the token, find the demo sweep (its page polls progress live until
the last cell is done), open the fixture x condition page for P06 and see the four answers side by side
with their states, open a disputed cell and decide it through the form; the report then counts the
decision. Screenshots go to tmp_path and /tmp/afp/screens/; the key numbers are checked in the page text.

Skips with a reason when Chromium or Playwright's Python package is absent, unless AFP_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from pathlib import Path

import pytest
import requests

from tests.integration.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.integration.test_http_end_to_end import DEMO_LIKE, SIM, serving

pytestmark = pytest.mark.integration

SCREENS = Path("/tmp/afp/screens")
# A sweep written with `judges: []`: nothing can judge the answers, so its cells end GRADER_DISPUTE.
NO_JUDGES = {"name": "no judges (simulated)", "models": [SIM], "judges": [], "conditions": ["A", "B"],
             "fixtures": {"only": ["P01"]}}


def _report(api: requests.Session, base: str, sweep_id: str) -> dict:
    return api.get(f"{base}/sweeps/{sweep_id}/report", params={"format": "json"}, timeout=30).json()


def _wait_finished(api: requests.Session, base: str, sweep_id: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not api.get(f"{base}/sweeps/{sweep_id}", timeout=10).json()["finished"]:
        assert time.monotonic() < deadline, f"sweep {sweep_id} not finished in {timeout_s} s"
        time.sleep(0.5)


def _shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"viewer-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 15_000, f"{name}: not a rendered page"
    SCREENS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENS / path.name)
    return path


def test_the_viewer_in_chromium_from_sign_in_to_a_decision(tmp_path, sync_playwright):
    """Viewer acceptance in real Chromium: sign in, live progress, A-D side by side, decide a dispute."""
    from playwright.sync_api import expect  # installed: the sync_playwright fixture checked it

    token = secrets.token_urlsafe(24)
    env = {**os.environ, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'viewer.db'}", "AFP_BROKER_URL": "memory://",
           "AFP_API_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    env.pop("AFP_SIM_URL", None)  # the server starts its own simulated model
    with serving(env, tmp_path / "serve.log") as base, sync_playwright() as pw:
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {token}"
        demo = api.post(f"{base}/sweeps", json=DEMO_LIKE, timeout=120)
        assert demo.status_code == 201, demo.text
        demo_id = demo.json()["id"]
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

        # Sign in: a page without the cookie is sent to the form; the cookie holds no token.
        page.goto(f"{base}/view/")
        assert "/view/login" in page.url
        _shot(page, tmp_path, "1-sign-in")
        page.fill("input[name=token]", "not-the-token")
        page.click("#login button")
        assert "wrong token" in page.inner_text("main")
        page.fill("input[name=token]", token)
        page.click("#login button")
        page.wait_for_url(f"{base}/view/")
        cookies = page.context.cookies()
        assert cookies and all(token not in c["value"] for c in cookies)
        assert all(c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies)

        # The list names the demo sweep; its page shows live progress until the last cell is done.
        assert demo_id in page.inner_text("#sweeps") and "SIMULATED" in page.inner_text("#sweeps")
        page.click(f"a[href='/view/sweeps/{demo_id}']")
        # Playwright's own matcher, not wait_for_function: a string predicate is eval'ed in the page, which
        # the viewer's CSP (script-src 'self', no unsafe-eval) rightly refuses in Playwright 1.65.
        expect(page.locator("#progress-text")).to_have_text(re.compile(r"^\s*56/56"), timeout=240_000)
        page.wait_for_load_state("load")
        _wait_finished(api, base, demo_id)
        page.reload()
        # A finished sweep's page polls no more (issue 38): three poll intervals without a progress request.
        polls: list[str] = []
        page.on("request", lambda r: polls.append(r.url) if "progress.json" in r.url else None)
        page.wait_for_timeout(6000)
        assert polls == [] and page.locator("[data-progress]").count() == 0
        summary = _report(api, base, demo_id)
        text = page.inner_text("main")
        for row in summary["by_model_condition"]:  # pass/n and pass rate of every condition, as the report has
            assert f"{row['pass']}/{row['n']}" in text and f"{row['pass_rate']:.1%}" in text, row["condition"]
        paired = [c for c in summary["comparisons"] if c["status"] == "ok"]
        assert page.locator("svg.forest circle").count() == len(paired) > 0
        assert f"{paired[0]['difference'] * 100:+.1f} pts" in page.inner_text("#forest-section")
        assert "Fisher exact" in page.inner_text("#balance-section")
        _shot(page, tmp_path, "2-sweep")

        # Filters are server-side: only C cells of P06.
        page.select_option("select[name=condition]", "C")
        page.wait_for_url(re.compile(r".*condition=C.*"))
        page.select_option("select[name=fixture]", "P06")
        page.wait_for_url(re.compile(r".*fixture=P06.*"))
        rows = page.locator("#cells tbody tr")
        assert rows.count() == 3 and all("P06" in t and "\tC\t" in t for t in rows.all_inner_texts())

        # P06 under A-D for the same repeat: four answers side by side with their states.
        page.goto(f"{base}/view/sweeps/{demo_id}/fixtures/P06?repeat=1")
        columns = page.locator("#side-by-side .column")
        assert columns.count() == 4
        states = [columns.nth(i).locator(".state").inner_text() for i in range(4)]
        assert all(s in ("MODEL_PASS", "MODEL_FAIL") for s in states), states
        assert all(columns.nth(i).locator("pre.answer").inner_text().strip() for i in range(4))
        assert [columns.nth(i).get_attribute("data-condition") for i in range(4)] == ["A", "B", "C", "D"]
        _shot(page, tmp_path, "3-p06-side-by-side")

        # A disputed cell, decided through the form; the summary then counts it.
        disputed = api.post(f"{base}/sweeps", json=NO_JUDGES, timeout=60)
        assert disputed.status_code == 201, disputed.text
        dispute_id = disputed.json()["id"]
        _wait_finished(api, base, dispute_id)
        page.goto(f"{base}/view/sweeps/{dispute_id}?state=GRADER_DISPUTE")
        first = page.locator("#cells tbody tr").first
        condition = first.locator("td").nth(2).inner_text()
        first.locator("a").first.click()
        assert page.locator("#decide").count() == 1 and "GRADER_DISPUTE" in page.inner_text("#record")
        _shot(page, tmp_path, "4-disputed-cell")
        before = next(r for r in _report(api, base, dispute_id)["by_model_condition"] if r["condition"] == condition)
        # The form sits below the answer it decides on.
        assert page.locator("#answer").bounding_box()["y"] < page.locator("#adjudicate").bounding_box()["y"]
        # A decision the sealed pass rule refuses (a pass with a 0) comes back with what was typed kept.
        note = "read in the viewer: the figure is right but the answer skips the cap's source"
        page.fill("#decide input[name=reviewer]", "chromium reviewer")
        page.select_option("#decide select[name=state]", "MODEL_PASS")
        for dim, score in zip(("task_correctness", "evidence_discipline", "uncertainty_handling", "failure_control"),
                              "2022", strict=True):
            page.select_option(f"#decide select[name=score_{dim}]", score)
        page.fill("#decide textarea[name=note]", note)
        page.click("#decide button")
        page.wait_for_load_state("load")
        assert "decision refused" in page.inner_text("#decision-refused")
        assert page.input_value("#decide input[name=reviewer]") == "chromium reviewer"
        assert page.input_value("#decide select[name=state]") == "MODEL_PASS"
        assert page.input_value("#decide select[name=score_evidence_discipline]") == "0"
        assert page.input_value("#decide textarea[name=note]") == note
        _shot(page, tmp_path, "4b-refused-kept")
        page.fill("#decide input[name=reviewer]", "chromium reviewer")
        page.select_option("#decide select[name=state]", "MODEL_FAIL")
        for dim in ("task_correctness", "evidence_discipline", "uncertainty_handling", "failure_control"):
            page.select_option(f"#decide select[name=score_{dim}]", "0")
        page.fill("#decide textarea[name=note]", "read in the viewer: the answer misses the figure")
        page.click("#decide button")
        page.wait_for_load_state("load")
        assert page.locator("#decide").count() == 0
        assert "GRADER_DISPUTE -> MODEL_FAIL" in page.inner_text("#decisions")
        _shot(page, tmp_path, "5-decided")
        after = _report(api, base, dispute_id)
        row = next(r for r in after["by_model_condition"] if r["condition"] == condition)
        assert (row["fail"], row["n"]) == (before["fail"] + 1, before["n"] + 1)
        assert row["excluded"]["GRADER_DISPUTE"] == before["excluded"]["GRADER_DISPUTE"] - 1
        assert [d["reviewer"] for d in after["human_decisions"]] == ["chromium reviewer"]
        page.goto(f"{base}/view/sweeps/{dispute_id}")
        assert f"{row['pass']}/{row['n']}" in page.inner_text("#rates")
        assert "chromium reviewer" in page.inner_text("#human_decisions")  # the sweep page shows the decision
        assert "human: chromium reviewer" in page.inner_text("#cells")
        _shot(page, tmp_path, "6-dispute-sweep-after")
        assert not [e for e in errors if "Content Security Policy" in e or "Refused" in e], errors
        browser.close()
    assert token not in (tmp_path / "serve.log").read_text()
