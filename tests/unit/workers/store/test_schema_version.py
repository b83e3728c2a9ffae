"""The engine factory's Alembic-free check (workers/store/schema_version.py): the head it reads from the
migration scripts is Alembic's own head, and only a database stamped at exactly that head skips Alembic."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from afpbench.workers.errors import SchemaMismatch
from afpbench.workers.store import db, migrate, schema_version


@pytest.fixture
def sqlite_engine(sqlite_url: str):
    engine = create_engine(sqlite_url)
    yield engine
    engine.dispose()


def test_the_head_read_from_the_scripts_is_alembics_head():
    """One fact in one place: the cheap head must never drift from the one Alembic migrates to."""
    assert schema_version.head_revision() == ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert schema_version.head_revision() == migrate.head_revision()


def _script(folder, name: str, revision: str, down: str) -> None:
    (folder / f"{name}.py").write_text(f"revision: str = {revision!r}\ndown_revision = {down}\n", encoding="utf-8")


def test_the_head_follows_a_merge_and_refuses_two_heads(tmp_path, monkeypatch):
    versions = tmp_path / "versions"
    versions.mkdir()
    _script(versions, "a", "a1", "None")
    _script(versions, "b", "b1", "'a1'")
    _script(versions, "c", "c1", "'a1'  # a comment after the id")
    monkeypatch.setattr(schema_version, "MIGRATIONS_DIR", tmp_path)
    schema_version.head_revision.cache_clear()
    try:
        with pytest.raises(SchemaMismatch, match="2 heads"):
            schema_version.head_revision()
        _script(versions, "d", "d1", "('b1', 'c1')")
        schema_version.head_revision.cache_clear()
        assert schema_version.head_revision() == "d1"
    finally:
        schema_version.head_revision.cache_clear()


def test_only_a_database_at_exactly_head_counts_as_at_head(sqlite_url, sqlite_engine):
    assert not schema_version.at_head(sqlite_engine)  # no version table: a new file
    migrate.upgrade(sqlite_url, migrate.INITIAL_REVISION)
    assert not schema_version.at_head(sqlite_engine)  # behind
    migrate.upgrade(sqlite_url)
    assert schema_version.at_head(sqlite_engine)
    with sqlite_engine.begin() as connection:
        connection.execute(text(f"INSERT INTO {schema_version.VERSION_TABLE} VALUES ('f00dfeed')"))
    assert not schema_version.at_head(sqlite_engine)  # two rows: Alembic's own check names the problem


def test_the_engine_factory_still_upgrades_a_sqlite_file_behind_head(settings_env, sqlite_url, sqlite_engine):
    command.upgrade(migrate.alembic_config(sqlite_url), migrate.INITIAL_REVISION)
    settings_env(AFP_DATABASE_URL=sqlite_url)
    db.get_engine()
    assert migrate.current_revision(sqlite_engine) == migrate.head_revision()

