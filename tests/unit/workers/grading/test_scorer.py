"""The scorer (workers/grading/scorer.py) on ids that name no row: a known, one-line failure (an
AfpbenchError), never an AttributeError."""

from __future__ import annotations

import pytest

from afpbench.workers.errors import RecordNotFound
from afpbench.workers.grading.scorer import score_answer, score_cell
from afpbench.workers.store.db import session_scope


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


def test_scoring_an_unknown_cell_is_record_not_found(db) -> None:
    """Rule: a cell id that names no cell is refused with RecordNotFound naming the id."""
    with pytest.raises(RecordNotFound, match="no cell with id 424242"):
        score_cell(424242, "unit-worker")
    with session_scope() as session, pytest.raises(RecordNotFound, match="no cell with id 424243"):
        score_answer(session, 424243)
