"""A sweep's inputs rebuilt from the texts stored with it (workers score against exactly what was sealed):
fixtures are parsed when first read, once however many threads ask, and at most a bounded number are
kept; sweeps stored before the id map still load."""

from __future__ import annotations

import sys
import threading

import pytest

from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture, read_fixture_files
from afpbench.workers.cells.time_limits import requests_per_try
from afpbench.workers.settings import Settings
from afpbench.workers.sweeps.fixture_map import LazyFixtures
from afpbench.workers.sweeps.inputs import inputs_for_sweep, inputs_from_stored, load_inputs, remember
from afpbench.workers.sweeps.spec import parse_spec

PILOT_IDS = [f"P0{i}" for i in range(1, 9)]


def _spec(only: list[str] | None = None):
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "conditions": ["A"],
                       **({"fixtures": {"only": only}} if only else {})})


def _stored(only: list[str] | None = None) -> tuple[dict, dict]:
    spec = _spec(only)
    return spec.resolved(), load_inputs(spec).to_json()


def _pilot_files() -> dict:
    return {f.name.removesuffix(".yaml"): f for f in read_fixture_files(None)}


def test_rebuilt_fixtures_keep_file_order_and_equal_the_parsed_ones():
    spec = _spec()
    parsed = load_inputs(spec)
    rebuilt = inputs_from_stored(spec.resolved(), parsed.to_json())
    assert list(rebuilt.fixtures) == PILOT_IDS and len(rebuilt.fixtures) == 8
    assert "P03" in rebuilt.fixtures and "P99" not in rebuilt.fixtures
    assert list(rebuilt.fixtures.values()) == list(parsed.fixtures.values())
    assert dict(rebuilt.fixtures.items()) == dict(parsed.fixtures)
    with pytest.raises(KeyError):
        rebuilt.fixtures["P99"]


def test_a_fixture_is_parsed_only_when_read_and_a_bad_text_names_its_file():
    spec_json, stored = _stored()
    broken = FixtureFile("P03.yaml", "id: P03\ntitle: [unclosed\n")
    stored["fixture_files"][broken.name] = broken.text
    inputs = inputs_from_stored(spec_json, stored)  # no parse yet: P03's broken text is not read
    assert inputs.fixtures["P01"].id == "P01"
    assert "P03" in inputs.fixtures  # membership from the id map, without parsing
    with pytest.raises(FixtureError) as eager:
        parse_fixture(broken)
    assert str(eager.value).startswith("P03.yaml: not valid YAML at line 3")
    with pytest.raises(FixtureError) as lazy:
        inputs.fixtures["P03"]
    assert str(lazy.value) == str(eager.value), "the same message as parsing it up front"
    with pytest.raises(FixtureError, match=r"^P03\.yaml: "):  # not remembered as parsed: fails again
        inputs.fixtures["P03"]


def test_a_stored_id_map_that_disagrees_with_the_text_is_refused_when_read():
    spec_json, stored = _stored(["P01", "P02"])
    stored["fixture_ids"] = {"P01.yaml": "P02", "P02.yaml": "P01"}
    inputs = inputs_from_stored(spec_json, stored)
    with pytest.raises(FixtureError, match=r"^P01\.yaml: fixture id 'P01', but the sweep stores it as 'P02'"):
        inputs.fixtures["P02"]


@pytest.mark.parametrize("missing", [("fixture_ids", "offers_tools"), ("fixture_ids",), ("offers_tools",)])
def test_a_sweep_stored_without_the_id_map_still_loads(missing):
    spec_json, stored = _stored()
    for key in missing:
        del stored[key]
    inputs = inputs_from_stored(spec_json, stored)
    assert list(inputs.fixtures) == PILOT_IDS
    assert inputs.fixtures["P05"].high_risk
    assert inputs.offers_tools, "P08 is numeric: it offers the calculator"
    # Such a sweep's texts are all parsed to learn the ids, so a broken one fails at once, naming its file.
    stored["fixture_files"]["P04.yaml"] = "- not a mapping\n"
    with pytest.raises(FixtureError, match=r"^P04\.yaml: expected a mapping"):
        inputs_from_stored(spec_json, stored)


def test_tool_rounds_of_a_rebuilt_sweep_come_from_the_stored_flag():
    settings = Settings(max_tool_rounds=3)
    for only, rounds in ((["P08"], 3), (["P01", "P02"], 1)):
        inputs = inputs_from_stored(*_stored(only))
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


def test_remember_seeds_the_workers_cache_with_the_coordinators_fixtures():
    spec = _spec(["P01", "P08"])
    inputs = load_inputs(spec)
    remember("remembered-sweep", spec.resolved(), inputs, {})

    class _Row:  # inputs_for_sweep reads the cache by id first; a hit needs nothing else of the row
        id = "remembered-sweep"

    cached = inputs_for_sweep(_Row())
    assert isinstance(cached.fixtures, LazyFixtures) and list(cached.fixtures) == ["P01", "P08"]
    assert cached.fixtures["P08"] is inputs.fixtures["P08"] and cached.offers_tools
