"""Bodies bounded before auth, tokens only in the header (issue #15, item 4), and the OpenAPI document
naming the door's answers.

The holes: one unauthenticated 100 MB POST grew the server from 197 to 720 MB (the body was read before
the token check and without a limit), and a token in the query string landed in the access log."""

from __future__ import annotations

import time

import pytest
import requests

from tests.security.door_harness import AUTH, TOKEN, push_body, serve_env, serving, vm_rss_kib

pytestmark = pytest.mark.integration

LIMIT = 1024 * 1024  # AFP_MAX_BODY_BYTES for this server (the default is 2 MiB)
HUNDRED_MB = 100 * 1024 * 1024
GROWTH_KIB = 8 * 1024  # "a few MB"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-bodies")
    with serving(serve_env(tmp, AFP_MAX_BODY_BYTES=str(LIMIT)), tmp / "serve.log") as server:
        yield server


def _settled_rss(pid: int) -> int:
    time.sleep(0.5)
    return vm_rss_kib(pid)


def test_a_100_mb_post_is_answered_from_its_headers_without_growing_the_server(served):
    """Rule: 401 before the body is read, 413 for a Content-Length over AFP_MAX_BODY_BYTES at once and
    for a chunked body as soon as it passes the limit; the connection is closed, the rest never read,
    and the server's resident memory grows by no more than a few MB."""
    for _ in range(3):  # warm up the request path, so its first-use allocations are not counted
        requests.post(f"{served.base}/sweeps", json={"models": []}, headers=AUTH, timeout=30)
        requests.post(f"{served.base}/sweeps", data=b"x" * (LIMIT + 1), headers=AUTH, timeout=30)
    before = _settled_rss(served.proc.pid)
    answers = {
        "unauthenticated, Content-Length": push_body(served.base, "/sweeps", {}, HUNDRED_MB),
        "unauthenticated, chunked": push_body(served.base, "/sweeps", {}, HUNDRED_MB, chunked=True),
        "wrong token": push_body(served.base, "/sweeps", {"Authorization": "Bearer wrong"}, HUNDRED_MB),
        "authenticated, Content-Length": push_body(served.base, "/sweeps", AUTH, HUNDRED_MB),
        "authenticated, chunked": push_body(served.base, "/sweeps", AUTH, HUNDRED_MB, chunked=True),
    }
    after = _settled_rss(served.proc.pid)
    for case, answer in answers.items():
        expected = 413 if case.startswith("authenticated") else 401
        assert answer.status == expected, (case, answer)
        assert b"connection: close" in answer.head.lower(), (case, answer.head)
        assert answer.body_bytes_sent < HUNDRED_MB // 2, (case, answer.body_bytes_sent)
    assert after - before < GROWTH_KIB, f"server RSS grew by {(after - before) / 1024:.1f} MB"
    # Within the limit, the request goes through to validation as before.
    small = requests.post(f"{served.base}/sweeps", json={"models": []}, headers=AUTH, timeout=30)
    assert small.status_code == 422, small.text
    over = requests.post(f"{served.base}/sweeps", data=b"{" + b" " * LIMIT + b"}", headers=AUTH, timeout=30)
    assert over.status_code == 413 and "AFP_MAX_BODY_BYTES" in over.json()["detail"], over.text


def test_a_token_in_the_query_string_is_refused_and_never_logged(served):
    """Rule: the token goes in the Authorization header only. A credential-named query parameter, or the
    token anywhere in the query string, is refused (401) even beside a good header; the access log
    prints paths without query strings, so neither the token nor any other query value is written."""
    for query, headers in ((f"token={TOKEN}", {}), (f"access_token={TOKEN}", AUTH), (f"api_key={TOKEN}", AUTH),
                           (f"limit=5&note={TOKEN}", AUTH), (f"x=Bearer%20{TOKEN}", AUTH)):
        response = requests.get(f"{served.base}/sweeps?{query}", headers=headers, timeout=10)
        assert response.status_code == 401, (query, response.text)
        assert TOKEN not in response.text
    fine = requests.get(f"{served.base}/sweeps?limit=5&offset=0", headers=AUTH, timeout=10)
    assert fine.status_code == 200, fine.text
    time.sleep(0.5)  # the access log is written by the serving process
    log = served.log()
    assert TOKEN not in log
    assert '"GET /sweeps HTTP/1.1" 401' in log and '"GET /sweeps HTTP/1.1" 200' in log, log[-2000:]
    assert "limit=5" not in log and "?" not in "".join(line for line in log.splitlines() if "GET /sweeps" in line)


def test_the_openapi_document_lists_401_413_and_422(served):
    """Rule (acceptance): the OpenAPI document names the door's answers: 413 on every operation, 401 on
    every operation but the probes (/healthz, /readyz), 422 on every operation that takes input."""
    doc = requests.get(f"{served.base}/openapi.json", headers=AUTH, timeout=10).json()
    # The description itself is public (issue #13: Swagger fetches it before Authorize has the token).
    assert requests.get(f"{served.base}/openapi.json", timeout=10).status_code == 200
    operations = [(path, method, op) for path, ops in doc["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 12
    for path, method, op in operations:
        codes = set(op["responses"])
        assert "413" in codes, (method, path, codes)
        assert ("401" in codes) == (path not in ("/healthz", "/readyz")), (method, path, codes)
        if op.get("parameters") or op.get("requestBody"):
            assert "422" in codes, (method, path, codes)
    posted = doc["paths"]["/sweeps"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fixtures = doc["components"]["schemas"][posted.rsplit("/", 1)[1]]["properties"]["fixtures"]
    assert "PostedFixtureSource" in str(fixtures), "the posted spec's schema is the one without server paths"
