"""Read-only listings for the everyday loop: recent sweeps, and a sweep's cells with their scores.

Both front doors read these (the CLI's `sweeps` and `cells`); the queries touch only narrow columns
(never a sweep's JSON inputs, which hold every fixture text) so a listing answers at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, or_
from sqlalchemy import select as sa_select  # more than four columns: sqlmodel's typed select stops at four
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.workers.errors import SpecError, SweepNotFound, UnknownFilterValue
from afpbench.workers.store.models import Cell, Phase, Result, Sweep, as_utc
from afpbench.workers.sweeps.spec_loading import parse_spec


@dataclass(frozen=True)
class SweepLine:
    id: str
    name: str
    models: list[str]
    status: str
    cells: int
    done: int
    simulated: bool
    created_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {**self.__dict__, "created_at": self.created_at.isoformat(timespec="seconds")}


@dataclass(frozen=True)
class CellFilter:
    """Which of a sweep's cells a listing shows (CLI `cells`, HTTP `GET /sweeps/{id}/cells`)."""

    state: str | None = None
    fixture: str | None = None  # fixture id, or id@version
    condition: str | None = None
    model: str | None = None  # model label or model hash
    phase: str | None = None

    def clauses(self, sweep_id: str) -> list[Any]:
        """SQL conditions on Cell for this filter within one sweep."""
        out: list[Any] = [Cell.sweep_id == sweep_id]
        for column, value in ((Cell.state, self.state), (Cell.condition, self.condition), (Cell.phase, self.phase)):
            if value is not None:
                out.append(column == value)
        if self.fixture is not None:
            fixture_id, _, version = self.fixture.partition("@")
            out.append(Cell.fixture_id == fixture_id)
            if version:
                out.append(Cell.fixture_version == version)
        if self.model is not None:
            out.append(or_(col(Cell.model_label) == self.model, col(Cell.model_hash) == self.model))
        return out

    def resolved(self, session: Session, sweep_id: str) -> CellFilter:
        """This filter with its model named as the sweep stores it (the label), after checking that the
        sweep has that model and fixture: a name the sweep does not have is an error naming what it has,
        not an empty listing (the CLI's `cells`; the HTTP listing filters as asked and may be empty).
        A model may be named by its label, the label without a parenthesised suffix ("sim" for
        "sim (simulated)", as tables show it), the spec's model name, or its hash."""
        model = self.model
        if model is not None:
            labels = _model_names(session, sweep_id)
            matches = {label for label, names in labels.items() if model.strip() in names}
            if len(matches) != 1:
                known = ", ".join(sorted(labels)) or "none"
                why = "names several models of" if matches else "is not a model of"
                raise UnknownFilterValue(f"model {model!r} {why} sweep {sweep_id} (its models: {known})")
            model = matches.pop()
        if self.fixture is not None:
            known_fixtures = {f"{i}@{v}" for i, v in session.execute(
                sa_select(col(Cell.fixture_id), col(Cell.fixture_version)).where(col(Cell.sweep_id) == sweep_id)
                .distinct()).all()}
            fixture_id, _, version = self.fixture.partition("@")
            if not any(f == self.fixture or (not version and f.partition("@")[0] == fixture_id)
                       for f in known_fixtures):
                raise UnknownFilterValue(f"fixture {self.fixture!r} is not in sweep {sweep_id} "
                                         f"(its fixtures: {', '.join(sorted(known_fixtures)) or 'none'})")
        return CellFilter(state=self.state, fixture=self.fixture, condition=self.condition, model=model,
                          phase=self.phase)


def _model_names(session: Session, sweep_id: str) -> dict[str, set[str]]:
    """Each model label of the sweep -> every name that selects it."""
    spec = session.execute(sa_select(col(Sweep.spec)).where(col(Sweep.id) == sweep_id)).scalar_one_or_none()
    try:
        declared = {m.model_hash: m.model for m in parse_spec(spec).models} if spec else {}
    except SpecError:  # a spec stored by an older version: labels and hashes still select
        declared = {}
    out: dict[str, set[str]] = {}
    for label, model_hash in session.execute(sa_select(col(Cell.model_label), col(Cell.model_hash))
                                             .where(col(Cell.sweep_id) == sweep_id).distinct()).all():
        names = out.setdefault(label, {label, model_hash, label.split(" (", 1)[0]})
        if model_hash in declared:
            names.add(declared[model_hash])
    return out


