"""Everything a sweep reads besides the spec: fixtures, instruction texts, judge prompt.

At creation they are read (inline from the spec, from the operator's catalogue, from files, or the
packaged defaults: workers/sweeps/sources.py) and their exact texts stored with the sweep (the fixture
texts one row each: stored_fixtures.py); workers rebuild them from the stored texts, so a worker on
another machine needs no paths and scores against exactly what was sealed. A rebuilt sweep reads and
parses a fixture when a cell first needs it (fixture_map.py): each row's fixture id says which text holds
which fixture without parsing them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlmodel import select

from afpbench.fixtures.loader import (
    FixtureError,
    FixtureFile,
    inline_fixture_files,
    read_fixture_files,
    select_parsed,
)
from afpbench.fixtures.schema import Fixture
from afpbench.fixtures.spool import SpooledFiles
from afpbench.reference.loader import (
    InstructionSet,
    build_instruction_set,
    instructions_from_texts,
    judge_prompt_from_text,
    load_instructions,
    load_judge_prompt,
)
from afpbench.reference.protocol_facts import CONDITIONS
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import get_engine
from afpbench.workers.store.models import Sweep
from afpbench.workers.sweeps.fixture_map import FilesById, FixtureFacts, LazyFixtures, facts_of
from afpbench.workers.sweeps.gate_run import fixture_gate, gate_key, prepare_fixtures
from afpbench.workers.sweeps.prepared_cache import Report, prepared_cache
from afpbench.workers.sweeps.seal import SealInputs
from afpbench.workers.sweeps.sources import FixtureSource, InstructionSource, JudgePromptSource, catalogue_entry
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec
from afpbench.workers.sweeps.spec_loading import parse_spec
from afpbench.workers.sweeps.stored_fixtures import StoredFixtureFiles, stored_files


@dataclass(frozen=True)
class SweepInputs:
    spec: SweepSpec
    # In file order: from load_inputs a spool (fixtures/spool.py), for a stored sweep its rows; either way
    # each text is read when iterated, never all held at once.
    fixture_files: Iterable[FixtureFile]
    # By fixture id, in file order: the i-th id is the i-th file's. From load_inputs and the store a
    # LazyFixtures: each parsed when first read, a bounded number kept (fixture_map.py).
    fixtures: Mapping[str, Fixture]
    instructions: InstructionSet
    judge_prompt: str
    offers_tools: bool  # a fixture offers a tool (scoring/render.py:tools_for), so a cell may take tool rounds
    # The validity reports by fixture id, when load_inputs gated the fixtures as it parsed them (so
    # validity_reports need not gate them again); None for inputs built any other way.
    validity: Mapping[str, Report] | None = None
    # What creation needs of each fixture, by id in file order, when load_inputs learned it with the parse;
    # None for inputs built any other way (fixture_facts then reads it off the fixtures).
    facts: Mapping[str, FixtureFacts] | None = None

    def fixture_facts(self) -> Mapping[str, FixtureFacts]:
        return self.facts if self.facts is not None else {i: facts_of(fx) for i, fx in self.fixtures.items()}

    def seal_inputs(self) -> SealInputs:
        return SealInputs(self.spec, self.fixture_files, self.instructions, self.judge_prompt)

    @cached_property
    def models_by_hash(self) -> dict[str, ModelSpec]:
        """The sweep's models by `model_hash` (what a cell row names): hashed once per sweep, not per cell."""
        return {m.model_hash: m for m in self.spec.models}

    def to_json(self) -> dict[str, Any]:
        """What the sweep row stores besides the fixture texts (those are rows: stored_fixtures.py)."""
        return {
            "offers_tools": self.offers_tools,
            "instructions": {
                "name": self.instructions.name,
                "version": self.instructions.version,
                "texts": {c: self.instructions.text(c) for c in CONDITIONS},
            },
            "judge_prompt": self.judge_prompt,
        }


