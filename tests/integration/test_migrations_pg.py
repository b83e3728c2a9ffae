"""Migrations on a real PostgreSQL: the schema they build is exactly workers/models.py, the cell key is
UNIQUE, many processes can upgrade at once, and a database behind the code is refused.

The same checks as tests/unit/workers/store/test_migrations.py (SQLite), on the database distributed mode uses.
"""

from __future__ import annotations

import threading

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from afpbench.workers.store import migrate
from tests.unit.workers.store.test_migrations import (
    assert_0002_adds_the_judge_call_columns_and_keeps_old_rows,
    assert_0003_moves_the_fixture_texts_into_rows,
    assert_schema_matches_models,
    insert_cell,
    insert_sweep,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_engine(postgres_url: str):
    engine = create_engine(postgres_url)
    yield engine
    engine.dispose()


def test_upgrade_of_an_empty_postgres_database_builds_exactly_the_model_schema(postgres_url, pg_engine):
    assert migrate.upgrade(postgres_url) == migrate.head_revision()
    assert_schema_matches_models(pg_engine)
    migrate.check_schema_current(pg_engine)


def test_cell_key_is_unique_on_postgres_one_row_per_matrix_cell(postgres_url, pg_engine):
    migrate.upgrade(postgres_url)
    with pg_engine.begin() as connection:
        insert_sweep(connection)
        insert_cell(connection)
        insert_cell(connection, repeat=2)
    with pytest.raises(IntegrityError, match="uq_cell_key"), pg_engine.begin() as connection:
        insert_cell(connection)


def test_a_database_stamped_at_base_is_refused_until_upgraded(postgres_url, pg_engine):
    cfg = migrate.alembic_config(postgres_url)
    command.upgrade(cfg, migrate.INITIAL_REVISION)  # the tables a pre-migration database has
    command.stamp(cfg, "base")  # tables exist, but the history says the schema is older than the code
    with pytest.raises(migrate.SchemaBehind, match=r"database schema is at base.*run `afpbench db upgrade`"):
        migrate.check_schema_current(pg_engine)
    with pytest.raises(migrate.SchemaBehind):
        migrate.ensure_schema(pg_engine)  # PostgreSQL is never migrated behind the operator's back
    migrate.upgrade(postgres_url)  # the operator's `afpbench db upgrade` adopts the existing tables
    migrate.check_schema_current(pg_engine)
    assert_schema_matches_models(pg_engine)


def test_a_fresh_postgres_database_is_created_through_the_migrations(pg_engine):
    migrate.ensure_schema(pg_engine)
    assert migrate.current_revision(pg_engine) == migrate.head_revision()
    assert_schema_matches_models(pg_engine)


def test_many_processes_upgrading_at_once_migrate_once_and_all_succeed(postgres_url, pg_engine):
    """Workers of a fresh deployment start together; the advisory lock makes one migrate, the rest wait."""
    errors: list[BaseException] = []
    reached: list[str] = []

    def run() -> None:
        try:
            reached.append(migrate.upgrade(postgres_url))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert reached == [migrate.head_revision()] * 4
    with pg_engine.connect() as connection:
        assert connection.execute(text(f"SELECT count(*) FROM {migrate.VERSION_TABLE}")).scalar() == 1


def test_downgrade_to_base_then_upgrade_again_round_trips(postgres_url, pg_engine):
    migrate.upgrade(postgres_url)
    command.downgrade(migrate.alembic_config(postgres_url), "base")
    assert set(inspect(pg_engine).get_table_names()) <= {migrate.VERSION_TABLE}
    migrate.upgrade(postgres_url)
    assert_schema_matches_models(pg_engine)
    assert set(SQLModel.metadata.tables) <= set(inspect(pg_engine).get_table_names())


def test_0002_adds_the_judge_call_columns_on_postgres(postgres_url, pg_engine):
    assert_0002_adds_the_judge_call_columns_and_keeps_old_rows(postgres_url, pg_engine)


def test_0003_moves_the_fixture_texts_into_rows_on_postgres(postgres_url, pg_engine):
    assert_0003_moves_the_fixture_texts_into_rows(postgres_url, pg_engine)
