"""The judge reliability of a sweep from SQL (the figures: scoring/judge_reliability.py): every JudgementRow
of each cell's latest scoring run (only the scores and fatal flags of its parsed judgement are read, by
JSON path, never the rationales), the scored answer's length, and the human decisions the summary already
holds. Called by aggregation.py; a sweep without judges has none (None in the summary).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.judge_reliability import CellJudging, JudgeReliability, Verdict, judge_reliability
from afpbench.scoring.rates import FAIL, PASS
from afpbench.scoring.rules import PassRule
from afpbench.workers.results.summary import HumanDecisionEntry
from afpbench.workers.store.models import CALL_FAILED, Attempt, Cell, JudgementRow, Result
from afpbench.workers.sweeps.spec import SweepSpec

Key = tuple[int, str, int]  # (cell id, judge label, round)


def _verdict(scores: Any, flags: Any, rule: PassRule) -> Verdict | None:
    if not isinstance(scores, dict) or not all(isinstance(scores.get(d), int) for d in DIMENSIONS):
        return None
    ordered: dict[str, int] = {d: int(scores[d]) for d in DIMENSIONS}
    fatal = isinstance(flags, dict) and any(bool(v) for v in flags.values())
    return Verdict(tuple(ordered.values()), rule.passes(ordered, fatal))


def _judgings(session: Session, sweep_id: str, rule: PassRule) -> dict[Key, Verdict | None]:
    """Per (cell, judge, round) of the cell's latest scoring run: the usable verdict (any try), None when
    no try was usable; a judging whose every call failed is left out (it says nothing of the judge)."""
    latest = (select(col(JudgementRow.cell_id), func.max(JudgementRow.scoring_run).label("run"))
              .join(Cell, col(Cell.id) == JudgementRow.cell_id).where(col(Cell.sweep_id) == sweep_id)
              .group_by(col(JudgementRow.cell_id)).subquery())
    parsed = cast(Any, JudgementRow.parsed)  # the JSON column (its declared type is the value's)
    q = (select(col(JudgementRow.cell_id), col(JudgementRow.judge_label), col(JudgementRow.judge_round),
                parsed["scores"], parsed["fatal_flags"], col(JudgementRow.parse_error))
         .join(latest, (latest.c.cell_id == JudgementRow.cell_id) & (latest.c.run == JudgementRow.scoring_run))
         .order_by(col(JudgementRow.id)).execution_options(yield_per=2000))
    out: dict[Key, Verdict | None] = {}
    answered: set[Key] = set()
    for cell_id, judge, round_, scores, flags, error in session.execute(q):
        key = (cell_id, judge, round_)
        if error is not None and error.startswith(CALL_FAILED):
            continue
        answered.add(key)
        verdict = _verdict(scores, flags, rule) if error is None else None
        if out.get(key) is None:
            out[key] = verdict
    return {k: v for k, v in out.items() if k in answered}


def _cells(session: Session, sweep_id: str, ids: set[int]) -> dict[int, tuple[str, str, int | None]]:
    """cell id -> (fixture@version, condition, length of the answer its latest result judged)."""
    newest_result = aliased(Result)
    latest = ~select(col(newest_result.id)).where(col(newest_result.cell_id) == Result.cell_id,
                                              col(newest_result.scoring_run) > Result.scoring_run).exists()
    length = (select(func.length(Attempt.output_text))
              .where(col(Attempt.id) == Result.details["attempt_id"].as_integer()).scalar_subquery())
    q = (select(col(Cell.id), col(Cell.fixture_id), col(Cell.fixture_version), col(Cell.condition), length)
         .outerjoin(Result, (col(Result.cell_id) == Cell.id) & latest)
         .where(col(Cell.sweep_id) == sweep_id))
    return {cid: (f"{f}@{v}", c, n) for cid, f, v, c, n in session.execute(q) if cid in ids}


def sweep_judge_reliability(session: Session, sweep_id: str, spec: SweepSpec,
                            decisions: Sequence[HumanDecisionEntry]) -> JudgeReliability | None:
    if not spec.judges:
        return None
    judgings = _judgings(session, sweep_id, PassRule(**spec.pass_rule.model_dump()))
    by_cell: dict[int, dict[tuple[str, int], Verdict | None]] = defaultdict(dict)
    for (cell_id, judge, round_), verdict in judgings.items():
        by_cell[cell_id][(judge, round_)] = verdict
    human = {d.cell_id: d.to_state == PASS for d in decisions if d.to_state in (PASS, FAIL)}  # latest wins
    facts = _cells(session, sweep_id, set(by_cell))
    cells = []
    for cell_id, verdicts in sorted(by_cell.items()):
        fixture, condition, length = facts.get(cell_id, ("?", "?", None))
        first = {j: v for (j, r), v in verdicts.items() if r == 1}
        swapped = {j: (v.passed if v is not None else None) for (j, r), v in verdicts.items() if r == 2}
        cells.append(CellJudging(fixture, condition, length, first, swapped, human.get(cell_id)))
    labels = list(dict.fromkeys([j.display for j in spec.judges]))
    return judge_reliability(cells, labels)