def load_inputs(spec: SweepSpec, *, with_validity: bool = False) -> SweepInputs:
    """Read fixtures, instructions and judge prompt named by the spec (inline, from the catalogue, from
    files, or packaged); raises FixtureError / ReferenceFileError naming what is wrong (SettingError when
    AFP_CATALOGUE_DIR is not a directory). `with_validity`: gate the fixtures as they are parsed (on two
    cores when safe: gate_run.py), for a sweep about to be created."""
    files, where = _fixture_files(spec.fixtures)
    references = _references(spec)
    gate, gate_id = None, None
    if with_validity and not isinstance(references, Exception):
        gate, gate_id = fixture_gate(*references), gate_key(*references)
    prepared = prepare_fixtures(files, gate, spec.fixtures.only, prepared_cache(get_settings().cache_dir), gate_id)
    selected = select_parsed(files.names(), prepared.facts, where, spec.fixtures.only)
    if isinstance(references, Exception):
        raise references  # after the fixtures' errors: a spec wrong in both names its fixtures first, as always
    instructions, judge_prompt = references
    facts = {prepared.facts[i].id: prepared.facts[i] for i in selected}
    # The texts stay in the spool (fixtures/spool.py); each file carries its parsed form, stored beside it.
    kept_files = files.with_forms(prepared.forms).subset(selected)
    return SweepInputs(
        spec=spec,
        fixture_files=kept_files,
        # The coordinator plans from `facts`; the parsed fixtures kept seed the embedded workers' map.
        fixtures=LazyFixtures(FilesById(list(facts), kept_files), prepared.parsed.values()),
        instructions=instructions,
        judge_prompt=judge_prompt,
        offers_tools=any(f.offers_tools for f in facts.values()),
        validity=prepared.reports,
        facts=facts,
    )


def _references(spec: SweepSpec) -> tuple[InstructionSet, str] | Exception:
    """The instructions and the judge prompt (read before the fixtures: the gate needs them), or the
    error reading them raised, for the caller to raise once the fixtures are checked."""
    try:
        return _instructions(spec.instructions), _judge_prompt(spec.judge_prompt)
    except Exception as exc:
        return exc


def _fixture_files(source: FixtureSource) -> tuple[SpooledFiles, str]:
    """The fixture files and how messages name the set."""
    if source.inline is not None:
        try:
            return inline_fixture_files(source.inline), "fixtures.inline"
        except FixtureError as exc:
            raise FixtureError(f"fixtures.inline: {exc}") from None
    if source.name is not None:
        label = f"fixtures.name {source.name!r}"
        return read_fixture_files(catalogue_entry("fixtures", source.name), label=label), label
    return read_fixture_files(source.dir), source.dir or "pilot"


def _instructions(source: InstructionSource) -> InstructionSet:
    if source.inline is not None:
        return instructions_from_texts(source.inline.model_dump(), "inline", source.version or "unversioned",
                                       lambda c: f"instructions.inline.{c}")
    if source.name is not None:
        return load_instructions(catalogue_entry("instructions", source.name), name=f"catalogue:{source.name}",
                                 label=f"instructions.name {source.name!r}")
    return load_instructions(source.dir)


def _judge_prompt(source: str | JudgePromptSource | None) -> str:
    if isinstance(source, JudgePromptSource):
        if source.inline is not None:
            return judge_prompt_from_text(source.inline)
        return load_judge_prompt(catalogue_entry("judge_prompt", str(source.name)),
                                 label=f"judge_prompt.name {source.name!r}")
    return load_judge_prompt(source)


def inputs_from_stored(spec_json: dict[str, Any], stored: dict[str, Any],
                       files: Mapping[str, FixtureFile]) -> SweepInputs:
    """The inputs as stored with the sweep: `stored` its inputs JSON, `files` its fixture files by id in
    file order (the rows, stored_fixtures.py). Fixtures are parsed when first read (a parse error raises
    FixtureError naming the file then)."""
    spec = parse_spec(spec_json, "stored spec")
    fixtures = LazyFixtures(files)
    offers_tools = stored.get("offers_tools")
    if not isinstance(offers_tools, bool):  # stored before the flag: learn it from the fixtures, once
        offers_tools = any(facts_of(fixtures[i]).offers_tools for i in fixtures)
    ins = stored["instructions"]
    return SweepInputs(
        spec=spec,
        fixture_files=files.files() if isinstance(files, StoredFixtureFiles) else list(files.values()),
        fixtures=fixtures,
        instructions=build_instruction_set(ins["name"], ins["version"], dict(ins["texts"])),
        judge_prompt=stored["judge_prompt"],
        offers_tools=offers_tools,
    )


