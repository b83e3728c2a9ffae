"""Which lane a cell's call takes (docs/SPEC.md "Lanes"): the model's `lane` and the fixture decide.

- `sync`: one HTTP call a round, as always.
- `batch`: the provider's batch API (workers/providers/batch.py), for a fixture answered in one round.
- `auto`: batch where the provider offers a batch API (its row's `batch`), else sync.

A fixture that offers a tool (the calculator: scoring/render.py:tools_for) may need several rounds, each
depending on the one before; it takes the sync lane whatever the model's lane (docs/PROTOCOL.md).
Judges take the sync lane (spec.py refuses `lane: batch` on a judge).
"""

from __future__ import annotations

from typing import Literal

from afpbench.workers.providers.families import PROVIDERS
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.spec import ModelSpec

Lane = Literal["sync", "batch"]


def model_batches(model: ModelSpec) -> bool:
    """Whether the model's one-round cells take the batch lane."""
    return model.lane != "sync" and PROVIDERS[model.provider].batch


def batch_models(inputs: SweepInputs) -> list[ModelSpec]:
    return [m for m in inputs.spec.models if model_batches(m)]


_TOOL_FIXTURES: dict[str, frozenset[str]] = {}  # by sweep id: a sweep's inputs never change


def tool_fixture_ids(sweep_id: str, inputs: SweepInputs) -> frozenset[str]:
    """The ids of the sweep's fixtures that offer a tool (their cells stay on the sync lane); read once
    per sweep and process."""
    if not inputs.offers_tools:
        return frozenset()
    found = _TOOL_FIXTURES.get(sweep_id)
    if found is None:
        if len(_TOOL_FIXTURES) > 64:
            _TOOL_FIXTURES.clear()
        found = _TOOL_FIXTURES[sweep_id] = frozenset(i for i, f in inputs.fixture_facts().items() if f.offers_tools)
    return found


def cell_lane(model: ModelSpec, fixture_id: str, tool_fixtures: frozenset[str]) -> Lane:
    return "batch" if model_batches(model) and fixture_id not in tool_fixtures else "sync"
