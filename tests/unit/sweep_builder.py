"""Build sweeps with KNOWN states directly in SQL, for aggregation, record and export tests.

Rows are inserted as the runtime would leave them (cell phase/state, a Result per scored cell, an
Attempt per try); nothing here calls a model. Model output written here is SIMULATED.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from afpbench.fixtures.loader import FixtureFile
from afpbench.workers.store.models import Attempt, Cell, Phase, Result, Sweep, SweepStatus
from afpbench.workers.sweeps.spec import SweepSpec
from afpbench.workers.sweeps.spec_loading import demo_spec
from afpbench.workers.sweeps.stored_fixtures import write_fixture_rows

SCORES_PASS = {"task_correctness": 2, "evidence_discipline": 2, "uncertainty_handling": 1, "failure_control": 2}
SCORES_FAIL = {"task_correctness": 1, "evidence_discipline": 0, "uncertainty_handling": 1, "failure_control": 1}


def make_sweep(session: Session, sweep_id: str = "sw1", spec: SweepSpec | None = None,
               status: str = SweepStatus.complete, inputs: dict[str, Any] | None = None,
               fixture_files: dict[str, FixtureFile] | None = None) -> Sweep:
    """A sweep row; `fixture_files` (by fixture id) are stored as its fixture rows."""
    spec = spec or demo_spec()
    sweep = Sweep(
        id=sweep_id, name=spec.name, status=status, simulated=any(m.simulated for m in spec.models),
        spec=spec.resolved(), seal_hash="seal-" + sweep_id, seal_components={"instructions": {"version": "t1"}},
        afpbench_version="test", inputs=inputs or {}, notices=[],
    )
    session.add(sweep)
    session.flush()
    if fixture_files:
        write_fixture_rows(session, sweep_id, fixture_files.values(), fixture_files)
    return sweep


class CellMaker:
    """Adds cells of one model to a sweep; each call returns the cell id."""

    def __init__(self, session: Session, sweep: Sweep, model_index: int = 0):
        self.session = session
        self.sweep = sweep
        spec_models = sweep.spec["models"]
        from afpbench.workers.sweeps.spec_loading import parse_spec

        self.model = parse_spec(sweep.spec).models[model_index]
        assert spec_models
        self._repeats: dict[tuple, int] = {}

    def add(self, condition: str, fixture: str, state: str | None, *, repeat: int | None = None,
            high_risk: bool = False, scores: dict[str, int] | None = None, fatal: str | None = None,
            output_tokens: int | None = 100, tokens: dict[str, int] | None = None, reason: str | None = None,
            output_text: str = "SIMULATED answer") -> int:
        key = (condition, fixture)
        if repeat is None:
            repeat = self._repeats.get(key, 0) + 1
        self._repeats[key] = max(self._repeats.get(key, 0), repeat)
        cell = Cell(
            sweep_id=self.sweep.id, model_label=self.model.display, model_hash=self.model.model_hash,
            provider=self.model.provider, condition=condition, fixture_id=fixture, fixture_version="1",
            repeat=repeat, high_risk=high_risk, phase=Phase.done if state else Phase.queued, state=state,
            state_reason=reason, attempts=1 if state else 0,
        )
        self.session.add(cell)
        self.session.flush()
        if state is None:
            return cell.id
        tokens = tokens or {}
        attempt = Attempt(
            cell_id=cell.id, number=1, outcome="answer", output_text=output_text, output_tokens=output_tokens,
            input_tokens=tokens.get("input"), cached_tokens=tokens.get("cached"),
            reasoning_tokens=tokens.get("reasoning"), latency_ms=12.5, served_model=self.model.model,
            simulated=self.model.simulated, rounds=[{"raw_body": '{"choices": []}', "http_status": 200}],
        )
        self.session.add(attempt)
        self.session.flush()
        if state in ("MODEL_PASS", "MODEL_FAIL"):
            scores = scores or (SCORES_PASS if state == "MODEL_PASS" else SCORES_FAIL)
            self.session.add(Result(
                cell_id=cell.id, sweep_id=self.sweep.id, scoring_run=1, state=state, **scores,
                total=sum(scores.values()), fatal_criterion=fatal, rationale="SIMULATED rationale",
                details={"attempt_id": attempt.id}, scorer_version="test",
            ))
        else:
            self.session.add(Result(cell_id=cell.id, sweep_id=self.sweep.id, scoring_run=0, state=state,
                                    rationale=reason, details={"attempt_id": attempt.id}, scorer_version="test"))
        self.session.flush()
        return cell.id
