"""The prepared-fixture cache (workers/sweeps/prepared_cache.py) through `load_inputs`, as a sweep's
creation uses it.

Rule (validity gate): every fixture's report is the one the gate gives it; a report taken from the cache
must equal a fresh one, and a fixture read back must equal the parsed file. Rule (bad input names the
file): a bad file raises its own FixtureError on every run, cached or not. A cache that is spoilt,
unwritable, tampered with or made by other code changes no outcome.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest

from afpbench.fixtures.loader import FixtureError, read_fixture_files
from afpbench.workers.sweeps import cache_keys, gate_run, prepared_cache
from afpbench.workers.sweeps.fixture_map import facts_of
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.conftest import REPO
from tests.unit.workers.sweeps.test_gate_run import _break, _generate


@pytest.fixture
def fixtures_dir(tmp_path) -> Path:
    """The eight pilot fixtures and 21 generated ones (a third of those failing the gate), as files."""
    directory = tmp_path / "fixtures"
    _generate(directory, 21)
    for pilot in (REPO / "fixtures" / "pilot").glob("*.yaml"):
        shutil.copy(pilot, directory / pilot.name)
    return directory


@pytest.fixture
def cache_dir(tmp_path, settings_env) -> Path:
    folder = tmp_path / "cache"
    settings_env(AFP_CACHE_DIR=str(folder))
    return folder


def _spec(directory: Path, instructions: Path | None = None, only: list[str] | None = None):
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "conditions": ["A"],
                       "fixtures": {"dir": str(directory), **({"only": only} if only else {})},
                       **({"instructions": {"dir": str(instructions)}} if instructions else {})})


@contextmanager
def _counting() -> Iterator[dict[str, int]]:
    """Parses and gate runs in this process (below the fork threshold nothing runs elsewhere)."""
    counts = {"parsed": 0, "gated": 0}
    real_parse, real_check = gate_run.parse_fixture, gate_run.check_fixture

    def parse(file):
        counts["parsed"] += 1
        return real_parse(file)

    def check(*args):
        counts["gated"] += 1
        return real_check(*args)

    with mock.patch.object(gate_run, "parse_fixture", parse), mock.patch.object(gate_run, "check_fixture", check):
        yield counts


def _prepared(spec) -> tuple[list, list, dict | None]:
    """What creation plans from (the facts), the fixtures its cells see, and the reports; each file's parsed
    form (stored beside its text) is checked to be its fixture's, whether it was parsed or recalled."""
    inputs = load_inputs(spec, with_validity=True)
    assert inputs.facts is not None
    fixtures = list(inputs.fixtures.values())
    assert [f.form for f in inputs.fixture_files] == [fx.model_dump_json() for fx in fixtures]
    return list(inputs.facts.values()), fixtures, inputs.validity


def _without_cache(spec, settings_env, cache: Path) -> tuple[list, list, dict | None]:
    settings_env(AFP_CACHE_DIR="off")
    try:
        return _prepared(spec)
    finally:
        settings_env(AFP_CACHE_DIR=str(cache))


def _rows(cache: Path, table: str) -> int:
    with sqlite3.connect(cache / prepared_cache.FILE_NAME) as db:
        return db.execute(f"select count(*) from {table}").fetchone()[0]


def test_a_warm_run_parses_and_gates_nothing_and_gives_exactly_the_cold_outcome(fixtures_dir, cache_dir,
                                                                                  settings_env):
    spec = _spec(fixtures_dir)
    expected = _without_cache(spec, settings_env, cache_dir)
    assert any(not r["passed"] for r in expected[2].values()) and any(r["passed"] for r in expected[2].values())
    with _counting() as cold:
        assert _prepared(spec) == expected
    assert cold == {"parsed": 29, "gated": 29}
    assert _rows(cache_dir, "parsed") == 29 and _rows(cache_dir, "gated") == 29
    with _counting() as warm:
        facts, fixtures, reports = _prepared(spec)
    assert warm == {"parsed": 0, "gated": 0}
    assert (facts, fixtures, reports) == expected
    assert facts == [facts_of(fx) for fx in fixtures]
    assert list(reports) == [fx.id for fx in fixtures]  # file order, as without the cache
    assert (cache_dir / prepared_cache.FILE_NAME).stat().st_mode & 0o077 == 0, "the cache file is private"


