"""A sweep's inputs rebuilt from the texts stored with it (workers score against exactly what was sealed):
each fixture's text is a row of its own, read and parsed when the fixture is first needed, once however
many threads ask, and at most a bounded number are kept."""

from __future__ import annotations

import sys
import threading

import pytest
from sqlalchemy import delete, event, func, select, update

from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture, read_fixture_files
from afpbench.fixtures.schema import Fixture
from afpbench.workers.settings import Settings
from afpbench.workers.store.db import get_engine, session_scope
from afpbench.workers.store.models import Sweep, SweepFixture
from afpbench.workers.sweeps import fixture_map
from afpbench.workers.sweeps import inputs as inputs_module
from afpbench.workers.sweeps.coordinator import create_sweep, stored_inputs_intact
from afpbench.workers.sweeps.fixture_map import LazyFixtures
from afpbench.workers.sweeps.inputs import inputs_for, inputs_for_sweep, inputs_from_stored, load_inputs, remember
from afpbench.workers.sweeps.spec_loading import parse_spec
from afpbench.workers.sweeps.stored_fixtures import StoredFixtureFiles, stored_files
from afpbench.workers.sweeps.time_limits import requests_per_try

PILOT_IDS = [f"P0{i}" for i in range(1, 9)]


def _spec(only: list[str] | None = None):
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "conditions": ["A"],
                       **({"fixtures": {"only": only}} if only else {})})


def _pilot_files(only: list[str] | None = None) -> dict:
    return {f.name.removesuffix(".yaml"): f for f in read_fixture_files(None)
            if only is None or f.name.removesuffix(".yaml") in only}


def _stored(only: list[str] | None = None) -> tuple[dict, dict, dict]:
    spec = _spec(only)
    return spec.resolved(), load_inputs(spec).to_json(), _pilot_files(only)