def _from_store(session, sweep_id: str, stored: tuple[dict[str, Any], dict[str, Any]] | None = None) -> SweepInputs:
    """Read through `session` (an ORM session or a Core connection) the spec and inputs JSON (unless given)
    and the fixture ids; the texts are read later, each when its fixture is first needed."""
    if stored is None:
        stored = tuple(session.execute(select(Sweep.spec, Sweep.inputs).where(Sweep.id == sweep_id)).one())
    return inputs_from_stored(*stored, stored_files(session, sweep_id))


_cache: dict[str, SweepInputs] = {}
_cache_lock = threading.Lock()
_build_lock = threading.Lock()


def _cached_inputs(sweep_id: str, build: Callable[[], SweepInputs]) -> SweepInputs:
    """Per-process cache (a sweep's inputs never change once sealed). On a miss one thread reads the
    stored inputs through `build`; the others wait and take the cached copy."""
    with _cache_lock:
        hit = _cache.get(sweep_id)
    if hit is not None:
        return hit
    with _build_lock:
        with _cache_lock:
            hit = _cache.get(sweep_id)
        if hit is not None:
            return hit
        built = build()
        with _cache_lock:
            _cache[sweep_id] = built
        return built


def inputs_for(session, sweep_id: str) -> SweepInputs:
    """The sweep's inputs by id. On a miss only the two JSON columns needed and the fixture ids are read
    through `session` (an ORM session or a Core connection); hot paths never load the whole sweep row."""
    return _cached_inputs(sweep_id, lambda: _from_store(session, sweep_id))


_validity_cache: dict[str, dict] = {}


def _shared_reports(validity: dict) -> dict:
    """The reports by fixture id, equal reports one object: a sweep's fixtures mostly pass with the same
    report, and 10,000 equal dicts held for the run were ~3 MB. Read only (the cache is immutable)."""
    if not isinstance(validity, dict):
        return validity
    seen: dict[str, Any] = {}
    return {fixture_id: seen.setdefault(repr(report), report) for fixture_id, report in validity.items()}


def remember(sweep_id: str, stored_spec: dict[str, Any], inputs: SweepInputs, validity: dict) -> None:
    """Seed this process's caches with what the coordinator just stored in the configured database (the
    embedded mode's workers share its process). The coordinator's parsed
    fixtures (at most fixture_map.CAPACITY) are kept, being parsed from the very texts stored; the others
    are read from their rows when needed, so the run does not hold every text the coordinator read."""
    kept = inputs.fixtures.kept() if isinstance(inputs.fixtures, LazyFixtures) else list(inputs.fixtures.values())
    files = StoredFixtureFiles(get_engine(), sweep_id, list(inputs.fixtures))
    built = SweepInputs(parse_spec(stored_spec, "stored spec"), files.files(), LazyFixtures(files, kept),
                        inputs.instructions, inputs.judge_prompt, inputs.offers_tools)
    with _cache_lock:
        _cache[sweep_id] = built
        _validity_cache[sweep_id] = _shared_reports(validity)


def validity_for(session, sweep_id: str) -> dict:
    """The validity-gate reports recorded at creation, by fixture id (cached, immutable)."""
    with _cache_lock:
        hit = _validity_cache.get(sweep_id)
    if hit is not None:
        return hit
    validity = _shared_reports(session.execute(select(Sweep.validity).where(Sweep.id == sweep_id)).scalar_one())
    with _cache_lock:
        _validity_cache[sweep_id] = validity
    return validity


def inputs_for_sweep(session, sweep) -> SweepInputs:
    """The same cache, for a caller that already holds the sweep row (read through `session`)."""
    return _cached_inputs(sweep.id, lambda: _from_store(session, sweep.id, (sweep.spec, sweep.inputs)))
