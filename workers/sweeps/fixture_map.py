"""A sweep's fixtures by id, each parsed from its stored text when first asked for, a bounded number kept.

A worker rebuilds a sweep's inputs from the texts sealed with it (inputs.py). Parsing every text up
front cost ~1 ms a fixture at the worker's first cell (10 s at 10,000 fixtures, every thread waiting)
and held each parsed fixture for the process's life; a cell needs one fixture.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import NamedTuple

from pydantic import ValidationError

from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture
from afpbench.fixtures.schema import Fixture
from afpbench.scoring.render import tools_for

# Parsed fixtures kept per sweep. A parsed fixture holds ~13-35 KB, so this is ~15-35 MB at most; a sweep
# of up to this many distinct fixtures parses each once, a larger one re-parses (~1 ms) a fixture that
# fell out, which its cell order (fixture by fixture, condition after condition) makes about once a cell.
CAPACITY = 1024


class FixtureFacts(NamedTuple):
    """What creating a sweep needs to know of a fixture besides its text: enough to plan and write its
    cells, so the coordinator need not hold every parsed fixture (~20 KB each) of a big sweep."""

    id: str
    version: str
    high_risk: bool
    offers_tools: bool  # scoring/render.py:tools_for offers it a tool, so its cells may take tool rounds


def facts_of(fixture: Fixture) -> FixtureFacts:
    return FixtureFacts(fixture.id, fixture.version, fixture.high_risk, bool(tools_for(fixture)))


def from_form(file: FixtureFile) -> Fixture | None:
    """The fixture from the parsed form its file carries (stored at creation: ~0.08 ms against ~0.9 ms for
    the YAML); None without one, or with one the schema refuses (then the text is parsed, as before)."""
    if file.form is None:
        return None
    try:
        return Fixture.model_validate_json(file.form)
    except (ValidationError, ValueError):
        return None


class FilesByPosition(Mapping[str, FixtureFile]):
    """Fixture files by id in file order, the i-th id the i-th file's; `_read` fetches the file at a
    position when it is asked for (from a new sweep's spool: FilesById; from a stored sweep's rows:
    stored_fixtures.py:StoredFixtureFiles). No text is held here."""

    def __init__(self, ids: Iterable[str]):
        self._at = {fixture_id: i for i, fixture_id in enumerate(ids)}

    @abstractmethod
    def _read(self, fixture_id: str, position: int) -> FixtureFile: ...

    def __getitem__(self, fixture_id: str) -> FixtureFile:
        return self._read(fixture_id, self._at[fixture_id])  # KeyError for an id not in the sweep

    def __contains__(self, fixture_id: object) -> bool:
        return fixture_id in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


class FilesById(FilesByPosition):
    """A new sweep's files by id over its spool (fixtures/spool.py), in file order."""

    def __init__(self, ids: Iterable[str], files: Sequence[FixtureFile]):
        super().__init__(ids)
        if len(self._at) != len(files):
            raise ValueError(f"{len(self._at)} distinct ids for {len(files)} files")
        self._files = files

    def _read(self, fixture_id: str, position: int) -> FixtureFile:
        return self._files[position]


class LazyFixtures(Mapping[str, Fixture]):
    """Read-only mapping fixture id -> Fixture over the fixture files, in file order.

    `files` gives each id its file (a dict, or a stored sweep's rows: stored_fixtures.py); `parsed` may
    seed it with fixtures already parsed from those files (at most `capacity` are kept). Safe for many
    threads: a fixture is parsed once however many threads ask for it together (they wait on that
    fixture's parse only); the least recently used is dropped beyond `capacity` and parsed again from
    its text when next asked for."""

    def __init__(self, files: Mapping[str, FixtureFile], parsed: Iterable[Fixture] = (), capacity: int = CAPACITY):
        self._files = files  # not copied: a stored sweep's mapping reads a text only when asked for it
        self._capacity = capacity
        self._parsed: OrderedDict[str, Fixture] = OrderedDict()
        self._parsing: dict[str, Future[Fixture]] = {}
        # Guards the two dicts above, held only to look up and record; parsing happens outside it.
        self._lock = threading.Lock()
        for fx in parsed:
            if len(self._parsed) == capacity:
                break
            if fx.id in self._files:
                self._parsed[fx.id] = fx

    def __getitem__(self, fixture_id: str) -> Fixture:
        with self._lock:
            fx = self._parsed.get(fixture_id)
            if fx is not None:
                self._parsed.move_to_end(fixture_id)
                return fx
            if fixture_id not in self._files:
                raise KeyError(fixture_id)
            parse = self._parsing.get(fixture_id)
            mine = parse is None
            if parse is None:
                parse = self._parsing[fixture_id] = Future()
        if mine:
            self._parse(fixture_id, parse)
        return parse.result()  # waits for another thread's parse of this fixture; raises its FixtureError

    def _parse(self, fixture_id: str, parse: Future[Fixture]) -> None:
        file = self._files[fixture_id]
        try:
            fx = from_form(file) or parse_fixture(file)
            if fx.id != fixture_id:  # the stored id map disagrees with the text (edited by hand)
                raise FixtureError(f"{file.name}: fixture id {fx.id!r}, but the sweep stores it as {fixture_id!r}")
        except BaseException as exc:
            with self._lock:
                del self._parsing[fixture_id]
            parse.set_exception(exc)
            return
        # Recorded in one step, so a thread asking now finds the fixture either parsing or parsed.
        with self._lock:
            self._parsed[fixture_id] = fx
            while len(self._parsed) > self._capacity:
                self._parsed.popitem(last=False)
            del self._parsing[fixture_id]
        parse.set_result(fx)

    def kept(self) -> list[Fixture]:
        """The parsed fixtures held now, least recently read first (to seed another map)."""
        with self._lock:
            return list(self._parsed.values())

    def __contains__(self, fixture_id: object) -> bool:
        return fixture_id in self._files  # without parsing (Mapping's default would parse)

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __repr__(self) -> str:
        return f"LazyFixtures({len(self._files)} fixtures, {len(self._parsed)} parsed)"