def test_a_subset_gets_only_its_reports_and_the_rest_gated_when_asked_for(fixtures_dir, cache_dir, settings_env):
    """`only` gates only the kept fixtures; a later run of the whole set gates the others, not these."""
    few = _spec(fixtures_dir, only=["P01", "B00003"])
    assert _prepared(few) == _without_cache(few, settings_env, cache_dir)
    whole = _spec(fixtures_dir)
    expected = _without_cache(whole, settings_env, cache_dir)
    with _counting() as counts:
        assert _prepared(whole) == expected
    # The 27 not gated before are parsed again from their texts to be gated (the cache's copies are read
    # whole only for the fixtures a sweep keeps parsed); the two gated before are neither.
    assert counts == {"parsed": 27, "gated": 27}


def test_other_instructions_reuse_the_parse_and_gate_again(fixtures_dir, cache_dir, settings_env, tmp_path):
    _prepared(_spec(fixtures_dir))
    instructions = tmp_path / "instructions"
    shutil.copytree(REPO / "reference" / "instructions", instructions)
    condition_c = next(instructions.glob("C*"))
    condition_c.write_text(condition_c.read_text() + "\nCheck every figure against the evidence ledger.\n")
    spec = _spec(fixtures_dir, instructions)
    expected = _without_cache(spec, settings_env, cache_dir)
    with _counting() as counts:
        assert _prepared(spec) == expected
    assert counts == {"parsed": 29, "gated": 29}  # parsed again to be gated, as above


def test_a_bad_file_is_never_kept_and_raises_its_own_error_every_time(fixtures_dir, cache_dir, settings_env):
    spec = _spec(fixtures_dir)
    _prepared(spec)  # every good text kept
    _break(fixtures_dir, [4])
    with pytest.raises(FixtureError) as without:
        _without_cache(spec, settings_env, cache_dir)
    for _ in range(2):
        with _counting() as counts, pytest.raises(FixtureError) as cached:
            _prepared(spec)
        assert str(cached.value) == str(without.value) and "B00005.yaml: high_risk" in str(cached.value)
        assert counts["parsed"] == 1, "only the changed file is parsed; its error is raised, nothing kept"
    assert _rows(cache_dir, "parsed") == 29


def test_what_is_read_back_is_checked_and_a_bad_entry_computed_again(fixtures_dir, cache_dir, settings_env):
    spec = _spec(fixtures_dir)
    expected = _prepared(spec)
    with sqlite3.connect(cache_dir / prepared_cache.FILE_NAME) as db:
        keys = [k for (k,) in db.execute("select key from parsed order by rowid limit 3")]
        db.execute("update parsed set fixture = ? where key = ?", (b'{"id": "P01"}', keys[0]))  # not a fixture
        db.execute("update parsed set fixture = ? where key = ?", (b"\xff\x00 not json", keys[1]))
        db.execute("update parsed set facts = ? where key = ?", ('["P01", "1"]', keys[2]))  # not its facts
        reports = [k for (k,) in db.execute("select key from gated order by rowid limit 3")]
        db.execute("update gated set report = ? where key = ?", ('{"passed": true, "failures": [{"check": "x"}]}',
                                                                 reports[0]))
        db.execute("update gated set report = ? where key = ?",
                   ('{"passed": true, "failures": [{"check": "consistent", "detail": "a failure said to pass"}]}',
                    reports[1]))
        db.execute("update gated set report = ? where key = ?", ("[]", reports[2]))
    with _counting() as counts:
        assert _prepared(spec) == expected
    assert counts["parsed"] == 3 and counts["gated"] >= 3
    with _counting() as counts:  # and written back whole
        assert _prepared(spec) == expected
    assert counts == {"parsed": 0, "gated": 0}


