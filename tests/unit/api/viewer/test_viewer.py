"""The results viewer (/view) through FastAPI's TestClient on SQLite, with cells of KNOWN states.

Rules checked (each test names its own): sign-in with the API token through a form and a cookie that
holds an HMAC of the token; escaping of hostile model text and labels; one-line error pages (404, 422)
that write nothing; CSRF on the decision form; the decision goes through adjudication.record_human_decision.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import os
import re
import signal
import subprocess
import sys

import pytest
import requests
from fastapi.testclient import TestClient
from sqlmodel import func, select

from afpbench.api.http.app import create_app
from afpbench.api.viewer.auth import COOKIE, SESSION_CONTEXT, safe_next
from afpbench.api.viewer.forest import forest_plot
from afpbench.api.viewer.highlight import mark_quotes
from afpbench.scoring.clustered import ClusterTable, clustered_difference
from afpbench.scoring.power_reading import read_comparison
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.summary import PairedComparison
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Adjudication, JudgementRow, Result
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec, parse_spec
from tests.unit.sweep_builder import SCORES_PASS, CellMaker, make_sweep

TOKEN = "viewer-unit-token-5e1d0c"
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror=alert(1)> & "answer"'
HOSTILE_LABEL = '<b onmouseover=alert(2)>sim</b> (simulated)'
QUOTE = "EUR 999.00 is owed"


@pytest.fixture(scope="module")
def demo_inputs() -> dict:
    return load_inputs(demo_spec()).to_json()


def _build(demo_inputs) -> dict[str, int]:
    spec = parse_spec({"name": "viewer <unit>", "models": [{"provider": "sim", "model": "sim-1",
                                                              "label": HOSTILE_LABEL}], "judges": []})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "vw1", spec=spec, inputs=demo_inputs))
        ids = {c: cells.add(c, "P06", st, output_text=f"{c}: {HOSTILE} {QUOTE}.")
               for c, st in zip("ABCD", ["MODEL_PASS", "MODEL_FAIL", "MODEL_PASS", "GRADER_DISPUTE"], strict=True)}
        ids["P01"] = cells.add("A", "P01", "MODEL_PASS")
        s.add(JudgementRow(cell_id=ids["B"], scoring_run=1, judge_label="sim-judge (simulated)", prompt_sha256="0" * 64,
                        raw_text="{}", simulated=True,
                        parsed={"scores": {}, "rationales": {}, "fatal_flags": {"fabricated_fact": True},
                                "quotes": {"fabricated_fact": QUOTE}, "total": 3}))
    return ids


@pytest.fixture
def ids(sqlite_url, settings_env, demo_inputs) -> dict[str, int]:
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN)
    return _build(demo_inputs)


@pytest.fixture
def client(ids) -> TestClient:
    return TestClient(create_app(runtime=False))


def _signed_in(client: TestClient) -> TestClient:
    r = client.post("/view/login", data={"token": TOKEN, "next": "/view/"}, follow_redirects=False)
    assert r.status_code == 303
    return client


def _csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def _counts() -> tuple[int, int]:
    with session_scope() as s:
        return s.exec(select(func.count(Adjudication.id))).one(), s.exec(select(func.count(Result.id))).one()


def test_without_a_cookie_pages_redirect_to_sign_in_and_json_is_401(client, ids):
    """Auth: no cookie -> 303 to the sign-in page (back to the page after), JSON and POST -> 401."""
    r = client.get("/view/sweeps/vw1?condition=A", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/view/login?next=%2Fview%2Fsweeps%2Fvw1%3Fcondition%3DA"
    assert client.get("/view/sweeps/vw1/progress.json").status_code == 401
    assert client.post(f"/view/cells/{ids['D']}/decide", data={}).status_code == 401
    assert client.get("/view/sweeps/vw1", headers={"Authorization": f"Bearer {TOKEN}"},
                      follow_redirects=False).status_code == 303, "the viewer reads its cookie, not the header"
    with_cookie = TestClient(client.app, cookies={COOKIE: hmac.new(TOKEN.encode(), SESSION_CONTEXT,
                                                                     hashlib.sha256).hexdigest()})
    assert with_cookie.get("/view/").status_code == 200
    assert with_cookie.get("/sweeps/vw1").status_code == 401, "the JSON API reads the header only"


def test_a_wrong_token_gets_a_401_page_and_no_cookie(client):
    """Auth: a bad token -> 401 sign-in page, no Set-Cookie, the token tried is not echoed."""
    r = client.post("/view/login", data={"token": "guess-123456", "next": "/view/"}, follow_redirects=False)
    assert r.status_code == 401 and "wrong token" in r.text
    assert "set-cookie" not in r.headers and "guess-123456" not in r.text


def test_the_cookie_is_an_httponly_strict_hmac_of_the_token_not_the_token(client):
    """Auth: the cookie holds HMAC(token), is HttpOnly and SameSite=Strict; then every page opens."""
    r = client.post("/view/login", data={"token": TOKEN, "next": "https://evil.example/"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/view/", "next may not leave the viewer"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/view" in cookie
    value = client.cookies[COOKIE]
    assert TOKEN not in value and value == hmac.new(TOKEN.encode(), SESSION_CONTEXT, hashlib.sha256).hexdigest()
    listing = client.get("/view/")
    assert listing.status_code == 200 and "vw1" in listing.text and TOKEN not in listing.text
    forged = TestClient(client.app, cookies={COOKIE: TOKEN})
    assert forged.get("/view/", follow_redirects=False).status_code == 303, "the raw token is not a session"


def test_no_token_configured_means_no_sign_in(sqlite_url, settings_env, demo_inputs):
    """Auth: without AFP_API_TOKEN the pages open directly and /view/login sends you on."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    _build(demo_inputs)
    client = TestClient(create_app(runtime=False))
    assert client.get("/view/sweeps/vw1").status_code == 200
    assert client.get("/view/login", follow_redirects=False).headers["location"] == "/view/"


