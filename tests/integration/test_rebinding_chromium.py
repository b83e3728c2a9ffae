"""DNS rebinding and cross-site writes, in real Chromium against a real `afpbench serve` on PostgreSQL
(issue 38): a page of another site whose name resolves to 127.0.0.1 gets no data and decides nothing,
with and without AFP_API_TOKEN.

Chromium maps evil.test to 127.0.0.1 (`--host-resolver-rules`). The attacker's page is the document of
http://evil.test:PORT/attack.html, PORT being afpbench's: Playwright answers that one request (the
attacker's server before the rebinding); every later request of the page goes to 127.0.0.1:PORT, the
same origin for the browser, so the browser itself would let the page read every answer. The page
reads the API and the viewer, lifts the viewer's CSRF token from a cell page, decides the disputed cell
through the form and through the API, creates a sweep, and posts across origins straight to
127.0.0.1:PORT. Chromium's own Local Network Access checks are turned off: the server must refuse on its
own, whatever the browser (other browsers have no such checks, and a rebound page is not a public one).
A control run with AFP_ALLOWED_HOSTS=evil.test shows the same page reading data and deciding the dispute,
so a refusal here is the Host check's and not the harness's.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

from benchmarks.api_burst import populate
from tests.integration.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.integration.workers_helper import service_env
from tests.serving import serve_process

pytestmark = pytest.mark.integration

EVIL = "evil.test"
REBINDING_ARGS = [*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {EVIL} 127.0.0.1",
                 "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessRespectPreflightResults,"
                 "BlockInsecurePrivateNetworkRequests"]
SPEC = {"name": "made by a rebound page", "models": [{"provider": "sim", "model": "sim-1", "label": "sim"}],
        "judges": [], "conditions": ["A"], "fixtures": {"only": ["P01"]}}
ZEROS = {"task_correctness": 0, "evidence_discipline": 0, "uncertainty_handling": 0, "failure_control": 0}

ATTACK = """<!doctype html><title>cute cats</title><script>
const DISPUTED = %(disputed)d, SWEEP = %(sweep)s, PORT = %(port)d, SPEC = %(spec)s, ZEROS = %(zeros)s;
async function grab(path, init) {
  try { const r = await fetch(path, init); return {path, status: r.status, body: (await r.text()).slice(0, 20000)}; }
  catch (e) { return {path, status: 0, body: String(e)}; }
}
window.attack = (async () => {
  const out = [];
  for (const path of ["/sweeps", `/sweeps/${SWEEP}/report?format=json`, `/cells/${DISPUTED}`, "/adjudications",
                      "/metrics", "/view/", `/view/sweeps/${SWEEP}`]) { out.push(await grab(path)); }
  const page = await grab(`/view/cells/${DISPUTED}`);
  out.push(page);
  const csrf = (page.body.match(/name="csrf" value="([0-9a-f]+)"/) || [])[1] || "";
  const form = new URLSearchParams({csrf, reviewer: "rebind-attacker", state: "MODEL_FAIL", note: "rebound"});
  for (const [k, v] of Object.entries(ZEROS)) { form.set("score_" + k, String(v)); }
  out.push(await grab(`/view/cells/${DISPUTED}/decide`, {method: "POST", body: form}));
  out.push(await grab(`/adjudications/${DISPUTED}`, {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({reviewer: "rebind-attacker", state: "MODEL_FAIL", note: "rebound", scores: ZEROS,
                          override: true, reason: "rebound"})}));
  out.push(await grab("/sweeps", {method: "POST", headers: {"Content-Type": "application/json"},
                                  body: JSON.stringify(SPEC)}));
  out.push(await grab(`http://127.0.0.1:${PORT}/sweeps`, {method: "POST", mode: "no-cors",
                      headers: {"Content-Type": "text/plain"}, body: JSON.stringify(SPEC)}));
  return out;
})();
</script>"""


def _facts(database_url: str, disputed: int) -> dict[str, object]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return {
                "cell_state": conn.execute(text("SELECT state FROM cell WHERE id = :c"), {"c": disputed}).scalar_one(),
                "decisions": conn.execute(text("SELECT count(*) FROM adjudication")).scalar_one(),
                "sweeps": conn.execute(text("SELECT count(*) FROM sweep")).scalar_one(),
            }
    finally:
        engine.dispose()


def _attack(pw, env: dict[str, str], log, ids: dict[str, object]) -> list[dict]:
    """Serve with `env`, open the attacker's page in Chromium, and return what each of its requests got."""
    with serve_process(env, log, cwd=log.parent) as served:
        port = int(served.base.rsplit(":", 1)[1])
        html = ATTACK % {"disputed": ids["disputed_cell"], "sweep": json.dumps(ids["sweep"]), "port": port,
                         "spec": json.dumps(SPEC), "zeros": json.dumps(ZEROS)}
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=REBINDING_ARGS)
        try:
            page = browser.new_context().new_page()
            page.route(f"http://{EVIL}:{port}/attack.html",
                       lambda route: route.fulfill(status=200, content_type="text/html", body=html))
            page.goto(f"http://{EVIL}:{port}/attack.html")
            return page.evaluate("window.attack")
        finally:
            browser.close()


@pytest.mark.parametrize("token", [None, "rebind-test-token-not-a-secret"], ids=["no-token", "token"])
def test_a_rebound_page_gets_no_data_and_decides_nothing(postgres_url, fresh_redis, tmp_path, sync_playwright,
                                                         token):
    env = service_env(postgres_url, fresh_redis, AFP_API_TOKEN=token or "")  # "" = no token
    env.pop("AFP_ALLOWED_HOSTS", None)  # the tests' "testserver" is no name a browser can be sent to
    ids = populate(env, tmp_path)
    before = _facts(postgres_url, ids["disputed_cell"])
    assert before["cell_state"] == "GRADER_DISPUTE"
    with sync_playwright() as pw:
        answers = _attack(pw, env, tmp_path / "serve.log", ids)
        same_origin = [a for a in answers if not a["path"].startswith("http")]
        assert [a["status"] for a in same_origin] == [400] * len(same_origin), [(a["path"], a["status"])
                                                                                 for a in same_origin]
        for answer in same_origin:
            assert ids["sweep"] not in answer["body"] and "MODEL_" not in answer["body"], answer["path"]
        assert _facts(postgres_url, ids["disputed_cell"]) == before, "nothing decided, no sweep created"

        # Control: the same page on a server told to answer to evil.test reads and decides (what the Host
        # check stops). The cross-origin post to 127.0.0.1 is still refused by its Origin.
        control = _attack(pw, {**env, "AFP_ALLOWED_HOSTS": EVIL}, tmp_path / "control.log", ids)
    listing = control[0]  # GET /sweeps, the page's first request
    if token is None:
        assert listing["status"] == 200 and ids["sweep"] in listing["body"]
        after = _facts(postgres_url, ids["disputed_cell"])
        assert after["cell_state"] == "MODEL_FAIL" and after["decisions"] == before["decisions"] + 2
        assert after["sweeps"] == before["sweeps"] + 1, "the same-origin POST only, not the cross-origin one"
    else:  # the token still stands between a rebound page and the data, once the Host is let through
        assert listing["status"] == 401
        assert _facts(postgres_url, ids["disputed_cell"]) == before
