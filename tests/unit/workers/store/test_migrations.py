"""Migrations (workers/migrations/) build exactly the schema of workers/models.py, on SQLite here.

Reliability rules: SQL is the source of truth, so the schema every deployment gets must be the one the
code describes (no drift), the matrix-cell key stays UNIQUE, and a database behind the code is refused
with a message that says what to do. tests/integration/test_migrations_pg.py does the same on PostgreSQL.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel
from typer.testing import CliRunner

from afpbench.workers.store import migrate, models  # noqa: F401  (models registers the tables)
from afpbench.workers.store.db import dispose_engines, get_engine
from tests.conftest import REPO

PILOT_P01 = (REPO / "fixtures" / "pilot" / "P01.yaml").read_text(encoding="utf-8")


def model_schema() -> dict[str, dict]:
    """Tables, columns (nullability), primary keys, unique keys, indexes and foreign keys of the models."""
    out = {}
    for table in SQLModel.metadata.sorted_tables:
        out[table.name] = {
            "columns": {c.name: c.nullable for c in table.columns},
            "primary": sorted(c.name for c in table.primary_key.columns),
            "unique": {u.name: list(u.columns.keys()) for u in table.constraints
                       if u.__class__.__name__ == "UniqueConstraint"},
            "indexes": {i.name: ([c.name for c in i.columns], bool(i.unique)) for i in table.indexes},
            "foreign": sorted((tuple(fk.parent.name for fk in c.elements), c.referred_table.name)
                              for c in table.foreign_key_constraints),
        }
    return out


def live_schema(engine: Engine) -> dict[str, dict]:
    insp = inspect(engine)
    out = {}
    for name in insp.get_table_names():
        if name == migrate.VERSION_TABLE:
            continue
        out[name] = {
            "columns": {c["name"]: c["nullable"] for c in insp.get_columns(name)},
            "primary": sorted(insp.get_pk_constraint(name)["constrained_columns"]),
            "unique": {u["name"]: u["column_names"] for u in insp.get_unique_constraints(name)},
            # PostgreSQL also reports the index behind each UNIQUE constraint; that one is the constraint.
            "indexes": {i["name"]: (i["column_names"], bool(i["unique"])) for i in insp.get_indexes(name)
                        if not i.get("duplicates_constraint")},
            "foreign": sorted((tuple(f["constrained_columns"]), f["referred_table"])
                              for f in insp.get_foreign_keys(name)),
        }
    return out


def assert_schema_matches_models(engine: Engine) -> None:
    live, wanted = live_schema(engine), model_schema()
    assert set(live) == set(wanted)
    for table in wanted:
        assert live[table] == wanted[table], table
    assert migrate.schema_differences(engine) == []  # also compares column types


def insert_cell(connection, repeat: int = 1) -> None:
    connection.execute(text(
        "INSERT INTO cell (sweep_id, model_label, model_hash, provider, condition, fixture_id, fixture_version,"
        " repeat, high_risk, phase, attempts, updated_at) VALUES ('s1', 'sim', 'h', 'sim', 'A', 'P01', '1',"
        " :repeat, false, 'pending', 0, CURRENT_TIMESTAMP)"), {"repeat": repeat})


def insert_sweep(connection, sweep_id: str = "s1", inputs: str = "{}") -> None:
    connection.execute(text(
        "INSERT INTO sweep (id, name, created_at, status, simulated, spec, seal_hash, seal_components,"
        " afpbench_version, notices, inputs, validity) VALUES (:id, 'n', CURRENT_TIMESTAMP, 'running', true,"
        " '{}', 'x', '{}', '0.1.0', '[]', :inputs, '{}')"), {"id": sweep_id, "inputs": inputs})


@pytest.fixture
def sqlite_engine(sqlite_url: str):
    engine = create_engine(sqlite_url)
    yield engine
    engine.dispose()


def test_upgrade_of_an_empty_sqlite_file_builds_exactly_the_model_schema(sqlite_url, sqlite_engine):
    assert migrate.upgrade(sqlite_url) == migrate.head_revision()
    assert migrate.current_revision(sqlite_url) == migrate.head_revision()
    assert_schema_matches_models(sqlite_engine)


def test_cell_key_is_unique_after_migration_one_row_per_matrix_cell(sqlite_url, sqlite_engine):
    migrate.upgrade(sqlite_url)
    with sqlite_engine.begin() as connection:
        insert_sweep(connection)
        insert_cell(connection)
    with pytest.raises(IntegrityError), sqlite_engine.begin() as connection:
        insert_cell(connection)


def test_upgrade_is_idempotent_and_keeps_rows(sqlite_url, sqlite_engine):
    migrate.upgrade(sqlite_url)
    with sqlite_engine.begin() as connection:
        insert_sweep(connection)
    migrate.upgrade(sqlite_url)
    with sqlite_engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM sweep")).scalar() == 1


def test_a_database_behind_the_code_is_refused_with_the_upgrade_command(sqlite_engine):
    with pytest.raises(migrate.SchemaBehind, match=r"code needs .*: run `afpbench db upgrade`"):
        migrate.check_schema_current(sqlite_engine)


def test_a_database_migrated_by_newer_code_is_refused(sqlite_url, sqlite_engine):
    migrate.upgrade(sqlite_url)
    with sqlite_engine.begin() as connection:
        connection.execute(text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = 'f00dfeed'"))
    with pytest.raises(migrate.SchemaAhead, match="f00dfeed"):
        migrate.check_schema_current(sqlite_engine)


def test_ensure_schema_upgrades_sqlite_in_place_with_zero_configuration(sqlite_engine):
    migrate.ensure_schema(sqlite_engine)
    migrate.check_schema_current(sqlite_engine)
    assert_schema_matches_models(sqlite_engine)


def test_a_database_made_by_create_all_before_migrations_is_adopted_not_recreated(sqlite_url, sqlite_engine):
    # The tables as create_all made them before migrations existed: revision 0001's schema, unversioned
    # (today's models have columns later revisions add, which adoption then adds too).
    command.upgrade(migrate.alembic_config(sqlite_url), migrate.INITIAL_REVISION)
    with sqlite_engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {migrate.VERSION_TABLE}"))
    with sqlite_engine.begin() as connection:
        insert_sweep(connection)
    migrate.upgrade(sqlite_url)
    assert migrate.current_revision(sqlite_engine) == migrate.head_revision()
    with sqlite_engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM sweep")).scalar() == 1


def test_a_database_with_only_some_afpbench_tables_is_refused(sqlite_url, sqlite_engine):
    SQLModel.metadata.tables["sweep"].create(sqlite_engine)
    with pytest.raises(migrate.SchemaMismatch, match="no migration history|neither all"):
        migrate.upgrade(sqlite_url)


def test_downgrade_to_base_removes_every_table(sqlite_url, sqlite_engine):
    migrate.upgrade(sqlite_url)
    cfg = migrate.alembic_config(sqlite_url)
    command.downgrade(cfg, "base")
    assert set(inspect(sqlite_engine).get_table_names()) <= {migrate.VERSION_TABLE}


def test_migration_scripts_are_package_data_so_pip_install_ships_them():
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data["afpbench.workers"]
    files = [p.relative_to(REPO / "workers").as_posix() for p in migrate.MIGRATIONS_DIR.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert "store/migrations/env.py" in files and "store/migrations/script.py.mako" in files
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files), files


def test_db_commands_upgrade_then_report_current(settings_env, sqlite_url):
    import typer

    from afpbench.api import cli_db

    settings_env(AFP_DATABASE_URL=sqlite_url)
    app = typer.Typer()
    app.command("noop")(lambda: None)
    cli_db.register(app)
    runner = CliRunner()
    behind = runner.invoke(app, ["db", "current", "--check"])
    assert behind.exit_code == 1 and "behind" in behind.output
    first = runner.invoke(app, ["db", "upgrade"])
    assert first.exit_code == 0 and f"-> {migrate.head_revision()}" in first.output
    again = runner.invoke(app, ["db", "upgrade"])
    assert "already at" in again.output
    assert runner.invoke(app, ["db", "current", "--check"]).exit_code == 0


def test_processes_upgrading_one_sqlite_file_at_once_all_succeed(sqlite_url):
    """The embedded CLI, the API and a worker may all open a new SQLite file at the same moment."""
    import threading

    reached, errors = [], []

    def run() -> None:
        try:
            reached.append(migrate.upgrade(sqlite_url))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and reached == [migrate.head_revision()] * 4


JUDGEMENT_CALL_COLUMNS = {"finish_reason", "input_tokens", "output_tokens", "latency_ms", "request_sent",
                          "retry_change"}


def insert_judgement(connection) -> None:
    connection.execute(text(
        "INSERT INTO judgement (cell_id, scoring_run, judge_label, judge_round, prompt_sha256, raw_text,"
        " parse_error, simulated, created_at) VALUES ((SELECT min(id) FROM cell), 1, 'judge', 1, 'p', '{',"
        " 'not a single JSON object', false, CURRENT_TIMESTAMP)"))


def assert_0002_adds_the_judge_call_columns_and_keeps_old_rows(url: str, engine: Engine) -> None:
    """Revision 0002 on a database with a judgement written before it: the row stays, the call's facts
    are empty (it never had them), and a downgrade removes exactly those columns again."""
    cfg = migrate.alembic_config(url)
    command.upgrade(cfg, "0001")
    with engine.begin() as connection:
        insert_sweep(connection)
        insert_cell(connection)
        insert_judgement(connection)
    command.upgrade(cfg, "0002")
    columns = {c["name"] for c in inspect(engine).get_columns("judgement")}
    assert JUDGEMENT_CALL_COLUMNS <= columns
    with engine.connect() as connection:
        row = connection.execute(text("SELECT raw_text, finish_reason, request_sent FROM judgement")).one()
    assert tuple(row) == ("{", None, None)
    command.downgrade(cfg, "0001")
    assert not JUDGEMENT_CALL_COLUMNS & {c["name"] for c in inspect(engine).get_columns("judgement")}
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM judgement")).scalar() == 1


def test_0002_adds_the_judge_call_columns_on_sqlite(sqlite_url, sqlite_engine):
    assert_0002_adds_the_judge_call_columns_and_keeps_old_rows(sqlite_url, sqlite_engine)


OLD_TEXTS = {"a.yaml": "id: FX1\ntitle: 'é \\u0000 \"quoted\"'\n", "b.yaml": "id: FX2\n", "c.yaml": "not: parsed\n"}


def assert_0003_moves_the_fixture_texts_into_rows(url: str, engine: Engine) -> None:
    """Revision 0003 on sweeps stored before it: each one's fixture texts leave the inputs JSON for rows
    of sweep_fixture, in the stored order and byte for byte, under the ids of the stored id map; a sweep
    stored before the id map gets the ids its texts declare (a text that is no fixture keeps its file's
    name, so reading it later names the file). The downgrade puts the texts back."""
    cfg = migrate.alembic_config(url)
    command.upgrade(cfg, "0002")
    old = {"fixture_files": OLD_TEXTS, "fixture_ids": {"a.yaml": "FX1", "b.yaml": "FX2", "c.yaml": "FX3"},
           "offers_tools": False, "judge_prompt": "j"}
    before_map = {"fixture_files": {"P01.yaml": PILOT_P01, "x.yaml": "- a list\n"}, "judge_prompt": "j"}
    with engine.begin() as connection:
        for sweep_id, inputs in (("s1", old), ("s2", before_map), ("s3", {"judge_prompt": "j"})):
            insert_sweep(connection, sweep_id, json.dumps(inputs))
    command.upgrade(cfg, "0003")
    with engine.connect() as connection:
        rows = connection.execute(text(
            "SELECT sweep_id, position, name, fixture_id, text FROM sweep_fixture ORDER BY sweep_id, position")).all()
        inputs = dict(connection.execute(text("SELECT id, inputs FROM sweep")).all())
    assert [tuple(r) for r in rows] == [
        ("s1", 0, "a.yaml", "FX1", OLD_TEXTS["a.yaml"]), ("s1", 1, "b.yaml", "FX2", OLD_TEXTS["b.yaml"]),
        ("s1", 2, "c.yaml", "FX3", OLD_TEXTS["c.yaml"]),
        ("s2", 0, "P01.yaml", "P01", PILOT_P01), ("s2", 1, "x.yaml", "x.yaml", "- a list\n")]
    moved = {k: v if isinstance(v, dict) else json.loads(v) for k, v in inputs.items()}
    assert moved["s1"] == {"offers_tools": False, "judge_prompt": "j"} and moved["s3"] == {"judge_prompt": "j"}
    command.downgrade(cfg, "0002")
    assert "sweep_fixture" not in inspect(engine).get_table_names()
    with engine.connect() as connection:
        back = connection.execute(text("SELECT inputs FROM sweep WHERE id = 's1'")).scalar_one()
    back = back if isinstance(back, dict) else json.loads(back)  # PostgreSQL's json comes back decoded
    assert back["fixture_files"] == OLD_TEXTS and list(back["fixture_files"]) == ["a.yaml", "b.yaml", "c.yaml"]
    assert back["fixture_ids"] == old["fixture_ids"]


def test_0003_moves_the_fixture_texts_into_rows_on_sqlite(sqlite_url, sqlite_engine):
    assert_0003_moves_the_fixture_texts_into_rows(sqlite_url, sqlite_engine)


def _insert_row(connection, table: str, values: dict) -> None:
    """A row with `values` and a placeholder in every other NOT NULL column without a default."""
    row = dict(values)
    for col in connection.execute(text(f"PRAGMA table_info({table})")).mappings():
        if col["notnull"] and col["dflt_value"] is None and not col["pk"] and col["name"] not in row:
            kind = col["type"].upper()
            row[col["name"]] = (0 if "INT" in kind or "BOOL" in kind else "2026-01-01 00:00:00"
                                if "DATE" in kind else "{}" if "JSON" in kind else "x")
    names = ", ".join(row)
    connection.execute(text(f"INSERT INTO {table} ({names}) VALUES ({', '.join(':' + n for n in row)})"), row)


def test_0007_upgrades_a_filled_sqlite_file_with_foreign_keys_on(sqlite_url):
    """Revision 0007 on a file that already holds a cell and its attempt, upgraded as any command does (the
    engine turns SQLite's foreign keys on): the cell is kept and gets attempt_base 0 (before: the batch copy
    of `cell` was refused, 'FOREIGN KEY constraint failed')."""
    cfg = migrate.alembic_config(sqlite_url)
    command.upgrade(cfg, "0006")
    engine = create_engine(sqlite_url)
    try:
        with engine.begin() as connection:
            insert_sweep(connection)
            _insert_row(connection, "cell", {"id": 1, "sweep_id": "s1"})
            _insert_row(connection, "attempt", {"id": 1, "cell_id": 1})
    finally:
        engine.dispose()
    migrate.ensure_schema(get_engine(sqlite_url))  # what `afpbench status` and every command do first
    dispose_engines()
    engine = create_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            assert connection.execute(text("SELECT id, attempt_base, result_base, rerun_id FROM cell")).all() == [
                (1, 0, 0, None)]
            assert connection.execute(text("SELECT count(*) FROM attempt")).scalar_one() == 1
            assert connection.execute(text("PRAGMA foreign_key_check")).all() == []
    finally:
        engine.dispose()
