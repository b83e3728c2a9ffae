"""A sweep's judge reliability, whole: per judge and for the sweep, from each scored cell's judging. Pure:
typed records in (workers/results/reliability_queries.py reads them from SQL), typed figures out, each
figure from its own module (scoring/agreement.py, scoring/krippendorff.py, scoring/length_bias.py).

What one cell contributes (the latest scoring run of the cell):
- per judge its first-round judging: the scores and the pass/fail the sealed pass rule reads from them
  when it gave a usable judgement (any try of the round), None when it did not; a round whose every call
  failed (no answer at all) says nothing about the judge and is left out;
- per judge its swapped re-judge (round 2), where one ran: pass/fail, or None when unusable;
- the human decision on the cell, MODEL_PASS / MODEL_FAIL, where there is one;
- the scored answer's length in characters.

Per judge: the usable-judgement rate (usable first rounds over first rounds), swap consistency (usable
swapped re-judges whose pass/fail matched the first round), agreement with human decisions, and the
length bias of its total (within fixture x condition). Between judges: Cohen's kappa on pass/fail for each
pair, and Krippendorff's ordinal alpha on the four 0-2 dimensions (each cell x dimension a unit, every
judge's score a value) for each pair and for all judges together. Beside them the mean answer length per
condition (every scored answer, judged or not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from pydantic import Field

from afpbench.scoring.agreement import HumanAgreement, Kappa, Share, cohens_kappa, human_agreement, share
from afpbench.scoring.krippendorff import Alpha, krippendorff_alpha
from afpbench.scoring.length_bias import JudgedAnswer, LengthBias, MeanLength, length_bias, mean_length_by_condition
from afpbench.scoring.rates import Contract


@dataclass(frozen=True, slots=True)
class Verdict:
    """One usable judgement: the four dimension scores in rubric order, and the pass rule's reading."""

    scores: tuple[int, ...]
    passed: bool

    @property
    def total(self) -> int:
        return sum(self.scores)


@dataclass(frozen=True, slots=True)
class CellJudging:
    fixture: str
    condition: str
    length: int | None  # characters of the scored answer; None when unknown
    first: Mapping[str, Verdict | None] = field(default_factory=dict)  # judge -> round 1 (None: unusable)
    swapped: Mapping[str, bool | None] = field(default_factory=dict)  # judge -> round 2 pass (None: unusable)
    human: bool | None = None  # the human decision: passed, where one was MODEL_PASS / MODEL_FAIL


class JudgeFigures(Contract):
    judge: str
    usable_rate: Share = Field(description="usable first-round judgements over first-round judgings")
    swap_consistency: Share = Field(description="swapped re-judges whose pass/fail matched the first round "
                                                "(only after a dispute trigger: describes disputed answers)")
    human_agreement: HumanAgreement = Field(description="judge's first-round pass/fail against human decisions")
    length_bias: LengthBias


class JudgePair(Contract):
    first: str
    second: str
    kappa: Kappa = Field(description="Cohen's kappa on first-round pass/fail, cells both judged usably")
    alpha: Alpha = Field(description="Krippendorff's ordinal alpha on the four 0-2 dimensions")


class JudgeReliability(Contract):
    judges: list[JudgeFigures]
    pairs: list[JudgePair] = Field(description="each pair of judges")
    alpha_all: Alpha | None = Field(description="ordinal alpha of all judges together (two or more judges)")
    mean_length: list[MeanLength] = Field(description="mean scored-answer length (characters) per condition")
    cells: int = Field(description="scored cells whose judging is counted (latest scoring run)")
    note: str


NOTE = ("per judge and sweep, latest scoring run of each cell; shares with exact Clopper-Pearson 95% intervals, "
        "kappa with the Fleiss-Cohen-Everitt interval, alpha with a percentile bootstrap over units; length "
        "bias within fixture x condition, in points of total per doubling of answer length (an association)")


def _units(cells: Sequence[CellJudging], judges: Sequence[str]) -> list[list[int | None]]:
    units: list[list[int | None]] = []
    for c in cells:
        verdicts = [c.first.get(j) for j in judges]
        if sum(v is not None for v in verdicts) < 2:
            continue  # not pairable
        dims = len(next(v for v in verdicts if v is not None).scores)
        units += [[v.scores[d] if v is not None else None for v in verdicts] for d in range(dims)]
    return units


def _figures(judge: str, cells: Sequence[CellJudging]) -> JudgeFigures:
    judged = [c for c in cells if judge in c.first]
    usable = [c for c in judged if c.first[judge] is not None]
    swaps = [(c.first[judge], c.swapped[judge]) for c in usable if c.swapped.get(judge) is not None]
    humans = [(v.passed, c.human) for c in usable if c.human is not None and (v := c.first[judge]) is not None]
    answers = [JudgedAnswer(c.fixture, c.condition, float(c.length), float(v.total)) for c in usable
               if c.length is not None and (v := c.first[judge]) is not None]
    return JudgeFigures(
        judge=judge, usable_rate=share(len(usable), len(judged)),
        swap_consistency=share(sum(v is not None and v.passed == s for v, s in swaps), len(swaps)),
        human_agreement=human_agreement(humans), length_bias=length_bias(answers))


def judge_reliability(cells: Iterable[CellJudging], judges: Sequence[str], alpha_resamples: int = 2000
                      ) -> JudgeReliability:
    """The figures of `judges` (labels, in the spec's order) over the cells (module docstring)."""
    listed = list(cells)
    pairs = []
    for a, b in combinations(judges, 2):
        both = [(va.passed, vb.passed) for c in listed
                if (va := c.first.get(a)) is not None and (vb := c.first.get(b)) is not None]
        pairs.append(JudgePair(first=a, second=b, kappa=cohens_kappa(both),
                               alpha=krippendorff_alpha(_units(listed, [a, b]), resamples=alpha_resamples)))
    alpha_all = (krippendorff_alpha(_units(listed, judges), resamples=alpha_resamples) if len(judges) > 2
                 else pairs[0].alpha if pairs else None)
    lengths = [JudgedAnswer(c.fixture, c.condition, float(c.length), 0.0) for c in listed if c.length is not None]
    return JudgeReliability(judges=[_figures(j, listed) for j in judges], pairs=pairs, alpha_all=alpha_all,
                            mean_length=mean_length_by_condition(lengths), cells=len(listed), note=NOTE)
