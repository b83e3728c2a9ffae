"""The distributed path once against the real model: Redis broker, PostgreSQL, one real `afpbench worker`
process, the shipped example spec narrowed on the command line to P01 and P08 x A (two cells; P01 alone in
the ci scope): the tier's time budget is spent on the embedded sweep; this proves the same pipeline across
processes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

from tests.integration.workers_helper import running_workers, service_env
from tests.realmodel.spec_helper import (
    CI_CUTS,
    SCOPE,
    STATES,
    assert_real_record,
    cell_records,
    example_spec,
    run_cli,
    scoped,
)

pytestmark = [pytest.mark.realmodel, pytest.mark.integration]


def test_a_few_real_cells_on_redis_postgres_and_one_worker(local_model_server, postgres_url, fresh_redis, tmp_path):
    spec = example_spec(local_model_server, tmp_path, **(CI_CUTS if SCOPE == "ci" else {}))
    fixtures = scoped(["P01,P08"], ["P01"])
    cells = 2 if SCOPE != "ci" else 1
    env = service_env(postgres_url, fresh_redis)
    with running_workers(env, ["rm1"], tmp_path, concurrency=4):
        args = ["run", str(spec), "--fixtures", *fixtures, "--conditions", "A", "--json", "--no-judge-check"]
        proc, seconds = run_cli(args, tmp_path, env=env, timeout=3600)
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr + logs[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["cells"] == summary["done"] == cells, summary
    assert set(summary["by_state"]) <= STATES and sum(summary["by_state"].values()) == cells
    print(f"\ndistributed: {cells} cells in {seconds:.0f} s; {summary['by_condition']}")
    records = cell_records(tmp_path, summary["sweep_id"], env)
    for record in records:
        assert_real_record(record, local_model_server)
        assert all(a["worker"].startswith("rm1@") for a in record["attempts"]), "the worker process executed it"
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        judged = conn.execute(text("select count(*) from judgement where simulated = false")).scalar()
        claims = conn.execute(text("select count(*) from aggregate where summary is not null")).scalar()
    engine.dispose()
    assert claims == 1, "the sweep's completion was claimed once"
    assert judged >= 1, "the real judge was called from the worker process"
