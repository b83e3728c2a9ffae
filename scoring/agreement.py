"""How far a judge agrees: with itself when the order is swapped, with another judge on pass/fail, with
the humans who decided disputes; and how often it gives a usable judgement at all. Pure: counts in,
typed figures with intervals out. (Agreement on the 0-2 rubric dimensions: scoring/krippendorff.py;
the judge's preference for length: scoring/length_bias.py.)

- Shares (swap consistency, usable-judgement rate, agreement with humans) carry the exact Clopper-Pearson
  interval (scoring/statistics.py).
- Cohen's kappa on pass/fail carries the large-sample interval of Fleiss, Cohen & Everitt (1969,
  Psychological Bulletin 72:323-327), kappa +- z * SE, clipped to [-1, 1], with both raters' base rates:
  the same variance as statsmodels' cohens_kappa (tests/unit/scoring/test_agreement.py compares them).
  Kappa is undefined (None) when both raters give one verdict only (chance agreement is total).

Swap consistency is measured where a swapped re-judge ran: a dispute trigger fired in the first round,
so it describes the judge on disputed answers, not on every answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

from pydantic import Field

from afpbench.scoring.rates import Contract
from afpbench.scoring.statistics import clopper_pearson


class Share(Contract):
    count: int
    total: int
    share: float | None = Field(description="count / total; None when total is 0")
    interval: tuple[float, float] | None = Field(description="exact Clopper-Pearson interval")
    confidence: float


def share(count: int, total: int, confidence: float = 0.95) -> Share:
    if total == 0:
        return Share(count=0, total=0, share=None, interval=None, confidence=confidence)
    return Share(count=count, total=total, share=count / total, interval=clopper_pearson(count, total, confidence),
                 confidence=confidence)


def swap_consistency(agreed: int, swapped: int, confidence: float = 0.95) -> Share:
    """Share of swapped re-judges whose verdict agreed with the judge's first round."""
    return share(agreed, swapped, confidence)


def usable_rate(usable: int, attempted: int, confidence: float = 0.95) -> Share:
    """Share of judge calls whose answer was a usable judgement."""
    return share(usable, attempted, confidence)


class Kappa(Contract):
    n: int = Field(description="items both raters judged")
    observed_agreement: float | None
    chance_agreement: float | None
    kappa: float | None = Field(description="None when chance agreement is total, or with no item")
    standard_error: float | None
    interval: tuple[float, float] | None
    confidence: float
    base_rates: tuple[float, float] | None = Field(description="share each rater passed: (first, second)")


def cohens_kappa(pairs: Iterable[tuple[bool, bool]], confidence: float = 0.95) -> Kappa:
    """Cohen's kappa of two raters' pass/fail verdicts, (first passed, second passed) per item."""
    counts = {(a, b): 0 for a in (True, False) for b in (True, False)}
    for a, b in pairs:
        counts[(bool(a), bool(b))] += 1
    n = sum(counts.values())
    if n == 0:
        return Kappa(n=0, observed_agreement=None, chance_agreement=None, kappa=None, standard_error=None,
                     interval=None, confidence=confidence, base_rates=None)
    p = {k: v / n for k, v in counts.items()}
    row = {x: p[(x, True)] + p[(x, False)] for x in (True, False)}  # first rater
    col = {x: p[(True, x)] + p[(False, x)] for x in (True, False)}  # second rater
    observed = p[(True, True)] + p[(False, False)]
    chance = row[True] * col[True] + row[False] * col[False]
    rates = (row[True], col[True])
    if chance >= 1:
        return Kappa(n=n, observed_agreement=observed, chance_agreement=chance, kappa=None, standard_error=None,
                     interval=None, confidence=confidence, base_rates=rates)
    kappa = (observed - chance) / (1 - chance)
    # Fleiss, Cohen & Everitt (1969): the large-sample variance away from kappa = 0.
    term_a = sum(p[(x, x)] * (1 - (row[x] + col[x]) * (1 - kappa)) ** 2 for x in (True, False))
    term_b = (1 - kappa) ** 2 * sum(p[(x, y)] * (col[x] + row[y]) ** 2 for x in (True, False) for y in (True, False)
                                    if x != y)
    term_c = (kappa - chance * (1 - kappa)) ** 2
    se = math.sqrt(max(0.0, term_a + term_b - term_c) / n) / (1 - chance)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return Kappa(n=n, observed_agreement=observed, chance_agreement=chance, kappa=kappa, standard_error=se,
                 interval=(max(-1.0, kappa - z * se), min(1.0, kappa + z * se)), confidence=confidence,
                 base_rates=rates)


class HumanAgreement(Contract):
    agreement: Share = Field(description="share of human decisions the judge's verdict matched")
    kappa: Kappa = Field(description="Cohen's kappa, judge first, human second")


def human_agreement(pairs: Iterable[tuple[bool, bool]], confidence: float = 0.95) -> HumanAgreement:
    """The judge's pass/fail against the human decision, (judge passed, human passed) per decided cell."""
    listed = list(pairs)
    return HumanAgreement(agreement=share(sum(a == b for a, b in listed), len(listed), confidence),
                          kappa=cohens_kappa(listed, confidence))
