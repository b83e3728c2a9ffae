"""Parsed fixtures and validity-gate reports kept on disk by content, so a re-run does not redo them.

Parsing a fixture (~1.2 ms) and gating it (~3.5 ms) were two thirds of the fixed cost of a 1,000-prompt
`afpbench run`, and the same fixture set is usually run again and again. Both are pure functions of
their inputs, so each result is kept under a key made of everything it depends on:

- a parsed fixture, and beside it its facts (fixture_map.FixtureFacts: what creation plans from): the
  file's exact text and the code fingerprint below;
- a gate report: the parsed fixture's key, the four conditions' instruction texts and the judge prompt.

The code fingerprint hashes the source of every module that parses or gates (fixtures/, scoring/,
reference/, gate_run.py, fixture_map.py) and the versions of PyYAML and pydantic, so an edited checkout
or an upgrade never meets an old entry. A file that fails to parse is never kept: it is parsed, and
refused, every time.

What is read back is checked as if it came from outside: facts must have their form; a fixture read
whole (only the first few a sweep keeps parsed: validating one costs ~0.2 ms) goes through the schema
again (`Fixture.model_validate_json`) and must agree with its facts; a report must have the stored
form. Anything else counts as missing and is computed and written anew. The cache never changes an
outcome; any error of its own (a read-only or full disk, a locked or corrupt file) leaves the run to
compute everything, as without it.

One SQLite file (stdlib sqlite3, not the project's database: a cache must not need migrations or
PostgreSQL) in AFP_CACHE_DIR, by default $XDG_CACHE_HOME/afpbench or ~/.cache/afpbench; "off" disables.
Each table keeps at most MAX_ENTRIES rows, the oldest written dropped first, so a server that is posted
ever new fixtures holds a bounded file. See docs/PERFORMANCE.md for the cold and warm figures.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from pydantic import ValidationError

from afpbench.fixtures.loader import FixtureFile
from afpbench.fixtures.schema import Fixture
from afpbench.fixtures.spool import ParsedForms
from afpbench.workers.sweeps.cache_keys import parse_key, report_key
from afpbench.workers.sweeps.fixture_map import FixtureFacts, facts_of
from afpbench.workers.sweeps.two_processes import collector_paused

log = logging.getLogger(__name__)

FILE_NAME = "prepared-fixtures.sqlite"
# The tables' layout (PRAGMA user_version): a file of another layout is emptied when next written.
SCHEMA = 2
MAX_ENTRIES = 12_000  # per table; ~7 KB a parsed fixture, so ~90 MB at most (compressing cost 0.1 ms each)
_LOOKUP_CHUNK = 500  # keys per `IN (...)`: below SQLite's oldest parameter limit (999)
Report = dict  # the stored form of one fixture's validity report: {"passed": ..., "failures": [...]}


@dataclass(frozen=True)
class Recalled:
    """What the cache held for some files, by their index in the given order."""

    keys: list[str]  # parse_key of each file, for `keep`
    facts: dict[int, FixtureFacts]  # every file the cache knows
    parsed: dict[int, Fixture]  # the first `keep` of those the selection keeps, read and checked whole
    reports: dict[int, Report]  # only for indices in `facts`
    # Every known file's fixture as stored (its parsed form), spooled, not checked here: the sweep stores it
    # beside the text, a worker validates it and parses the text instead if it does not validate.
    forms: ParsedForms = field(default_factory=ParsedForms)


def _is_report(value: object) -> TypeGuard[Report]:
    if not isinstance(value, dict) or set(value) != {"passed", "failures"} or not isinstance(value["failures"], list):
        return False
    failures_ok = all(isinstance(f, dict) and set(f) == {"check", "detail"}
                      and all(isinstance(v, str) for v in f.values()) for f in value["failures"])
    return failures_ok and value["passed"] is (not value["failures"])


class PreparedCache:
    """The cache file at `path` (created with its folder, private to this user, when first written)."""

    def __init__(self, path: Path):
        self.path = path

    @contextmanager
    def _connection(self, create: bool) -> Iterator[sqlite3.Connection]:
        if create:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif not self.path.exists():
            raise FileNotFoundError(self.path)
        # isolation_level=None: each statement is its own transaction unless BEGIN says otherwise.
        with closing(sqlite3.connect(self.path, timeout=2.0, isolation_level=None)) as db:
            if create:
                os.chmod(self.path, 0o600)
                db.execute("PRAGMA journal_mode=WAL")
                # Never waits for the disk: an OS crash may spoil the file, which is then dropped (_failed).
                db.execute("PRAGMA synchronous=OFF")
                if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:  # an older afpbench's file
                    db.execute("DROP TABLE IF EXISTS parsed")
                    db.execute("DROP TABLE IF EXISTS gated")
                    db.execute(f"PRAGMA user_version={SCHEMA}")
                db.execute("CREATE TABLE IF NOT EXISTS parsed"
                           " (key TEXT PRIMARY KEY, fixture BLOB NOT NULL, facts TEXT NOT NULL)")
                db.execute("CREATE TABLE IF NOT EXISTS gated (key TEXT PRIMARY KEY, report TEXT NOT NULL)")
            yield db

    def recall(self, files: Sequence[FixtureFile], gate: str | None, kept: Collection[str] | None = None,
               keep: int = 0) -> Recalled:
        """What the cache holds for `files`: each known file's facts, its report with a gate key, and the
        first `keep` parsed fixtures of those `kept` keeps (None: all), in file order."""
        keys = [parse_key(f) for f in files]
        try:
            return self._recall(keys, gate, kept, keep)
        except FileNotFoundError:
            return Recalled(keys, {}, {}, {})
        except (sqlite3.Error, OSError) as exc:
            self._failed("read", exc)
            return Recalled(keys, {}, {}, {})

    def _recall(self, keys: list[str], gate: str | None, kept: Collection[str] | None, keep: int) -> Recalled:
        with self._connection(create=False) as db:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
                return Recalled(keys, {}, {}, {})
            stored = _lookup(db, "parsed", "facts", keys)
            facts = {i: f for i, key in enumerate(keys) if (f := _facts(stored.get(key))) is not None}
            # Only these are read whole (Fixture.model_validate_json: ~0.2 ms each, 2 s at 10,000).
            seeds = [i for i, f in facts.items() if kept is None or f.id in kept][:keep]
            report_keys = {i: report_key(keys[i], gate) for i in facts} if gate else {}
            texts = _lookup(db, "gated", "report", list(report_keys.values()))
            forms, parsed = _stored_fixtures(db, keys, facts, set(seeds))
            for i in seeds:
                if i not in parsed:  # spoilt, or disagreeing with its facts: the whole entry counts as missing
                    del facts[i]
            reports = {i: r for i, key in report_keys.items()
                       if i in facts and (r := _report(texts.get(key))) is not None}
        return Recalled(keys, facts, parsed, reports, forms)

    def keep(self, recalled: Recalled, forms: ParsedForms, facts: Sequence[FixtureFacts], gate: str | None,
             reports: dict[int, Report]) -> None:
        """Write what was computed, by index into the files `recalled` was read for (its keys): each new
        parse (its parsed form, as `Fixture.model_dump_json` gives it, and its facts) and each new report.
        The forms are read back one at a time as they are written. Never raises."""
        if not len(forms) and not reports:
            return
        keys = recalled.keys
        try:
            parsed = ((keys[i], blob, json.dumps(list(facts[i])))
                      for i in forms.indices() if (blob := forms.raw(i)) is not None)
            gated = [(report_key(keys[i], gate), json.dumps(r)) for i, r in reports.items()] if gate else []
            with self._connection(create=True) as db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO parsed (key, fixture, facts) VALUES (?, ?, ?)", parsed)
                db.executemany("INSERT OR REPLACE INTO gated (key, report) VALUES (?, ?)", gated)
                for table in ("parsed", "gated"):
                    db.execute(f"DELETE FROM {table} WHERE rowid <= (SELECT max(rowid) FROM {table}) - ?",
                               (MAX_ENTRIES,))
                db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            self._failed("written", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        log.debug("prepared-fixture cache %s not %s: %s", self.path, what, exc)
        # Not a database any more (spoilt by a crash, or overwritten): drop it, the next write starts anew.
        # A busy or read-only file (OperationalError) is left alone.
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            for suffix in ("", "-wal", "-shm"):
                try:
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                except OSError:
                    pass


def _lookup(db: sqlite3.Connection, table: str, column: str, keys: list[str]) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for chunk in _lookup_chunks(db, table, column, keys):
        found.update(chunk)
    return found


def _lookup_chunks(db: sqlite3.Connection, table: str, column: str,
                   keys: list[str]) -> Iterator[dict[str, bytes | str]]:
    """What the table holds for `keys`, a chunk of distinct keys at a time (one `IN (...)` each)."""
    distinct = list(dict.fromkeys(keys))
    for start in range(0, len(distinct), _LOOKUP_CHUNK):
        chunk = distinct[start:start + _LOOKUP_CHUNK]
        marks = ",".join("?" * len(chunk))
        yield dict(db.execute(f"SELECT key, {column} FROM {table} WHERE key IN ({marks})", chunk).fetchall())


def _stored_fixtures(db: sqlite3.Connection, keys: list[str], facts: dict[int, FixtureFacts],
                     seeds: set[int]) -> tuple[ParsedForms, dict[int, Fixture]]:
    """Each known file's stored fixture, read once, a chunk of keys at a time: spooled as its parsed form,
    and, for the `seeds` only, validated whole and kept parsed when it agrees with its facts (a seed that
    does not gets no form either: it counts as missing and is parsed again)."""
    forms, parsed = ParsedForms(), {}
    at: dict[str, list[int]] = {}
    for i in sorted(facts):
        at.setdefault(keys[i], []).append(i)  # two files with the same text share a key
    with collector_paused():  # 10,000 fixtures validated: 4.1 s with the collector on
        for chunk in _lookup_chunks(db, "parsed", "fixture", list(at)):
            for key, blob in chunk.items():
                if not isinstance(blob, bytes):
                    continue
                for i in at[key]:
                    if i in seeds:
                        fx = _fixture(blob)
                        if fx is None or facts_of(fx) != facts[i]:
                            continue
                        parsed[i] = fx
                    forms.add(i, blob)
    return forms, parsed


def _fixture(blob: bytes | str | None) -> Fixture | None:
    if not isinstance(blob, bytes):
        return None
    try:
        return Fixture.model_validate_json(blob)
    except (ValidationError, ValueError):
        return None


def _json(text: bytes | str | None) -> object:
    """A stored JSON text decoded, or None (not a text, or not JSON)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _facts(text: bytes | str | None) -> FixtureFacts | None:
    value = _json(text)
    kinds = (str, str, bool, bool)  # FixtureFacts' fields, in order
    if not isinstance(value, list) or len(value) != len(kinds):
        return None
    if not all(isinstance(v, k) for v, k in zip(value, kinds, strict=True)):
        return None
    return FixtureFacts(*value)


def _report(text: bytes | str | None) -> Report | None:
    value = _json(text)
    return value if _is_report(value) else None


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afpbench"


def prepared_cache(setting: str | None) -> PreparedCache | None:
    """The cache AFP_CACHE_DIR names (None: the default folder; "off" or empty: no cache)."""
    if setting is not None and setting.strip().lower() in ("", "off"):
        return None
    try:
        folder = Path(setting).expanduser() if setting else default_cache_dir()
    except RuntimeError:  # no home folder to expand to
        return None
    return PreparedCache(folder / FILE_NAME)