def test_hostile_answers_and_labels_are_escaped_on_every_page(client, ids):
    """Escaping: model text and labels appear as text on the sweep, A-D and cell pages; the quote is marked."""
    _signed_in(client)
    pages = [client.get("/view/"), client.get("/view/sweeps/vw1"),
             client.get("/view/sweeps/vw1/fixtures/P06"), client.get(f"/view/cells/{ids['B']}")]
    for page in pages:
        assert page.status_code == 200
        assert "<script>" not in page.text and "<img" not in page.text and "<b onmouseover" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in pages[2].text
    assert "&lt;b onmouseover=alert(2)&gt;" in pages[1].text
    assert f"<mark>{QUOTE}</mark>" in pages[3].text
    assert pages[2].text.count('class="column"') == 4 and "<script" not in pages[2].text.split("</head>")[1]


def test_the_side_by_side_page_shows_four_answers_with_state_score_and_fatal(client, ids):
    """A-D page: one column per condition for the same fixture and repeat, each with state, total, fatal."""
    page = _signed_in(client).get("/view/sweeps/vw1/fixtures/P06?repeat=1").text
    columns = re.findall(r'<div class="column" data-condition="([A-D])">(.*?)</div>', page, re.S)
    assert [c for c, _ in columns] == ["A", "B", "C", "D"]
    body = dict(columns)
    assert "MODEL_PASS" in body["A"] and "MODEL_FAIL" in body["B"] and "GRADER_DISPUTE" in body["D"]
    assert "total score: 7 / 8" in body["A"] and "fabricated_fact" in body["B"] and "B: " in body["B"]


