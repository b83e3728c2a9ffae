"""Flower rows name the cell: EXECUTE and SCORE messages carry an `argsrepr` label (sweep, model,
condition, fixture, repeat) beside the real args, which stay [cell_id]. Checked on the messages a
release and a resend actually publish on the in-memory broker."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from afpbench.workers.cells.dispatch import release, resend
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.broker import drain
from tests.unit.sweep_builder import CellMaker, make_sweep

LABEL = "sim (simulated)"


@pytest.fixture
def queued(sqlite_url, settings_env) -> list[int]:
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    drain()
    spec = parse_spec({"name": "labels", "models": [{"provider": "sim", "model": "sim-1", "label": LABEL}],
                       "judges": []})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "lab1", spec=spec, status="running", inputs=load_inputs(spec).to_json()))
        ids = [cells.add("C", "P06", None, repeat=2), cells.add("A", "P01", None)]
        s.execute(update(Cell).values(phase=Phase.pending))  # as a new sweep leaves them: not yet released
    yield ids
    drain()


def test_released_and_resent_messages_carry_the_cell_label_not_only_its_id(queued):
    """Flower labels: argsrepr names sweep/model/condition/fixture#repeat; args stay [cell_id]; no text."""
    assert release("lab1") == 2
    sent = {tuple(m.decode()[0]): m.headers for m in drain()}
    first, second = queued
    assert sent[(first,)]["argsrepr"] == f"({first},) lab1/{LABEL}/C/P06#r2"
    assert sent[(second,)]["argsrepr"] == f"({second},) lab1/{LABEL}/A/P01#r1"
    assert all(h["task"] == "afpbench.execute" for h in sent.values())
    resend([(first, "sim", Phase.awaiting_score), (second, "sim", Phase.queued)])
    again = {tuple(m.decode()[0]): m.headers for m in drain()}
    assert again[(first,)]["task"] == "afpbench.score" and again[(first,)]["argsrepr"].endswith("/C/P06#r2")
    assert again[(second,)]["task"] == "afpbench.execute" and "SIMULATED answer" not in str(again)
