"""Global per-provider limits on real services: three workers with different node names share two
simulated providers, each enforcing a strict token bucket. Every cell completes exactly once, the
providers answer <= 1% 429s, and sustained throughput is >= 95% of each configured limit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration

RATE_PER_MIN = 300.0  # per provider; 2 providers = 10 requests/s, within this 2-core machine
BURST = 10


def test_thousand_cells_two_providers_three_workers_stay_within_limits(postgres_url, fresh_redis, tmp_path):
    faults = FaultConfig(rate_per_min=RATE_PER_MIN, burst=BURST)
    with SimServer(SimConfig(faults=faults)).start() as sim_a, SimServer(SimConfig(faults=faults)).start() as sim_b:
        limits = {"requests_per_min": RATE_PER_MIN, "burst": BURST, "max_in_flight": 16}
        spec = {
            "name": "rate limits",
            "models": [
                {"provider": "sim", "model": "sim-a", "base_url": sim_a.base_url, "limits": limits},
                {"provider": "sim", "model": "sim-b", "base_url": sim_b.base_url, "limits": limits},
            ],
            "judges": [],
            "fixtures": {"only": ["P01", "P02", "P03", "P04", "P05", "P06", "P07"]},
            "repeats": 18,
        }
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(spec))
        env = service_env(postgres_url, fresh_redis)
        with running_workers(env, ["w1", "w2", "w3"], tmp_path, concurrency=8):
            proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(path), "--json"], cwd=REPO,
                                  env=env, capture_output=True, text=True, timeout=600)
        logs = "".join(p.read_text()[-3000:] for p in tmp_path.glob("*.log"))
        assert proc.returncode == 0, proc.stderr + logs
        summary = json.loads(proc.stdout)
        stats = [sim_a.stats(), sim_b.stats()]

    assert summary["cells"] >= 1000 and summary["done"] == summary["cells"]
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        doubled = conn.execute(text("select count(*) from (select cell_id from result group by cell_id "
                                    "having count(*) > 1) d")).scalar()
        per_worker = dict(conn.execute(text("select split_part(worker, '@', 1), count(*) from attempt "
                                            "group by 1")).all())
    engine.dispose()
    assert doubled == 0, "each cell has exactly one result"
    assert set(per_worker) == {"w1", "w2", "w3"}
    figures = []
    for s in stats:
        ok = s["by_status"].get("200", 0)
        limited = s["by_status"].get("429", 0)
        share_429 = limited / max(1, ok + limited)
        sustained = (ok - BURST) / (s["last_ok_at"] - s["first_ok_at"]) * 60.0
        figures.append((ok, limited, share_429, sustained))
        assert share_429 <= 0.01, figures
        assert sustained >= 0.95 * RATE_PER_MIN, figures
    print("rate-limit figures (ok, 429, share, sustained/min):", figures)
