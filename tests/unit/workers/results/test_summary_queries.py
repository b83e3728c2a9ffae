"""The cost rule by lane (workers/results/summary_queries.py:sweep_cost, scoring/measures.py:COST_RULE):
an attempt that rode in a provider batch is priced at the declared batch prices, at the sync prices
where the spec declares none."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlmodel import col

from afpbench.workers.results.summary_queries import sweep_cost
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep


def _cost(sqlite_url, settings_env, prices: dict) -> float | None:
    settings_env(AFP_DATABASE_URL=sqlite_url)
    spec = parse_spec({"name": "cost", "judges": [],
                       "models": [{"provider": "sim", "model": "sim-1", "lane": "batch", "prices": prices}]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "c1", spec=spec))
        sync_cell = cells.add("A", "P01", "MODEL_PASS", output_tokens=1_000_000, tokens={"input": 1_000_000})
        cells.add("A", "P02", "MODEL_PASS", output_tokens=1_000_000, tokens={"input": 1_000_000})
        s.execute(update(Attempt).where(col(Attempt.cell_id) != sync_cell).values(worker="batch:1"))
    with session_scope() as s:
        model = spec.models[0]
        cost = sweep_cost(s, "c1", {model.model_hash: model}, {model.model_hash: model.display})
    assert cost.by_model[0].attempts == 2 and cost.by_model[0].tokens.input == 2_000_000
    return cost.sweep_usd


def test_batch_attempts_are_priced_at_the_batch_prices(sqlite_url, settings_env):
    usd = _cost(sqlite_url, settings_env, {"input_per_mtok": 2, "output_per_mtok": 8,
                                           "batch_input_per_mtok": 1, "batch_output_per_mtok": 4})
    assert usd == pytest.approx((2 + 8) + (1 + 4))


def test_without_batch_prices_batch_attempts_cost_the_sync_prices(sqlite_url, settings_env):
    assert _cost(sqlite_url, settings_env, {"input_per_mtok": 2, "output_per_mtok": 8}) == pytest.approx(20)
