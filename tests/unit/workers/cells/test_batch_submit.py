"""A batch is accepted, and paid for, once (workers/cells/batch_submit.py), on SQLite and the simulator over
real HTTP in all three shapes.

Rules: the intent (`submitting`, the row's label) is written before the create request; a create whose
answer never came leaves the row `submitting`, and the next poll adopts the copy the provider holds (by
its label: OpenAI, Gemini; by its time window, request count and custom ids: Anthropic) instead of sending
a second; only when the provider holds none, and the last try can no longer be answered, is it sent
again; Anthropic candidates that cannot be told apart send nothing and say so on the row and in
`afpbench status`; a copy adopted
unconfirmed that proves another's gives none of its answers to our cells.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlmodel import select

from afpbench.workers.cells.batch_poll import advance_batches
from afpbench.workers.cells.batch_submit import UNCONFIRMED, Intent
from afpbench.workers.cells.dispatch import release
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest, Endpoint
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from afpbench.workers.store.batch_models import Batch
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, Phase, utcnow
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.broker import drain
from tests.unit.sweep_builder import CellMaker, make_sweep

SHAPES = ["sim", "sim-anthropic", "sim-gemini"]
_NUMBERS = itertools.count(1)


def _sweep(settings_env, sqlite_url: str, sim: SimServer, provider: str) -> str:
    """A running sweep of three one-round cells on the batch lane, released into one `created` batch; its
    id, new to the process (a sweep's inputs are cached by id)."""
    sweep = f"once{next(_NUMBERS)}"
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://", AFP_SIM_URL=sim.base_url)
    drain()
    spec = parse_spec({"name": "once", "judges": [], "models": [
        {"provider": provider, "model": "sim-1", "lane": "batch", "timeout_s": 1}]})
    inputs = load_inputs(spec)
    with session_scope() as s:
        row = make_sweep(s, sweep, spec=spec, status="running", inputs=inputs.to_json(),
                         fixture_files=dict(zip(list(inputs.fixtures), list(inputs.fixture_files), strict=True)))
        cells = CellMaker(s, row)
        for fixture in ("P01", "P02", "P03"):
            cells.add("A", fixture, None)
        s.execute(update(Cell).values(phase=Phase.pending))
    release(sweep)
    drain()
    return sweep


def _batch() -> Batch:
    with session_scope() as s:
        (row,) = s.exec(select(Batch)).all()
        s.expunge(row)
    return row


def _look(sweep: str, routed: list) -> int:
    """One poller's look, the batch due now (its poll time is not waited for)."""
    with session_scope() as s:
        s.execute(update(Batch).values(next_poll_at=utcnow() - timedelta(seconds=1)))
    return advance_batches(sweep, "test", lambda *a: routed.append(a))


def _as_tried(label: str, ago: timedelta, answered: bool = False) -> None:
    """The row as a try of `ago` left it: submitting, with its intent (a poller killed, a timeout; or
    `answered` with an error status)."""
    then = utcnow() - ago
    with session_scope() as s:
        s.execute(update(Batch).values(status="submitting",
                                       details={"submission": Intent(label, then, then, 1, answered).to_json()}))


def _foreign(sim: SimServer, provider: str, label: str, size: int) -> str:
    """A batch someone else made at the provider (other custom ids); its id."""
    adapter = adapter_for(provider)
    endpoint = Endpoint(provider, "sim-1", sim.base_url, None)
    lines = [adapter.batch_line(endpoint, f"other{i}", ChatRequest([{"role": "user", "content": "hi"}]))
             for i in range(size)]
    return adapter.submit_batch(endpoint, lines, label).provider_batch_id


@pytest.mark.parametrize("provider", SHAPES)
def test_a_create_left_unanswered_is_adopted_at_the_next_poll_not_sent_again(sqlite_url, settings_env, provider):
    # The sim registers the batch and holds the answer past the client's 1 s timeout.
    with SimServer(SimConfig(faults=FaultConfig(batch_create_hold_s=60))) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, provider)
        routed: list = []
        assert _look(sweep, routed) == 1
        tried = _batch()
        assert tried.status == "submitting" and tried.provider_batch_id is None
        assert "asked before any new try" in (tried.error or "")
        assert tried.details["submission"]["tries"] == 1 and sim.stats()["batches"] == 1
        _look(sweep, routed)
        adopted = _batch()
        assert adopted.status == "submitted" and adopted.provider_batch_id
        how = adopted.details["identified"]["how"]
        assert how == ("its label" if provider != "sim-anthropic" else "its results' custom ids")
        _look(sweep, routed)  # polled: ended, every entry recorded
        ended = _batch()
        with session_scope() as s:
            attempts = s.exec(select(Attempt)).all()
        assert sim.stats()["batches"] == 1, "one batch at the provider for the row: never sent twice"
    assert ended.status == "ended" and ended.recorded == ended.answered == 3
    assert len(attempts) == 3 and all(a.outcome == "answer" for a in attempts)


