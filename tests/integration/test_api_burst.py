"""The API under a burst (issue 38): 1,000 concurrent authorised GETs over every read route of a real
`afpbench serve` on PostgreSQL. What must hold however busy the machine is: no HTTP 500 (nor any 5xx but
503), every refusal a 503 with Retry-After, every request answered, /healthz answered while the burst
lasts, and every route answering 200 after it. The figures (latencies, RSS) are the benchmark's:
benchmarks/bench_api_burst.py, docs/RELIABILITY.md ("The API under a burst").
"""

from __future__ import annotations

import pytest

from afpbench.api.viewer.auth import COOKIE, session_value
from benchmarks.api_burst import populate, read_routes, run_burst
from tests.integration.workers_helper import service_env
from tests.serving import serve_process

pytestmark = pytest.mark.integration

TOKEN = "burst-test-token-not-a-secret"


def test_a_burst_of_1000_reads_degrades_to_503_and_never_wedges(postgres_url, fresh_redis, tmp_path):
    env = service_env(postgres_url, fresh_redis, AFP_API_TOKEN=TOKEN)
    ids = populate(env, tmp_path)
    paths = read_routes(ids)
    with serve_process(env, tmp_path / "serve.log", cwd=tmp_path) as served:
        result = run_burst(served.base, paths, headers={"Authorization": f"Bearer {TOKEN}"},
                           cookies={COOKIE: session_value(TOKEN.encode())}, pid=served.proc.pid, n=1000,
                           timeout_s=120, settle_s=0)
        log = served.log()
    counts = result.counts()
    assert all(a.status is not None for a in result.burst), f"every request is answered: {counts}"
    assert {a.status for a in result.burst} <= {200, 503}, f"only answers or refusals: {counts}"
    assert result.refusals_without_retry_after() == [], "every 503 says when to come back"
    assert counts.get("200", 0) > 0, f"the server kept serving while it refused: {counts}"
    assert result.health and all(a.status == 200 for a in result.health), "/healthz answered throughout"
    assert [(a.path, a.status) for a in result.after if a.status != 200] == [], "every route answers after"
    assert "Traceback" not in log and "QueuePool limit" not in log, log[-3000:]