def test_pages_404_and_422_with_one_line_naming_the_problem(client, ids):
    """Errors: unknown sweep, cell, fixture, model, repeat, static file -> 404; a bad filter -> 422 naming it."""
    _signed_in(client)
    for path, words in [("/view/sweeps/nope", "no sweep with id 'nope'"), ("/view/cells/999999", "no cell with id"),
                        ("/view/sweeps/nope/progress.json", "no sweep"),
                        ("/view/sweeps/vw1/fixtures/P99", "no cell of fixture 'P99'"),
                        ("/view/sweeps/vw1/fixtures/P06?model=zz", "model 'zz'"),
                        ("/view/sweeps/vw1/fixtures/P06?repeat=9", "repeat 9"),
                        ("/view/static/passwd", "no static file")]:
        r = client.get(path)
        assert r.status_code == 404 and words in html.unescape(r.text), (path, r.text[-300:])
    bad = client.get("/view/sweeps/vw1?state=PASSED")
    assert bad.status_code == 422 and "state: &#x27;PASSED&#x27; is not one of MODEL_PASS" in bad.text
    assert client.get("/view/sweeps/vw1?condition=E").status_code == 422
    assert client.get("/view/sweeps/vw1?model=&condition=A&fixture=&state=").status_code == 200, "empty = any"
    assert client.get("/view/cells/0").status_code == 422


def test_filters_select_cells_server_side(client, ids):
    """Filters: state, condition and fixture narrow the cells table; progress JSON counts every cell."""
    _signed_in(client)
    table = client.get("/view/sweeps/vw1?state=GRADER_DISPUTE").text.split('id="cells"')[1]
    assert f'/view/cells/{ids["D"]}"' in table and f'/view/cells/{ids["A"]}"' not in table
    table = client.get("/view/sweeps/vw1?condition=A&fixture=P01").text.split('id="cells"')[1]
    assert f'/view/cells/{ids["P01"]}"' in table and f'/view/cells/{ids["A"]}"' not in table
    polled = client.get("/view/sweeps/vw1/progress.json").json()
    assert {k: polled[k] for k in ("status", "total", "done", "finished", "states")} == {
        "status": "complete", "total": 5, "done": 5, "finished": True,
        "states": {"MODEL_PASS": 3, "MODEL_FAIL": 1, "GRADER_DISPUTE": 1}}
    assert polled["stages"]["decided"] == 5


def test_a_decision_needs_the_csrf_token_and_bad_fields_write_nothing(client, ids):
    """CSRF and bad input: no or a wrong token -> 403, a half-filled score -> 422 naming it; no rows written."""
    page = _signed_in(client).get(f"/view/cells/{ids['D']}").text
    assert 'id="decide"' in page and 'id="decide"' not in client.get(f"/view/cells/{ids['A']}").text
    form = {"reviewer": "ana", "state": "MODEL_PASS", "note": "read it", **{f"score_{d}": str(n)
                                                                        for d, n in SCORES_PASS.items()}}
    before = _counts()
    assert client.post(f"/view/cells/{ids['D']}/decide", data=form).status_code == 403
    assert client.post(f"/view/cells/{ids['D']}/decide", data={**form, "csrf": "0" * 64}).status_code == 403
    half = {**form, "csrf": _csrf(page), "score_failure_control": ""}
    r = client.post(f"/view/cells/{ids['D']}/decide", data=half)
    assert r.status_code == 422 and "scores.failure_control" in r.text
    low = {**form, "csrf": _csrf(page), "score_task_correctness": "0"}
    refused = client.post(f"/view/cells/{ids['D']}/decide", data=low)
    assert refused.status_code == 422 and "decision refused" in refused.text
    assert _counts() == before


