"""Everything a sweep reads besides the spec: fixtures, instruction texts, judge prompt.

At creation they are read from disk (or the packaged defaults) and their exact texts stored with the
sweep; workers rebuild them from the stored texts, so a worker on another machine needs no paths and
scores against exactly what was sealed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel import select

from afpbench.fixtures.loader import FixtureFile, load_fixtures, parse_fixture, read_fixture_files
from afpbench.fixtures.schema import Fixture
from afpbench.reference.loader import (
    CONDITIONS,
    InstructionSet,
    build_instruction_set,
    load_instructions,
    load_judge_prompt,
)
from afpbench.workers.store.models import Sweep
from afpbench.workers.sweeps.seal import SealInputs
from afpbench.workers.sweeps.spec import SweepSpec, parse_spec


@dataclass(frozen=True)
class SweepInputs:
    spec: SweepSpec
    fixture_files: list[FixtureFile]
    fixtures: dict[str, Fixture]  # by fixture id, in file order
    instructions: InstructionSet
    judge_prompt: str

    def seal_inputs(self) -> SealInputs:
        return SealInputs(self.spec, self.fixture_files, self.instructions, self.judge_prompt)

    def to_json(self) -> dict[str, Any]:
        return {
            "fixture_files": {f.name: f.text for f in self.fixture_files},
            "instructions": {
                "name": self.instructions.name,
                "version": self.instructions.version,
                "texts": {c: self.instructions.text(c) for c in CONDITIONS},
            },
            "judge_prompt": self.judge_prompt,
        }


def load_inputs(spec: SweepSpec) -> SweepInputs:
    """Read fixtures, instructions and judge prompt named by the spec; raises FixtureError /
    ReferenceFileError naming the file that is wrong."""
    files = read_fixture_files(spec.fixtures.dir)
    fixtures = load_fixtures(spec.fixtures.dir, only=spec.fixtures.only)
    kept = {fx.id for fx in fixtures}
    if spec.fixtures.only:
        files = [f for f in files if parse_fixture(f).id in kept]
    return SweepInputs(
        spec=spec,
        fixture_files=files,
        fixtures={fx.id: fx for fx in fixtures},
        instructions=load_instructions(spec.instructions.dir),
        judge_prompt=load_judge_prompt(spec.judge_prompt),
    )


def inputs_from_stored(spec_json: dict[str, Any], stored: dict[str, Any]) -> SweepInputs:
    spec = parse_spec(spec_json, "stored spec")
    files = [FixtureFile(name, text) for name, text in stored["fixture_files"].items()]
    fixtures = [parse_fixture(f) for f in files]
    ins = stored["instructions"]
    return SweepInputs(
        spec=spec,
        fixture_files=files,
        fixtures={fx.id: fx for fx in fixtures},
        instructions=build_instruction_set(ins["name"], ins["version"], dict(ins["texts"])),
        judge_prompt=stored["judge_prompt"],
    )


_cache: dict[str, SweepInputs] = {}
_cache_lock = threading.Lock()
_build_lock = threading.Lock()


def _cached_inputs(sweep_id: str, stored: Callable[[], tuple[dict[str, Any], dict[str, Any]]]) -> SweepInputs:
    """Per-process cache (a sweep's inputs never change once sealed). On a miss one thread reads the
    stored spec and texts through `stored` and parses them; the others wait and take the cached copy."""
    with _cache_lock:
        hit = _cache.get(sweep_id)
    if hit is not None:
        return hit
    with _build_lock:
        with _cache_lock:
            hit = _cache.get(sweep_id)
        if hit is not None:
            return hit
        built = inputs_from_stored(*stored())
        with _cache_lock:
            _cache[sweep_id] = built
        return built


def inputs_for(session, sweep_id: str) -> SweepInputs:
    """The sweep's inputs by id. On a miss only the two JSON columns needed are read through `session`
    (an ORM session or a Core connection); hot paths never load the whole sweep row: its JSON is large."""
    return _cached_inputs(
        sweep_id, lambda: session.execute(select(Sweep.spec, Sweep.inputs).where(Sweep.id == sweep_id)).one()
    )


_validity_cache: dict[str, dict] = {}


def remember(sweep_id: str, stored_spec: dict[str, Any], inputs: SweepInputs, validity: dict) -> None:
    """Seed this process's caches with what the coordinator just stored (the embedded mode's workers share
    its process): the texts are the ones stored, so parsing them again would give the same objects."""
    built = SweepInputs(parse_spec(stored_spec, "stored spec"), inputs.fixture_files, inputs.fixtures,
                        inputs.instructions, inputs.judge_prompt)
    with _cache_lock:
        _cache[sweep_id] = built
        _validity_cache[sweep_id] = validity


def validity_for(session, sweep_id: str) -> dict:
    """The validity-gate reports recorded at creation, by fixture id (cached, immutable)."""
    with _cache_lock:
        hit = _validity_cache.get(sweep_id)
    if hit is not None:
        return hit
    validity = session.execute(select(Sweep.validity).where(Sweep.id == sweep_id)).scalar_one()
    with _cache_lock:
        _validity_cache[sweep_id] = validity
    return validity


def inputs_for_sweep(sweep) -> SweepInputs:
    """The same cache, for a caller that already holds the sweep row."""
    return _cached_inputs(sweep.id, lambda: (sweep.spec, sweep.inputs))
