"""A budgeted sweep in distributed mode: PostgreSQL, Redis, two real `afpbench worker` processes.

Rule checked (docs/PROTOCOL.md, "Cost plan and budget"): releases from the runner and from both workers
(each top-up) share the one budget under the sweep row's lock, so the spend stays within it; the cells
never sent end "not run" (no result state, never INFRA_ERROR) and the sweep completes with one aggregate.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration

BUDGET = 0.1


def test_budget_on_postgres_and_redis_with_two_workers(postgres_url, fresh_redis, tmp_path):
    spec = tmp_path / "spec.yaml"
    priced = "prices: {input_per_mtok: 3, output_per_mtok: 15}, params: {max_tokens: 1500}"
    spec.write_text("name: budget-distributed\nfixtures: {only: [P01, P02, P03, P04]}\nrepeats: 2\n"
                    f"models:\n  - {{provider: sim, model: sim-b, label: b, {priced}}}\n"
                    f"judges:\n  - {{provider: sim, model: sim-bj, label: bj, {priced}}}\n"
                    f"budget: {{usd: {BUDGET}}}\n")
    env = service_env(postgres_url, fresh_redis)
    with running_workers(env, ["bw1", "bw2"], tmp_path):
        ran = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json"], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr + "".join(p.read_text() for p in tmp_path.glob("*.log"))
    sweep = json.loads(ran.stdout)["sweep_id"]
    report = json.loads(subprocess.run([sys.executable, "-m", "afpbench.api.cli", "report", sweep, "--format",
                                        "json"], cwd=REPO, env=env, capture_output=True, text=True,
                                       timeout=120).stdout)
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        not_run = conn.execute(text("select count(*) from cell where state is null and phase = 'done' "
                                    "and state_reason like 'not run: budget reached%'")).scalar()
        infra = conn.execute(text("select count(*) from cell where state = 'INFRA_ERROR'")).scalar()
        claims = conn.execute(text("select count(*) from aggregate where summary is not null")).scalar()
    engine.dispose()
    assert report["budget"]["reached"] and not_run == report["budget"]["not_run"] > 0
    assert report["cost"]["sweep_usd"] <= BUDGET and report["cost"]["by_judge"]
    assert infra == 0 and claims == 1
