"""`afpbench run` with the prepared-fixture cache (workers/sweeps/prepared_cache.py), by the real CLI.

Rule (validity gate, seal): a run whose fixtures and gate reports come from the cache stores the same
seal, the same validity reports and the same cell outcomes as a run without it. The simulated model is
an in-process SimServer in plain mode (one fixed answer, so the outcomes can be compared): SIMULATED.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from afpbench.workers.sim.server import SimConfig, SimServer
from afpbench.workers.sweeps.prepared_cache import FILE_NAME
from tests.e2e.test_cli_errors import afpbench
from tests.security.test_valid_cancel import _sql


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """The packaged pilot set under conditions A-D: without a cache, then twice with one (cold, warm)."""
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    with SimServer(SimConfig(plain=True)).start() as sim:  # one fixed answer: the scoring is deterministic
        for name, setting in (("off", "off"), ("cold", str(cache)), ("warm", str(cache))):
            work = tmp_path_factory.mktemp(name)
            spec = {"name": "cache (simulated)", "judges": [], "conditions": ["A", "B", "C", "D"],
                    "models": [{"provider": "sim", "model": "sim-1", "base_url": sim.base_url}]}
            (work / "spec.yaml").write_text(yaml.safe_dump(spec))
            run = afpbench(["run", "spec.yaml", "--json"], work, env={"AFP_CACHE_DIR": setting}, timeout=300)
            assert run.returncode == 0, run.stderr
            assert "Traceback" not in run.stderr
            out[name] = (work / "afpbench.db", json.loads(run.stdout))
    out["cache"] = (cache / FILE_NAME, {})
    return out


def _stored(db: Path) -> tuple:
    (seal, validity, inputs), = _sql(db, "select seal_hash, validity, inputs from sweep")
    cells = _sql(db, "select model_label, condition, fixture_id, repeat, phase, state, state_reason from cell "
                     "order by condition, fixture_id, repeat")
    return seal, json.loads(validity), json.loads(inputs), cells


def test_a_cold_and_a_warm_run_store_what_a_run_without_the_cache_stores(runs):
    off, cold, warm = (_stored(runs[name][0]) for name in ("off", "cold", "warm"))
    assert cold == off and warm == off
    assert len(off[1]) == 8  # every pilot fixture gated
    assert len(off[3]) == runs["off"][1]["cells"] == 56  # 8 fixtures x 4 conditions, high-risk ones 3 times
    assert runs["warm"][1]["by_condition"] == runs["off"][1]["by_condition"]


def test_the_cold_run_fills_the_cache_and_off_writes_nothing(runs):
    path = runs["cache"][0]
    with sqlite3.connect(path) as db:
        assert db.execute("select count(*) from parsed").fetchone() == (8,)
        assert db.execute("select count(*) from gated").fetchone() == (8,)
    assert not (runs["off"][0].parent / FILE_NAME).exists()
