"""The fixture texts sealed with a sweep, one row each (store/models.py:SweepFixture): written at creation
in chunks, read back as fixtures are needed by the workers, or all in file order for the seal check and
exports. Neither side holds every text in one value: a 10,000-fixture sweep's texts are about 75 MB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session

from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture
from afpbench.workers.store.db import for_reads, insert_in_chunks
from afpbench.workers.store.models import SweepFixture, table_of
from afpbench.workers.sweeps.fixture_map import FilesByPosition, from_form

# Rows per executemany: a chunk of texts and their parsed forms (~15 KB a row for a pilot-sized fixture,
# so ~1.5 MB) is all that is held at once. 1,000 rows held ~15 MB, twice over while the next was built:
# the peak of a 10,000-fixture run.
_CHUNK = 100
_table = table_of(SweepFixture)


def write_fixture_rows(connection, sweep_id: str, files: Iterable[FixtureFile], ids: Iterable[str]) -> None:
    """The sweep's fixture files in order, the i-th under the i-th id, each with its parsed form when it
    carries one, through `connection` (an ORM session or a Core connection, inside the creating transaction)."""
    insert_in_chunks(connection, _table, (
        {"sweep_id": sweep_id, "position": position, "name": file.name, "fixture_id": fixture_id, "text": file.text,
         "parsed": file.form}
        for position, (file, fixture_id) in enumerate(zip(files, ids, strict=True))), _CHUNK)


def stored_files(session: Session | Connection, sweep_id: str) -> StoredFixtureFiles:
    """The sweep's stored fixture files by id; only the ids are read now, through `session`."""
    ids = list(session.execute(
        select(_table.c.fixture_id).where(_table.c.sweep_id == sweep_id).order_by(_table.c.position)).scalars())
    engine = session.engine if isinstance(session, Connection) else session.get_bind()
    if isinstance(engine, Connection):  # a session bound to one connection
        engine = engine.engine
    return StoredFixtureFiles(engine, sweep_id, ids)


class StoredFixtureFiles(FilesByPosition):
    """A stored sweep's fixture files by id, in file order. Texts are read from their rows when asked
    for, on a connection of their own (safe from any thread): the asked file and the next AHEAD-1 in file
    order in one query, since a sweep's cells are released fixture after fixture; those wait (at most
    AHEAD texts) until asked for. Iterating `files()` streams every row there is in one query (the seal
check and the export, which must see a set with a row missing as it is, not fail on the gap)."""

    AHEAD = 64

    def __init__(self, engine: Engine, sweep_id: str, ids: list[str]):
        super().__init__(ids)
        self._engine = engine
        self._sweep_id = sweep_id
        self._ahead: dict[str, FixtureFile] = {}
        self._lock = threading.Lock()  # guards _ahead; reads happen outside it

    def _read(self, fixture_id: str, position: int) -> FixtureFile:
        with self._lock:
            file = self._ahead.pop(fixture_id, None)
        if file is not None:
            return file
        query = (select(_table.c.position, _table.c.fixture_id, _table.c.name, _table.c.text, _table.c.parsed)
                 .where(_table.c.sweep_id == self._sweep_id, _table.c.position >= position,
                        _table.c.position < position + self.AHEAD))
        with self._engine.connect() as connection:
            rows = for_reads(connection).execute(query).all()
        read = {row.fixture_id: FixtureFile(row.name, row.text, row.parsed) for row in rows}
        file = read.pop(fixture_id, None)
        if file is None:  # the row went after the ids were read (a database edited by hand)
            raise FixtureError(f"sweep {self._sweep_id}: fixture {fixture_id!r} has no stored text")
        with self._lock:
            self._ahead = read  # the newest window replaces the last: never more than AHEAD held
        return file

    def files(self) -> StoredTexts:
        return StoredTexts(self._engine, self._sweep_id, len(self))


class StoredTexts(Iterable[FixtureFile]):
    """Every stored fixture file of a sweep in file order, streamed from one query each time it is
    iterated (a few hundred rows in memory at once)."""

    def __init__(self, engine: Engine, sweep_id: str, count: int):
        self._engine, self._sweep_id, self._count = engine, sweep_id, count

    def __iter__(self) -> Iterator[FixtureFile]:
        query = (select(_table.c.name, _table.c.text).where(_table.c.sweep_id == self._sweep_id)
                 .order_by(_table.c.position))
        with self._engine.connect() as connection:
            result = connection.execution_options(stream_results=True, yield_per=200).execute(query)
            for row in result:
                yield FixtureFile(row.name, row.text)

    def __len__(self) -> int:
        return self._count


def forms_not_of_their_texts(session: Session | Connection, sweep_id: str) -> list[str]:
    """The file names of the sweep's stored parsed forms that a worker would take (they pass the schema)
    but that are not what their stored text parses to: a database edited by hand, or a prepared-fixture
    cache (prepared_cache.py) spoilt into another valid fixture. A form the schema refuses is not
    listed: workers parse that text instead. Each text is parsed here, a row at a time."""
    query = (select(_table.c.name, _table.c.text, _table.c.parsed)
             .where(_table.c.sweep_id == sweep_id, _table.c.parsed.is_not(None)).order_by(_table.c.position))
    wrong = []
    for row in session.execute(query.execution_options(yield_per=200)):
        taken = from_form(FixtureFile(row.name, row.text, row.parsed))
        if taken is None:
            continue
        try:
            if taken != parse_fixture(FixtureFile(row.name, row.text)):
                wrong.append(row.name)
        except FixtureError:  # the text itself is spoilt: the seal check names it
            wrong.append(row.name)
    return wrong
