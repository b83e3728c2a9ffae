"""The judge-reliability tables (the summary's `judge_reliability`: scoring/judge_reliability.py), defined
once like every results table (workers/results/tables.py lists them among REPORT_TABLES, so the report in
md, html and json, the viewer and the export's CSV files render them alike)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from afpbench.scoring.agreement import Share
from afpbench.scoring.judge_reliability import JudgeFigures, JudgePair
from afpbench.scoring.length_bias import MeanLength
from afpbench.scoring.units import percent, percent_interval
from afpbench.workers.results.summary import SweepSummary
from afpbench.workers.results.table_spec import COUNT, MEAN_TOKENS, Column, Format, Table

NO_JUDGES = "no judges: nothing to measure"


def _share(s: Share) -> str:
    if s.share is None or s.interval is None:
        return f"0/{s.total}" if s.total else "-"
    return f"{s.count}/{s.total} = {percent(s.share)} ({percent_interval(*s.interval)})"


def _estimate(value: float | None, interval: tuple[float, float] | None, places: int = 2) -> str:
    if value is None:
        return "-"
    shown = f"{value:+.{places}f}" if places else f"{value}"
    return shown + (f" ({interval[0]:+.{places}f} to {interval[1]:+.{places}f})" if interval else "")


SHARE = Format(_share)
ESTIMATE = Format(lambda v_i: _estimate(*v_i))


def _judges(s: SweepSummary) -> list[JudgeFigures]:
    return s.judge_reliability.judges if s.judge_reliability else []


def _note(text: str) -> Any:
    return lambda s: text if s.judge_reliability else NO_JUDGES


JUDGES = Table[JudgeFigures](
    "judge_reliability", "Judge reliability, per judge",
    (Column("judge", "judge", attrgetter("judge")),
     Column("usable_rate", "usable judgements", attrgetter("usable_rate"), SHARE),
     Column("swap_consistency", "swap consistency", attrgetter("swap_consistency"), SHARE),
     Column("human_agreement", "agreement with human decisions", lambda j: j.human_agreement.agreement, SHARE),
     Column("length_bias", "length bias (points per doubling)",
            lambda j: (j.length_bias.slope_per_doubling, j.length_bias.interval), ESTIMATE)),
    _judges,
    _note("usable judgements of the first round; swap consistency: swapped re-judges (run after a dispute "
          "trigger) whose pass/fail matched the first round; agreement with the humans who decided cells; length "
          "bias: within fixture x condition, the judge's total per doubling of answer length (an association); "
          "95% intervals"))


def _pairs(s: SweepSummary) -> list[JudgePair]:
    return s.judge_reliability.pairs if s.judge_reliability else []


JUDGE_AGREEMENT = Table[JudgePair](
    "judge_agreement", "Agreement between judges",
    (Column("judges", "judges", lambda p: f"{p.first} / {p.second}"),
     Column("n", "cells both judged", lambda p: p.kappa.n, COUNT),
     Column("kappa", "Cohen's kappa, pass/fail", lambda p: (p.kappa.kappa, p.kappa.interval), ESTIMATE),
     Column("base_rates", "pass rates (first / second)",
            lambda p: None if p.kappa.base_rates is None else
            f"{percent(p.kappa.base_rates[0])} / {percent(p.kappa.base_rates[1])}"),
     Column("alpha", "Krippendorff's alpha, dimensions (ordinal)", lambda p: (p.alpha.alpha, p.alpha.interval),
            ESTIMATE)),
    _pairs,
    lambda s: ("one judge: no agreement between judges to measure" if s.judge_reliability else NO_JUDGES)
    if not _pairs(s) else "first-round judgements of the cells both judges judged usably; 95% intervals")


def _lengths(s: SweepSummary) -> list[MeanLength]:
    return s.judge_reliability.mean_length if s.judge_reliability else []


ANSWER_LENGTH = Table[MeanLength](
    "answer_length", "Mean answer length by condition (judged answers, characters)",
    (Column("condition", "condition", attrgetter("condition")),
     Column("mean_length", "mean length", attrgetter("mean_length"), MEAN_TOKENS),
     Column("answers", "answers", attrgetter("answers"), COUNT)),
    _lengths, _note("the protocol's worry: an instruction set that only adds length; read beside the length bias"))

RELIABILITY_TABLES = (JUDGES, JUDGE_AGREEMENT, ANSWER_LENGTH)