def test_a_warm_run_reads_whole_only_the_fixtures_it_keeps_parsed(fixtures_dir, cache_dir):
    """The coordinator plans from the facts; only the fixtures it hands on parsed are validated whole."""
    facts, fixtures, _ = _prepared(_spec(fixtures_dir))
    cache = prepared_cache.prepared_cache(str(cache_dir))
    with mock.patch.object(prepared_cache, "_fixture", wraps=prepared_cache._fixture) as read, \
            _counting() as counts:
        prepared = gate_run.prepare_fixtures(read_fixture_files(fixtures_dir), None, None, cache, keep=5)
    assert read.call_count == 5 and counts["parsed"] == 0
    assert prepared.facts == facts and list(prepared.parsed.values()) == fixtures[:5]
    assert list(prepared.parsed) == [0, 1, 2, 3, 4]


def test_a_cache_of_an_older_layout_is_emptied_and_built_again(fixtures_dir, cache_dir):
    spec = _spec(fixtures_dir)
    expected = _prepared(spec)
    path = cache_dir / prepared_cache.FILE_NAME
    path.unlink()
    with sqlite3.connect(path) as db:  # session 8's layout: no facts column, no user_version
        db.execute("CREATE TABLE parsed (key TEXT PRIMARY KEY, fixture BLOB NOT NULL)")
        db.execute("CREATE TABLE gated (key TEXT PRIMARY KEY, report TEXT NOT NULL)")
        db.execute("INSERT INTO parsed VALUES ('k', x'00')")
    with _counting() as counts:
        assert _prepared(spec) == expected
    assert counts == {"parsed": 29, "gated": 29}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == prepared_cache.SCHEMA
    assert _rows(cache_dir, "parsed") == 29
    with _counting() as counts:
        assert _prepared(spec) == expected
    assert counts == {"parsed": 0, "gated": 0}


def test_a_spoilt_cache_file_is_dropped_and_built_again(fixtures_dir, cache_dir, settings_env):
    spec = _spec(fixtures_dir)
    expected = _prepared(spec)
    (cache_dir / prepared_cache.FILE_NAME).write_bytes(b"this is no database " * 400)
    assert _prepared(spec) == expected
    assert _rows(cache_dir, "parsed") == 29


def test_a_cache_that_cannot_be_written_changes_nothing(fixtures_dir, tmp_path, settings_env):
    (tmp_path / "a-file").write_text("not a folder")
    settings_env(AFP_CACHE_DIR=str(tmp_path / "a-file" / "cache"))
    spec = _spec(fixtures_dir)
    with _counting() as counts:
        first = _prepared(spec)
        assert _prepared(spec) == first
    assert counts == {"parsed": 58, "gated": 58}


def test_entries_made_by_other_code_are_never_read(fixtures_dir, cache_dir):
    spec = _spec(fixtures_dir)
    expected = _prepared(spec)
    with mock.patch.object(cache_keys, "code_fingerprint", lambda: "another checkout"), _counting() as counts:
        assert _prepared(spec) == expected
    assert counts == {"parsed": 29, "gated": 29}


def test_each_table_keeps_at_most_max_entries(fixtures_dir, cache_dir):
    with mock.patch.object(prepared_cache, "MAX_ENTRIES", 5):
        _prepared(_spec(fixtures_dir))
    assert _rows(cache_dir, "parsed") == 5 and _rows(cache_dir, "gated") == 5


def test_off_names_no_cache_and_the_default_folder_follows_xdg(monkeypatch, tmp_path):
    assert prepared_cache.prepared_cache("off") is None and prepared_cache.prepared_cache(" OFF ") is None
    assert prepared_cache.prepared_cache("") is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = prepared_cache.prepared_cache(None)
    assert cache is not None and cache.path == tmp_path / "afpbench" / prepared_cache.FILE_NAME