@pytest.fixture
def created(sqlite_url, settings_env):
    """A sweep of the pilot set created by the coordinator in a new SQLite file; its id and the inputs
    rebuilt from the rows by a fresh process-wide cache, as a worker elsewhere would."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_CACHE_DIR="off")
    with session_scope() as session:
        sweep_id = create_sweep(session, _spec()).id
    inputs_module._cache.pop(sweep_id, None)
    with session_scope() as session:
        yield sweep_id, inputs_for(session, sweep_id)


def test_rebuilt_fixtures_keep_file_order_and_equal_the_parsed_ones():
    spec = _spec()
    parsed = load_inputs(spec)
    rebuilt = inputs_from_stored(spec.resolved(), parsed.to_json(), _pilot_files())
    assert list(rebuilt.fixtures) == PILOT_IDS and len(rebuilt.fixtures) == 8
    assert "P03" in rebuilt.fixtures and "P99" not in rebuilt.fixtures
    assert list(rebuilt.fixtures.values()) == list(parsed.fixtures.values())
    assert dict(rebuilt.fixtures.items()) == dict(parsed.fixtures)
    with pytest.raises(KeyError):
        rebuilt.fixtures["P99"]


def test_a_fixture_is_parsed_only_when_read_and_a_bad_text_names_its_file():
    spec_json, stored, files = _stored()
    broken = FixtureFile("P03.yaml", "id: P03\ntitle: [unclosed\n")
    files["P03"] = broken
    inputs = inputs_from_stored(spec_json, stored, files)  # no parse yet: P03's broken text is not read
    assert inputs.fixtures["P01"].id == "P01"
    assert "P03" in inputs.fixtures  # membership from the ids, without parsing
    with pytest.raises(FixtureError) as eager:
        parse_fixture(broken)
    assert str(eager.value).startswith("P03.yaml: not valid YAML at line 3")
    with pytest.raises(FixtureError) as lazy:
        inputs.fixtures["P03"]
    assert str(lazy.value) == str(eager.value), "the same message as parsing it up front"
    with pytest.raises(FixtureError, match=r"^P03\.yaml: "):  # not remembered as parsed: fails again
        inputs.fixtures["P03"]


def test_a_stored_id_that_disagrees_with_the_text_is_refused_when_read():
    spec_json, stored, files = _stored(["P01", "P02"])
    inputs = inputs_from_stored(spec_json, stored, {"P02": files["P01"], "P01": files["P02"]})
    with pytest.raises(FixtureError, match=r"^P01\.yaml: fixture id 'P01', but the sweep stores it as 'P02'"):
        inputs.fixtures["P02"]


def test_a_sweep_stored_without_the_tool_flag_learns_it_from_its_fixtures():
    spec_json, stored, files = _stored()
    del stored["offers_tools"]
    inputs = inputs_from_stored(spec_json, stored, files)
    assert list(inputs.fixtures) == PILOT_IDS
    assert inputs.fixtures["P05"].high_risk
    assert inputs.offers_tools, "P08 is numeric: it offers the calculator"


def test_tool_rounds_of_a_rebuilt_sweep_come_from_the_stored_flag():
    settings = Settings(max_tool_rounds=3)
    for only, rounds in ((["P08"], 3), (["P01", "P02"], 1)):
        inputs = inputs_from_stored(*_stored(only))
        assert "fixture_files" not in _stored(only)[1], "the texts are rows, not part of the inputs JSON"
        assert inputs.offers_tools is (rounds > 1)
        assert requests_per_try(inputs, settings) == rounds
        assert repr(inputs.fixtures).endswith("0 parsed)"), "deciding the rounds parsed a fixture"


def _read_together(fixtures: LazyFixtures, ids: list[str], threads: int = 50) -> list[tuple[str, object]]:
    """`threads` threads released at once, each reading one of `ids`; what each got."""
    start = threading.Barrier(threads)
    got: list[tuple[str, object]] = []

    def read(fixture_id: str) -> None:
        start.wait()
        got.append((fixture_id, fixtures[fixture_id]))

    workers = [threading.Thread(target=read, args=(ids[i % len(ids)],)) for i in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads inside a parse (~1 ms), or the first thread ends it alone
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    return got


def test_many_threads_reading_one_fixture_share_one_parse():
    for ids in (PILOT_IDS[:1], PILOT_IDS[:2], PILOT_IDS):
        fixtures = LazyFixtures(_pilot_files())
        got = _read_together(fixtures, ids)
        assert len(got) == 50
        for fixture_id in ids:
            objects = {id(fx) for fid, fx in got if fid == fixture_id}
            assert len(objects) == 1, f"{fixture_id} parsed {len(objects)} times"
            assert fixtures[fixture_id] is next(fx for fid, fx in got if fid == fixture_id)


def test_the_least_recently_read_fixture_is_dropped_and_parsed_again_to_an_equal_value():
    fixtures = LazyFixtures(_pilot_files(), capacity=2)
    p01, p02 = fixtures["P01"], fixtures["P02"]
    assert fixtures["P01"] is p01  # P01 now the most recent, P02 the least
    p03 = fixtures["P03"]  # drops P02
    assert fixtures["P01"] is p01 and fixtures["P03"] is p03
    again = fixtures["P02"]
    assert again is not p02 and again == p02


def test_seeding_keeps_at_most_capacity_of_the_given_fixtures():
    files = _pilot_files()
    seeds = list(load_inputs(_spec()).fixtures.values())
    fixtures = LazyFixtures(files, seeds, capacity=3)
    assert repr(fixtures) == "LazyFixtures(8 fixtures, 3 parsed)"
    assert [fixtures[i] is seeds[n] for n, i in enumerate(PILOT_IDS[:4])] == [True, True, True, False]


def test_remember_seeds_the_workers_cache_with_the_coordinators_fixtures(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_CACHE_DIR="off")
    spec = _spec(["P01", "P08"])
    inputs = load_inputs(spec)
    with session_scope() as session:
        sweep = create_sweep(session, spec, inputs)
    remember(sweep.id, spec.resolved(), inputs, {})
    with session_scope() as session:
        cached = inputs_for_sweep(session, sweep)  # a hit: the cache, not the rows
    assert isinstance(cached.fixtures, LazyFixtures) and list(cached.fixtures) == ["P01", "P08"]
    assert cached.fixtures["P08"] is inputs.fixtures["P08"] and cached.offers_tools
    assert [f.name for f in cached.fixture_files] == ["P01.yaml", "P08.yaml"], "the texts come from the rows"


def test_a_workers_validity_reports_are_the_stored_ones_with_equal_reports_held_once(created):
    """The gate's reports (read by scoring: the validity gate's verdict of each fixture) come back equal to
    the stored ones; a sweep of passing fixtures holds one report object, not one per fixture."""
    sweep_id, _ = created
    inputs_module._validity_cache.pop(sweep_id, None)
    with session_scope() as session:
        stored = session.execute(select(Sweep.validity).where(Sweep.id == sweep_id)).scalar_one()
        reports = inputs_module.validity_for(session, sweep_id)
    assert reports == stored and list(reports) == PILOT_IDS
    passing = [r for r in reports.values() if r == {"passed": True, "failures": []}]
    assert len(passing) >= 2 and len({id(r) for r in passing}) == 1
    failing = {"passed": False, "failures": ["a failure"]}
    other = inputs_module._shared_reports({"P01": failing, "P02": {"passed": False, "failures": ["another"]}})
    assert other == {"P01": failing, "P02": {"passed": False, "failures": ["another"]}}
    assert other["P01"] is not other["P02"]


def test_a_created_sweep_stores_each_text_as_a_row_and_a_worker_reads_only_what_a_cell_needs(created):
    sweep_id, inputs = created
    pilot = list(read_fixture_files(None))
    with session_scope() as session:
        rows = session.execute(select(SweepFixture).where(SweepFixture.sweep_id == sweep_id)
                               .order_by(SweepFixture.position)).scalars().all()
        stored = session.execute(select(Sweep.inputs).where(Sweep.id == sweep_id)).scalar_one()
    assert [(r.position, r.name, r.fixture_id, r.text) for r in rows] == \
        [(i, f.name, f.name.removesuffix(".yaml"), f.text) for i, f in enumerate(pilot)]
    assert set(stored) == {"offers_tools", "instructions", "judge_prompt"}
    assert repr(inputs.fixtures) == "LazyFixtures(8 fixtures, 0 parsed)"
    assert inputs.fixtures["P06"] == parse_fixture(pilot[5])
    assert repr(inputs.fixtures) == "LazyFixtures(8 fixtures, 1 parsed)"
    assert list(inputs.fixture_files) == pilot and list(inputs.fixture_files) == pilot, "streams again"


def test_a_text_edited_in_the_database_names_its_file_when_read_and_breaks_the_stored_seal(created):
    sweep_id, inputs = created
    with session_scope() as session:
        # Its parsed form gone too (a sweep stored before forms were, or both edited): the text is read.
        session.execute(update(SweepFixture).where(SweepFixture.sweep_id == sweep_id,
                                                   SweepFixture.fixture_id == "P02")
                        .values(text="id: P09\n", parsed=None))
        session.execute(delete(SweepFixture).where(SweepFixture.sweep_id == sweep_id,
                                                   SweepFixture.fixture_id == "P04"))
    with pytest.raises(FixtureError, match=r"^P02\.yaml: "):
        inputs.fixtures["P02"]
    with pytest.raises(FixtureError, match=rf"^sweep {sweep_id}: fixture 'P04' has no stored text"):
        inputs.fixtures["P04"]
    with session_scope() as session:
        changed = stored_inputs_intact(session, session.get(Sweep, sweep_id))
    assert changed == ["fixtures/P02.yaml", "fixtures/P04.yaml"]


def test_each_row_stores_the_parsed_form_of_its_text_and_a_worker_takes_the_fixture_from_it(created, monkeypatch):
    """The parsed form is derived from the sealed text at creation; a worker validates it instead of
    parsing the YAML (no YAML parse at all here), and gets the fixture the text parses to."""
    sweep_id, inputs = created
    with session_scope() as session:
        rows = session.execute(select(SweepFixture).where(SweepFixture.sweep_id == sweep_id)
                               .order_by(SweepFixture.position)).scalars().all()
    assert [Fixture.model_validate_json(r.parsed) for r in rows] == \
        [parse_fixture(FixtureFile(r.name, r.text)) for r in rows]

    def no_yaml(file):
        raise AssertionError(f"{file.name} parsed from its YAML")

    monkeypatch.setattr(fixture_map, "parse_fixture", no_yaml)
    assert [inputs.fixtures[i] for i in PILOT_IDS] == [parse_fixture(FixtureFile(r.name, r.text)) for r in rows]


def test_a_parsed_form_edited_into_another_fixture_is_named_by_verify_and_a_spoilt_one_falls_back_to_the_text(
        created):
    """Rule (seal): what workers run is what was sealed. A stored form that is valid but not its text's
    parse (a database edited by hand, a spoilt cache) is named by `verify` (stored_inputs_intact); a
    form the schema refuses is never used: the worker parses the text, and verify has nothing to name."""
    sweep_id, inputs = created
    pilot = _pilot_files()
    other = parse_fixture(pilot["P03"]).model_copy(update={"id": "P02"}).model_dump_json()
    with session_scope() as session:
        session.execute(update(SweepFixture).where(SweepFixture.sweep_id == sweep_id,
                                                   SweepFixture.fixture_id == "P02").values(parsed=other))
        session.execute(update(SweepFixture).where(SweepFixture.sweep_id == sweep_id,
                                                   SweepFixture.fixture_id == "P05").values(parsed='{"id": 5'))
    assert inputs.fixtures["P05"] == parse_fixture(pilot["P05"]), "a spoilt form: the text is parsed"
    with session_scope() as session:
        changed = stored_inputs_intact(session, session.get(Sweep, sweep_id))
    assert changed == ["fixtures/P02.yaml (parsed form)"]


def test_a_sweep_that_fails_to_create_leaves_no_fixture_row(sqlite_url, settings_env):
    """Rule: creation is one transaction; a failure after the texts were written leaves none of them."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_CACHE_DIR="off")
    spec = _spec(["P01"])
    inputs = load_inputs(spec)
    with pytest.raises(ValueError, match="half-way"), session_scope() as session:
        create_sweep(session, spec, inputs)
        raise ValueError("half-way")
    with session_scope() as session:
        assert session.execute(select(func.count()).select_from(SweepFixture)).scalar_one() == 0
        assert session.execute(select(func.count()).select_from(Sweep)).scalar_one() == 0


def test_texts_are_read_a_window_at_a_time_in_file_order_and_any_order_still_reads_right(created, monkeypatch):
    sweep_id, _ = created
    monkeypatch.setattr(StoredFixtureFiles, "AHEAD", 3)
    pilot = {f.name.removesuffix(".yaml"): f for f in read_fixture_files(None)}
    statements: list[str] = []
    engine = get_engine()
    listen = lambda *args: statements.append(args[2])  # noqa: E731 - before_cursor_execute's statement
    event.listen(engine, "before_cursor_execute", listen)
    try:
        with session_scope() as session:
            files = stored_files(session, sweep_id)
        statements.clear()
        assert [files[i] for i in PILOT_IDS] == list(pilot.values())
        assert len(statements) == 3, "P01-P03, P04-P06, P07-P08: one query a window"
        assert [files[i] for i in ("P08", "P02", "P03", "P01")] == [pilot[i] for i in ("P08", "P02", "P03", "P01")]
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    with pytest.raises(KeyError):
        files["P99"]