@dataclass(frozen=True)
class CellLine:
    id: int
    model: str
    condition: str
    fixture: str  # id@version
    repeat: int
    phase: str
    state: str | None
    total: int | None
    scores: dict[str, int | None]
    fatal_criterion: str | None
    attempts: int
    decided_by: str | None = None  # the reviewer, when the latest result is a human decision

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def recent_sweeps(session: Session, limit: int = 20) -> list[SweepLine]:
    """Newest first, with each sweep's model labels and progress (from its cells)."""
    rows = session.execute(
        sa_select(col(Sweep.id), col(Sweep.name), col(Sweep.status), col(Sweep.simulated), col(Sweep.created_at))
        .order_by(col(Sweep.created_at).desc(), col(Sweep.id)).limit(limit)
    ).all()
    ids = [r.id for r in rows]
    per_model = session.execute(
        sa_select(col(Cell.sweep_id), col(Cell.model_label), func.count(),
                  func.sum(case((col(Cell.phase) == Phase.done, 1), else_=0)), func.min(col(Cell.id)))
        .where(col(Cell.sweep_id).in_(ids)).group_by(col(Cell.sweep_id), col(Cell.model_label))
    ).all() if ids else []
    models: dict[str, list[tuple[int, str]]] = {}
    counts: dict[str, list[int]] = {}
    for sweep_id, label, n, done, first in per_model:
        models.setdefault(sweep_id, []).append((first, label))
        slot = counts.setdefault(sweep_id, [0, 0])
        slot[0] += n
        slot[1] += int(done or 0)
    return [SweepLine(id=r.id, name=r.name, models=[label for _, label in sorted(models.get(r.id, []))],
                      status=r.status, cells=counts.get(r.id, [0, 0])[0], done=counts.get(r.id, [0, 0])[1],
                      simulated=r.simulated, created_at=as_utc(r.created_at)) for r in rows]


def sweep_cells(session: Session, sweep_id: str, where: CellFilter, limit: int | None = None) -> list[CellLine]:
    """The sweep's cells in id order, each with its latest result's scores (None before scoring)."""
    if session.execute(select(Sweep.id).where(Sweep.id == sweep_id)).first() is None:
        raise SweepNotFound(f"no sweep with id {sweep_id!r}")
    conditions = where.resolved(session, sweep_id).clauses(sweep_id)
    # The latest scoring run of each cell (human decisions add rows; the newest is the one reported).
    newer = aliased(Result)
    latest = (select(func.max(newer.scoring_run)).where(newer.cell_id == Cell.id).correlate(Cell)
              .scalar_subquery())
    # Only a human decision's details hold a reviewer (workers/grading/adjudication.py).
    reviewer = col(Result.details)["reviewer"].as_string()
    q = (select(Cell, Result.total, Result.fatal_criterion, reviewer, *(getattr(Result, c) for c in DIMENSIONS))
         .outerjoin(Result, (col(Result.cell_id) == col(Cell.id)) & (col(Result.scoring_run) == latest))
         .where(*conditions).order_by(col(Cell.id)))
    if limit is not None:
        q = q.limit(limit)
    out = []
    for cell, total, fatal, decided_by, *scores in session.execute(q).all():
        out.append(CellLine(id=cell.id, model=cell.model_label, condition=cell.condition,
                            fixture=f"{cell.fixture_id}@{cell.fixture_version}", repeat=cell.repeat,
                            phase=cell.phase, state=cell.state, total=total,
                            scores=dict(zip(DIMENSIONS, scores, strict=True)),
                            fatal_criterion=fatal, attempts=cell.attempts, decided_by=decided_by))
    return out
