"""The batch quota shared by every worker, on real services: Redis broker, PostgreSQL, two real `afpbench
worker` processes, the simulator speaking OpenAI's batch API.

Rule checked (issue 40, docs/SPEC.md "Lanes"; workers/limits/batch_quota.py): the provider's batch quota
(`limits.batch_queue_tokens`, the most input tokens a pool's pending batches may hold) holds across every
worker forming batches: the pool's open batches never hold more estimated tokens than the quota, and a
batch that ends gives its room back, so the sweep still completes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.test_batch_lane import FAST, _one_of_each, _run
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration

# Condition A's one-round prompts are estimated at 320-538 tokens (characters / 4): two of the largest fit,
# three never do, so at most two cells are queued at the provider at any moment.
QUOTA = 1100


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "quota.yaml"
    path.write_text(
        "name: batch quota\n"
        "models:\n  - {provider: sim, model: sim-1, label: 'sim (simulated)', lane: batch,"
        f" limits: {{batch_queue_tokens: {QUOTA}}}}}\n"
        "judges:\n  - {provider: sim, model: sim-1, label: 'sim-judge (simulated)'}\n"
        "conditions: [A]\nrepeats: 2\nfixtures: {only: [P01, P02, P03, P04, P05, P06, P07]}\n"
    )
    return path


class OpenTokens(threading.Thread):
    """Reads the open batches' tokens (what the pool holds at the provider) every 20 ms until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.engine = create_engine(url)
        self.most = 0
        self.readings = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            with self.engine.connect() as conn:
                held = conn.execute(text("select coalesce(sum(tokens), 0) from batch "
                                         "where status in ('created', 'submitting', 'submitted')")).scalar_one()
            self.most, self.readings = max(self.most, held), self.readings + 1

    def stop(self) -> None:
        self.done.set()
        self.join(10)
        self.engine.dispose()


def test_the_batch_quota_holds_across_two_workers_and_the_sweep_completes(postgres_url, fresh_redis, tmp_path):
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=0.5))).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, AFP_BATCH_MAX_ENTRIES="3", **FAST)
        subprocess.run([sys.executable, "-m", "afpbench.api.cli", "db", "upgrade"], cwd=REPO, env=env, check=True,
                       capture_output=True, timeout=120)
        with running_workers(env, ["w1", "w2"], tmp_path):
            watch = OpenTokens(postgres_url)
            watch.start()
            try:
                summary = _run(env, _spec(tmp_path), tmp_path)
            finally:
                watch.stop()
        at_provider = sim.stats()["batches"]
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        batches = conn.execute(text("select entries, tokens, status from batch order by id")).all()
    engine.dispose()
    assert summary["done"] == summary["cells"] == 17, "P01-P07 at repeats 2 (P05-P07 high risk: 3)"
    assert watch.readings > 10 and 0 < watch.most <= QUOTA, f"open batches held {watch.most} tokens"
    assert all(1 <= entries <= 2 and tokens <= QUOTA for entries, tokens, _ in batches), batches
    assert len(batches) >= 9 and at_provider == len(batches), "17 cells, two at most at a time, each sent once"
    assert all(status == "ended" for *_, status in batches)
    assert _one_of_each(postgres_url) == ([], [], [])
