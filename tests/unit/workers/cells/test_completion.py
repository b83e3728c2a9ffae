"""Completion is a database fact (workers/cells/completion.py): an id that names no sweep wins no claim,
a known one-line failure rather than an AttributeError."""

from __future__ import annotations

import pytest
from sqlmodel import select

from afpbench.workers.cells.completion import claim_aggregate
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


def test_the_aggregate_of_an_unknown_sweep_is_never_claimed(db) -> None:
    """Rule: completion is a database fact; an unknown sweep id wins no claim and leaves no Aggregate row
    (the row's foreign key refuses it before the sweep is read)."""
    assert claim_aggregate("nosuch", "unit-worker") is False
    with session_scope() as session:
        assert session.exec(select(Aggregate)).all() == []