@pytest.mark.parametrize("provider", SHAPES)
def test_nothing_at_the_provider_and_the_last_try_over_sends_it_once(sqlite_url, settings_env, provider):
    with SimServer(SimConfig()) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, provider)
        label = "afpbench test batch 1 0123456789ab"
        # Someone else's batch: another label (OpenAI, Gemini), another request count (Anthropic).
        _foreign(sim, provider, "someone else's", 3 if provider != "sim-anthropic" else 2)
        _as_tried(label, timedelta(hours=1))
        _look(sweep, [])
        row = _batch()
        stats = sim.stats()
    assert row.status == "submitted" and row.details["identified"]["how"] == "its create answered"
    assert row.details["submission"] == {**row.details["submission"], "label": label, "tries": 2}
    assert stats["batches"] == 2, "the foreign batch and ours, sent once"


def test_a_last_try_that_may_still_be_answered_holds_back_a_new_one(sqlite_url, settings_env):
    with SimServer(SimConfig()) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, "sim")
        _as_tried("afpbench test batch 1 fedcba987654", timedelta(0))
        _look(sweep, [])
        row = _batch()
        stats = sim.stats()
    assert row.status == "submitting" and "may still be answered until" in (row.error or "")
    assert stats["batches"] == 0


def test_a_last_try_answered_with_an_error_status_is_asked_for_and_sent_again_at_once(sqlite_url, settings_env):
    with SimServer(SimConfig()) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, "sim-gemini")
        _as_tried("afpbench test batch 1 5xx5xx5xx5xx", timedelta(0), answered=True)  # e.g. a 503 just now
        _look(sweep, [])
        row = _batch()
        stats = sim.stats()
    assert row.status == "submitted" and row.details["submission"]["tries"] == 2 and stats["batches"] == 1


def test_anthropic_candidates_not_told_apart_send_nothing_until_their_custom_ids_tell(sqlite_url, settings_env):
    faults = FaultConfig(batch_delay_s=3600)
    with SimServer(SimConfig(faults=faults)) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, "sim-anthropic")
        first, second = _foreign(sim, "sim-anthropic", "", 3), _foreign(sim, "sim-anthropic", "", 3)
        _as_tried("afpbench test batch 1 000000000000", timedelta(hours=1))
        _look(sweep, [])
        waiting = _batch()
        assert waiting.status == "submitting" and sim.stats()["batches"] == 2, "nothing sent"
        assert "2 batches at the provider" in waiting.error and first in waiting.error and second in waiting.error
        shown = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "status", sweep], capture_output=True,
                               text=True, timeout=120, env={**os.environ, "COLUMNS": "500"})
        assert shown.returncode == 0, shown.stderr
        assert f"batch {waiting.id} (submitting): not sent again: 2 batches at the provider" in shown.stdout
        faults.batch_delay_s = 0  # both end: their results carry other custom ids than ours
        _look(sweep, [])
        sent = _batch()
        stats = sim.stats()
    assert sorted(sent.details["rejected"]) == sorted([first, second])
    assert sent.status == "submitted" and sent.provider_batch_id not in (first, second) and stats["batches"] == 3


def test_an_anthropic_copy_adopted_unconfirmed_that_proves_another_gives_our_cells_none_of_its_answers(
        sqlite_url, settings_env):
    faults = FaultConfig(batch_delay_s=3600)
    with SimServer(SimConfig(faults=faults)) as sim:
        sweep = _sweep(settings_env, sqlite_url, sim, "sim-anthropic")
        other = _foreign(sim, "sim-anthropic", "", 3)
        _as_tried("afpbench test batch 1 111111111111", timedelta(hours=1))
        routed: list = []
        _look(sweep, routed)
        adopted = _batch()
        assert adopted.provider_batch_id == other and adopted.details["identified"]["how"] == UNCONFIRMED
        faults.batch_delay_s = 0
        _look(sweep, routed)
        ended = _batch()
        with session_scope() as s:
            attempts = s.exec(select(Attempt)).all()
    assert ended.status == "ended" and ended.answered == 0 and "holds other requests" in ended.error
    assert all(a.outcome == "infra_error" and "holds other requests" in a.error for a in attempts)
    assert len(routed) == 3, "each cell goes on to be sent again within its attempt budget"
