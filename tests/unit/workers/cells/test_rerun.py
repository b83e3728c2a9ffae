"""The protocol's rerun (workers/cells/rerun.py) and the claim that runs its cells (workers/cells/claim.py).

Rules checked: only INFRA_ERROR and PROVIDER_BLOCK cells can be rerun (a scored answer never is), with a
note of bounded size; a reopened cell gets the one attempt budget again, counted from its rerun
(`attempt_base`), and when that is spent it ends INFRA_ERROR saying so, its result above the earlier ones
(`result_base`), never overwriting them.
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from afpbench.workers.cells.claim import Claimed, Exhausted, claim_cell
from afpbench.workers.cells.rerun import NOTE_MAX, RerunChoice, check_choice
from afpbench.workers.errors import RerunRefused
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Result
from tests.unit.sweep_builder import CellMaker, make_sweep


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


@pytest.mark.parametrize("states", [("MODEL_FAIL",), ("INFRA_ERROR", "GRADER_DISPUTE"), ()])
def test_only_environment_states_can_be_rerun(states):
    with pytest.raises(RerunRefused, match="only INFRA_ERROR and PROVIDER_BLOCK"):
        check_choice(RerunChoice(states=states))
    with pytest.raises(RerunRefused, match="--note"):
        check_choice(RerunChoice(note="x" * (NOTE_MAX + 1)))
    assert check_choice(RerunChoice(states=("PROVIDER_BLOCK",))).states == ("PROVIDER_BLOCK",)


def _reopened(attempts: int, base: int, result_base: int) -> int:
    with session_scope() as session:
        sweep = make_sweep(session)
        cell_id = CellMaker(session, sweep).add("A", "P01", "INFRA_ERROR")
        cell = session.get(Cell, cell_id)
        assert cell is not None
        cell.phase, cell.state, cell.attempts, cell.attempt_base, cell.result_base = (
            Phase.pending, None, attempts, base, result_base)
        session.add(cell)
    return cell_id


def test_a_reopened_cell_gets_the_attempt_budget_again_counted_from_its_rerun(db):
    cell_id = _reopened(attempts=3, base=3, result_base=1)
    claimed = claim_cell(cell_id, "w", lease_s=60, max_attempts=3)
    assert isinstance(claimed, Claimed) and claimed.number == 4, "attempt 4 is the rerun's first of 3"


def test_a_reopened_cell_whose_new_budget_is_spent_ends_infra_error_above_its_earlier_result(db):
    cell_id = _reopened(attempts=6, base=3, result_base=1)
    ended = claim_cell(cell_id, "w", lease_s=60, max_attempts=3)
    assert isinstance(ended, Exhausted) and "after 3 attempts since its rerun" in ended.reason
    with session_scope() as session:
        runs = [(r.scoring_run, r.state) for r in session.exec(select(Result).where(Result.cell_id == cell_id))]
    assert sorted(runs) == [(0, "INFRA_ERROR"), (1, "INFRA_ERROR")], "the earlier result kept, the new one above"
