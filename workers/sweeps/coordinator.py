"""The coordinator: validity gate, seal, expansion of the matrix into cell rows, release to the queues.

Creation is one transaction: the sweep row, its seal, its fixture texts and every cell row land together
or not at all.
Cells are released (sent as messages carrying only the cell id) after the commit.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from afpbench.scoring.states import ResultState
from afpbench.workers.errors import SealMismatch, SweepNotFound
from afpbench.workers.store.db import insert_in_chunks, refresh_statistics
from afpbench.workers.store.models import Cell, Phase, Sweep, table_of, utcnow
from afpbench.workers.sweeps.gate_run import fixture_gate, gate_all
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for_sweep, load_inputs
from afpbench.workers.sweeps.seal import afpbench_version, changed_components, seal_components, seal_hash
from afpbench.workers.sweeps.spec import SweepSpec
from afpbench.workers.sweeps.stored_fixtures import forms_not_of_their_texts, write_fixture_rows

log = logging.getLogger(__name__)
_INSERT_CHUNK = 5000
PLAN = "plan"  # the seal component holding the plan `run` made before it started (workers/planning/)


@dataclass(frozen=True)
class PlannedCell:
    model_index: int
    condition: str
    fixture_id: str
    repeat: int


@dataclass
class Plan:
    cells: list[PlannedCell]
    notices: list[str] = field(default_factory=list)


def _repeat_notices(spec: SweepSpec, inputs: SweepInputs) -> list[str]:
    hr_repeats = spec.high_risk_repeat_count()
    high_risk = [f.id for f in inputs.fixture_facts().values() if f.high_risk]
    if not (high_risk and hr_repeats > spec.repeats):
        return []
    asked = min(spec.high_risk_repeats, spec.repeats) if spec.high_risk_repeats < hr_repeats else spec.repeats
    return [
        f"high-risk fixtures {', '.join(high_risk)}: {hr_repeats} repeats per condition (asked {asked}; "
        "the protocol requires at least 3 before comparative results publish)"
    ]


def planned_cells(spec: SweepSpec, inputs: SweepInputs) -> Iterator[PlannedCell]:
    """fixtures x conditions x models x repeats, one at a time (a 100k sweep holds no list of them);
    high-risk fixtures get at least three repeats."""
    hr_repeats = spec.high_risk_repeat_count()
    facts = inputs.fixture_facts()
    for mi, _model in enumerate(spec.models):
        for condition in spec.conditions:
            for f in facts.values():
                n = hr_repeats if f.high_risk else spec.repeats
                for r in range(1, n + 1):
                    yield PlannedCell(mi, condition, f.id, r)


def plan_cells(spec: SweepSpec, inputs: SweepInputs) -> Plan:
    return Plan(list(planned_cells(spec, inputs)), _repeat_notices(spec, inputs))


def validity_reports(inputs: SweepInputs) -> dict[str, dict]:
    """The validity gate of every fixture against the prompts of every condition: the reports load_inputs
    computed with the parse when it did, else gated now (on two cores when that is safe: gate_run.py)."""
    if inputs.validity is not None and list(inputs.validity) == list(inputs.fixtures):
        return dict(inputs.validity)
    return gate_all(list(inputs.fixtures.values()), fixture_gate(inputs.instructions, inputs.judge_prompt))


def create_sweep(session: Session, spec: SweepSpec, inputs: SweepInputs | None = None,
                 plan: dict[str, Any] | None = None) -> Sweep:
    """The sweep, sealed (with its plan, when given: workers/planning/, `afpbench plan`), and every cell."""
    inputs = inputs or load_inputs(spec, with_validity=True)
    components = seal_components(inputs.seal_inputs())
    if plan is not None:
        components[PLAN] = plan
    validity = validity_reports(inputs)
    sweep = Sweep(
        id=uuid.uuid4().hex[:12],
        name=spec.name,
        simulated=any(m.simulated for m in spec.models),
        spec=spec.resolved(),
        seal_hash=seal_hash(components),
        seal_components=components,
        afpbench_version=afpbench_version(),
        notices=_repeat_notices(spec, inputs),
        inputs=inputs.to_json(),
        validity=validity,
    )
    session.add(sweep)
    session.flush()
    write_fixture_rows(session, sweep.id, inputs.fixture_files, inputs.fixtures)
    now = utcnow()
    # Per model and per fixture once, not per cell: a 100k-cell sweep must not hash 100k times.
    models = [(m.display, m.model_hash, m.provider) for m in spec.models]
    invalid = {
        fx_id: None
        if gate["passed"]
        else "validity gate failed: " + "; ".join(f"{f['check']}: {f['detail']}" for f in gate["failures"])
        for fx_id, gate in validity.items()
    }
    facts = inputs.fixture_facts()

    def cell_rows() -> Iterator[dict]:
        for pc in planned_cells(spec, inputs):
            label, model_hash, provider = models[pc.model_index]
            fx = facts[pc.fixture_id]
            # A fixture that fails the validity gate is not sent to any model: its cells are INVALID_TEST,
            # naming the failed checks, and stay visible (out of every denominator).
            reason = invalid[fx.id]
            yield {
                "sweep_id": sweep.id, "model_label": label, "model_hash": model_hash, "provider": provider,
                "condition": pc.condition, "fixture_id": fx.id, "fixture_version": fx.version,
                "repeat": pc.repeat, "high_risk": fx.high_risk, "updated_at": now, "attempts": 0,
                "phase": Phase.done if reason else Phase.pending,
                "state": ResultState.INVALID_TEST.value if reason else None, "state_reason": reason,
            }

    written = insert_in_chunks(session, table_of(Cell), cell_rows(), _INSERT_CHUNK)
    refresh_statistics(session, table_of(Cell), written)
    session.flush()
    return sweep


def verify_sweep(sweep: Sweep) -> list[str]:
    """Recompute every seal component from the inputs the spec names now; return what changed."""
    inputs = load_inputs(SweepSpec.model_validate(sweep.spec))
    current = _carried_over(seal_components(inputs.seal_inputs()), sweep)
    return changed_components(sweep.seal_components, current)


def verified_sweep(session: Session, sweep_id: str, then: str = "") -> Sweep:
    """The sweep, its inputs verified against the seal: SweepNotFound, or SealMismatch naming every changed
    component (`then`: what the refusal adds, e.g. why the caller needs the sealed inputs)."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise SweepNotFound(f"no sweep with id {sweep_id!r}")
    changed = verify_sweep(sweep)
    if changed:
        raise SealMismatch(f"sweep {sweep_id}: inputs changed since the seal: {', '.join(changed)}{then}")
    return sweep


def _carried_over(current: dict[str, Any], sweep: Sweep) -> dict[str, Any]:
    """What verify cannot recompute from the inputs, taken as sealed: the code version (informative) and
    the plan (made from the spec and perhaps a pilot sweep that may have changed since; the seal hash
    covers it)."""
    current["afpbench_version"] = sweep.seal_components.get("afpbench_version")
    if PLAN in sweep.seal_components:
        current[PLAN] = sweep.seal_components[PLAN]
    return current


def stored_inputs_intact(session: Session, sweep: Sweep) -> list[str]:
    """The stored texts still hash to the seal, and each stored parsed form is its text's parse (guards the
    database copy workers use): what differs, by component (`fixtures/<file> (parsed form)` for a form)."""
    inputs = inputs_for_sweep(session, sweep)
    current = _carried_over(seal_components(inputs.seal_inputs()), sweep)
    forms = forms_not_of_their_texts(session, sweep.id)
    return changed_components(sweep.seal_components, current) + [f"fixtures/{name} (parsed form)" for name in forms]
