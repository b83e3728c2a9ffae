"""The calibration answers of the judge check (judge_check.py) and the verdicts they are known to have.

The answers are the simulator's canned answers to the packaged fixtures (workers/sim/canned.py), each
with its gold scores and fatal criterion. Their known verdict is that gold judgement read the way the
scorer reads one judgement (`verdict_of`: scoring/verdict.py:decide, the sweep's pass rule, the flagged
criteria as fatal); under the default pass rule it is each answer's gold state (a unit test holds it).

The set is balanced: known MODEL_PASS and MODEL_FAIL alternate, a pass first (so an odd count has one
more pass), each from the next fixture in id order, so a judge that always says pass or always says fail
agrees on at most half (one more than half on an odd count). Within a fixture the pick rotates among its
answers of that kind (plain and AFP-styled passes; fails below the pass rule and fatal ones), so four
answers hold both ways to fail. When one kind runs out the set ends there (never at 20 under the default
rule: the packaged set has 18 passes and 14 fails).
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.fixtures.loader import load_fixtures
from afpbench.fixtures.schema import Fixture
from afpbench.scoring.judge import Judgement
from afpbench.scoring.rules import PassRule
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import ValidityReport
from afpbench.scoring.verdict import decide
from afpbench.workers.sim.canned import CannedResponse, Gold, load_canned

KINDS = (ResultState.MODEL_PASS, ResultState.MODEL_FAIL)  # the order they alternate in


@dataclass(frozen=True)
class CalibrationAnswer:
    fixture: Fixture
    answer: CannedResponse
    known: ResultState  # MODEL_PASS or MODEL_FAIL under the sweep's pass rule


def verdict_of(judgement: Judgement, fixture: Fixture, pass_rule: PassRule) -> ResultState:
    """The state the scorer decides from this one judgement alone (scoring/verdict.py:decide: its scores
    under the pass rule, a flagged criterion fatal); the answer's deterministic findings are left out, so
    the judge is what is measured. One judge raises no dispute: MODEL_PASS or MODEL_FAIL."""
    return decide("answered", ValidityReport(fixture.key, True), None, [judgement], pass_rule=pass_rule).state


def gold_judgement(gold: Gold, fixture: Fixture) -> Judgement:
    """The gold grading as the judgement a perfect judge would give."""
    fatal = gold.fatal.value if gold.fatal else None
    flags = {c: c == fatal for c in fixture.fatal_ids()}
    return Judgement(dict(gold.scores), {d: "" for d in gold.scores}, flags, {c: "" for c in flags})


def calibration_answers(count: int, pass_rule: PassRule | None = None) -> list[CalibrationAnswer]:
    """`count` answers (fewer only when one kind runs out), balanced and interleaved as the module says."""
    rule = pass_rule or PassRule()
    fixtures = [f for f in sorted(load_fixtures(None), key=lambda f: f.id)]
    canned = load_canned(None, {f.id: f.fatal_ids() for f in fixtures})
    pools = [{kind: [a for a in known if a.known == kind] for kind in KINDS}
             for known in ([CalibrationAnswer(f, r, verdict_of(gold_judgement(r.gold, f), f, rule))
                            for r in canned.get(f.id, [])] for f in fixtures)]
    taken = {kind: 0 for kind in KINDS}  # how many of each kind are chosen so far: the rotation within a fixture
    chosen: list[CalibrationAnswer] = []
    for position in range(count):
        kind = KINDS[position % 2]
        # the fixture of this position, else the next one in id order that still has an answer of this kind
        start = position % len(pools)
        pool = next((p[kind] for p in pools[start:] + pools[:start] if p[kind]), None)
        if pool is None:
            break
        chosen.append(pool.pop(taken[kind] % len(pool)))
        taken[kind] += 1
    return chosen
