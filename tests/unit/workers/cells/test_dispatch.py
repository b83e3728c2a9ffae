"""Release windows (workers/cells/dispatch.py): a model with a declared request rate gets about ten
seconds of its own work; the models without one share DEFAULT_WINDOW, so what a sweep has queued at once
does not grow with its number of models (a window each let 100 models queue 100,000 cells, every one of
them a message held in the embedded run's memory). Checked on real releases over the in-memory broker."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import update
from sqlmodel import col, select

from afpbench.workers.cells import dispatch
from afpbench.workers.cells.dispatch import DEFAULT_WINDOW, release, window_for
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.broker import drain
from tests.unit.sweep_builder import CellMaker, make_sweep

PACED = {"requests_per_min": 60, "burst": 2}  # 10 s at 1 a second + burst 2 = a window of 12


def _spec():
    models = [{"provider": "sim", "model": f"sim-{i}", "label": f"sim-{i} (simulated)"} for i in range(4)]
    models.append({"provider": "sim", "model": "sim-paced", "label": "sim-paced (simulated)", "limits": PACED})
    return parse_spec({"name": "windows", "models": models, "judges": []})


def _queued_by_model() -> Counter[str]:
    with session_scope() as s:
        labels = s.exec(select(Cell.model_label).where(col(Cell.phase) == Phase.queued)).all()
    return Counter(labels)


@pytest.fixture
def sweep(sqlite_url, settings_env, monkeypatch):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    monkeypatch.setattr(dispatch, "DEFAULT_WINDOW", 8)  # shared by the four unpaced models: 2 each
    drain()
    spec = _spec()
    with session_scope() as s:
        row = make_sweep(s, "win1", spec=spec, status="running", inputs=load_inputs(spec).to_json())
        for index in range(5):
            cells = CellMaker(s, row, model_index=index)
            for n in range(20):
                cells.add("A", f"P{n:02d}", None)
        s.execute(update(Cell).values(phase=Phase.pending))  # as a new sweep leaves them
    yield spec
    drain()


def test_unpaced_models_share_one_window_and_a_paced_model_keeps_its_own(sweep):
    sent = release("win1")
    queued = _queued_by_model()
    assert queued == {**{f"sim-{i} (simulated)": 2 for i in range(4)}, "sim-paced (simulated)": 12}
    assert sent == 20 == len(drain())


def test_a_finished_cell_makes_room_for_one_more_of_its_model_only(sweep):
    release("win1")
    drain()
    with session_scope() as s:
        first = s.exec(select(Cell).where(Cell.model_label == "sim-0 (simulated)", col(Cell.phase) == Phase.queued)
                       .order_by(col(Cell.id))).first()
        first.phase = Phase.done
    assert release("win1") == 1
    assert _queued_by_model()["sim-0 (simulated)"] == 2


def test_window_sizes():
    spec = _spec()
    unpaced, paced = spec.models[0], spec.models[4]
    assert window_for(unpaced) == DEFAULT_WINDOW  # the only unpaced model of its sweep
    assert window_for(unpaced, 100) == DEFAULT_WINDOW // 100
    assert window_for(unpaced, 3) == 334  # rounded up: the share never leaves a model without room
    assert window_for(paced, 100) == 12  # a declared rate decides alone