def test_a_decision_through_the_form_is_recorded_and_the_summary_follows(client, ids):
    """Adjudication: the form calls adjudication.record_human_decision; the cell shows the decision; the
    summary counts it."""
    page = _signed_in(client).get(f"/view/cells/{ids['D']}").text
    form = {"csrf": _csrf(page), "reviewer": "ana <b>", "state": "MODEL_PASS", "note": "the answer is right",
            **{f"score_{d}": str(n) for d, n in SCORES_PASS.items()}}
    r = client.post(f"/view/cells/{ids['D']}/decide", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(f"/view/cells/{ids['D']}")
    after = client.get(f"/view/cells/{ids['D']}").text
    assert "GRADER_DISPUTE -&gt; MODEL_PASS" in after and "ana &lt;b&gt;" in after and 'id="decide"' not in after
    d_rate = next(x for x in snapshot("vw1", interim=None).by_model_condition if x.condition == "D")
    assert (d_rate.passed, d_rate.n) == (1, 1)


def test_safe_next_keeps_sign_in_redirects_inside_the_viewer():
    """Auth: `next` outside /view/ (another site, a scheme-relative URL) falls back to the list."""
    assert safe_next("/view/cells/3") == "/view/cells/3"
    for bad in ["https://evil.example/view/", "//evil.example/view/", "/docs", "/view\\..\\x", None]:
        assert safe_next(bad) == "/view/"


def test_marks_merge_overlapping_quotes_and_escape_inside_them():
    """Highlighting: quotes match across reflowed whitespace, overlaps merge, marked text stays escaped."""
    marked = mark_quotes("a <x> b\nc d", ["<x> b c", "b c d"])
    assert marked == '<pre class="answer">a <mark>&lt;x&gt; b\nc d</mark></pre>'
    assert mark_quotes("plain", ["absent"]) == '<pre class="answer">plain</pre>'


def test_the_forest_plot_has_a_zero_line_and_one_row_per_comparison():
    """Forest plot: one point and interval per paired comparison, the zero line, labels escaped."""
    clustered = clustered_difference([ClusterTable("P01", 3, 1, 2, 2), ClusterTable("P02", 2, 0, 2, 2)])
    rows = [PairedComparison(model="<m>", model_hash="h", comparison=f"{a} vs {b}", first=a, second=b, n_pairs=14,
                             both_pass=5, b=1, c=4, both_fail=4, p_value=0.375, difference=-0.214,
                             difference_ci95=(-0.49, 0.1), reading="r", clustered=clustered,
                             family_p_value=clustered.p_value, family_p_source="clustered", holm_p_value=0.5,
                             family_size=2, min_detectable_difference=0.4,
                             power_reading=read_comparison(f"{a} vs {b}", -0.214, clustered.interval, 0.4, 0.1))
            for a, b in [("C", "B"), ("D", "C")]]
    svg = forest_plot(rows, multi_model=True)
    assert svg.count("<circle") == 2 and 'stroke="#000"' in svg and "+0 pts" in svg
    assert "&lt;m&gt;: C vs B" in svg and "<m>" not in svg and "-21.4 pts [-49.0 to +10.0 pts] p=0.375 n=14" in svg


def test_afpbench_view_prints_the_sweep_url_and_serves_it_on_loopback(ids, sqlite_url, tmp_path):
    """`afpbench view SWEEP`: listens on 127.0.0.1, prints the sweep page's URL, serves it; an unknown
    sweep is one line naming it, exit 2, nothing served."""
    env = {**os.environ, "AFP_DATABASE_URL": sqlite_url, "AFP_API_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "afpbench.api.cli", "view"]
    bad = subprocess.run([*cmd, "nope"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no sweep with id 'nope'" in bad.stderr and len(bad.stderr.splitlines()) == 1
    proc = subprocess.Popen([*cmd, "vw1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        match = re.fullmatch(r"afpbench viewer: (http://127\.0\.0\.1:\d+/view/sweeps/vw1) \(sign in with "
                             r"AFP_API_TOKEN\)\n", line)
        assert match, line
        answer = requests.get(match.group(1), timeout=30, allow_redirects=False)
        assert answer.status_code == 303 and "/view/login" in answer.headers["location"]
        assert TOKEN not in line
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
