"""The judge check before a sweep: each judge the spec's `judge_check:` covers (by default every judge that
is not simulated) judges a few calibration answers whose verdicts are known (calibration_set.py: the
simulator's canned answers with their gold grading, balanced between known MODEL_PASS and MODEL_FAIL),
with the sweep's judge prompt and the judge's structured output, before any cell is written.

Every cell's verdict would rest on the judge, so it passes only when it agrees with the known verdicts:
an answer agrees when the judge's reply is usable (scoring/judge_reply.py:read_reply through
judges.py:read_call: not cut at max_tokens, strict JSON, quotes found in the answer) and the verdict the
scorer derives from it under the sweep's pass rule (calibration_set.py:verdict_of) is the known one. The
check passes when at least `min_agreement` of the answers tried agree (default 0.75: 3 of 4; a judge that
always says pass, or always fail, agrees on half). Otherwise `run` (and `plan`) stop with one line naming
the judge and why (JudgeCheckFailed, exit 2): every call failed, no usable judgement at all, or too few
agreeing (with the first disagreement or problem).

A few calls: one try per answer (no parse retries: the check asks whether the judge can judge, it is not
the sweep's measure of it), sent at once up to the judge's `max_in_flight` (a CPU judge takes a minute or
two per call: four in a row would be most of ten minutes). A call that fails (unreachable, refused, 5xx)
counts as not agreeing: it shows nothing about the judge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from afpbench.scoring.judge import Judgement, build_judge_messages
from afpbench.scoring.rules import PassRule
from afpbench.workers.errors import JudgeCheckFailed
from afpbench.workers.grading.calibration_set import CalibrationAnswer, calibration_answers, verdict_of
from afpbench.workers.grading.judges import judge_call, judgement_response, read_call
from afpbench.workers.sweeps.spec import DEFAULT_MIN_AGREEMENT, ModelSpec, SweepSpec

ADVICE = "use a stronger judge, or --no-judge-check"
NO_USABLE = f"every cell would await a human — {ADVICE}"
DISAGREES = f"every cell's verdict would rest on it — {ADVICE}"


@dataclass(frozen=True)
class Try:
    """One call on one calibration answer: whether it agreed, was usable, got a reply, and if not why."""

    usable: bool
    failed_call: bool
    agreed: bool
    problem: str | None  # the disagreement, the unusable reply's reason or the failed call's error


@dataclass(frozen=True)
class JudgeCheck:
    """What one judge gave on the calibration answers."""

    judge: str
    tried: int
    usable: int
    agreeing: int
    needed: int  # agreeing answers the check needs: min_agreement of those tried, rounded up
    failed_calls: int
    first_problem: str | None  # the first answer's (in the set's order) that did not agree, "ID: why"

    @property
    def passed(self) -> bool:
        return self.tried > 0 and self.agreeing >= self.needed

    def line(self) -> str:
        if self.passed:
            return (f"judge check: {self.judge} agreed with the known verdict on {self.agreeing} of {self.tried} "
                    f"calibration answers ({self.needed} needed)")
        why = f" ({self.first_problem[:200]})" if self.first_problem else ""
        if self.failed_calls == self.tried:
            return (f"judge {self.judge}: {self.failed_calls} of {self.tried} calls on the calibration answers "
                    f"failed{why}; {NO_USABLE}")
        if self.usable == 0:
            return (f"judge {self.judge} gave 0 of {self.tried} usable judgements on the calibration answers{why}; "
                    f"{NO_USABLE}")
        first = f"; {self.first_problem[:200]}" if self.first_problem else ""
        return (f"judge {self.judge} agreed with the known verdict on {self.agreeing} of {self.tried} calibration "
                f"answers ({self.needed} needed; {self.usable} usable{first}); {DISAGREES}")


def needed(min_agreement: float, tried: int) -> int:
    """Agreeing answers needed: min_agreement of those tried, rounded up (0.75 of 4: 3; of 5: 4)."""
    return math.ceil(min_agreement * tried)


def _try(judge: ModelSpec, judge_prompt: str, pass_rule: PassRule, item: CalibrationAnswer) -> Try:
    fixture, answer = item.fixture, item.answer
    messages = build_judge_messages(fixture, answer.text, judge_prompt, [])
    call = judge_call(judge, messages, f"judge-check|{answer.id}", judgement_response(fixture))
    parsed = read_call(call, fixture, answer.text)
    if parsed is None:
        return Try(False, True, False, f"{answer.id}: call failed: {call.error}")
    if not isinstance(parsed, Judgement):
        return Try(False, False, False, f"{answer.id}: {parsed.reason}")
    judged = verdict_of(parsed, fixture, pass_rule)
    if judged == item.known:
        return Try(True, False, True, None)
    return Try(True, False, False, f"{answer.id}: judged {judged.value}, known {item.known.value}")


def check_judge(judge: ModelSpec, judge_prompt: str, answers: list[CalibrationAnswer],
                pass_rule: PassRule | None = None,
                min_agreement: float = DEFAULT_MIN_AGREEMENT) -> JudgeCheck:
    rule = pass_rule or PassRule()
    at_once = max(1, min(len(answers), judge.limits.max_in_flight or len(answers)))
    with ThreadPoolExecutor(at_once, thread_name_prefix="judge-check") as pool:
        tries = list(pool.map(lambda a: _try(judge, judge_prompt, rule, a), answers))
    return JudgeCheck(judge.display, len(tries), sum(t.usable for t in tries), sum(t.agreed for t in tries),
                      needed(min_agreement, len(tries)), sum(t.failed_call for t in tries),
                      next((t.problem for t in tries if t.problem), None))


def judges_to_check(spec: SweepSpec) -> list[ModelSpec]:
    settings = spec.judge_check_settings()
    return [j for j in spec.judges if settings.applies_to(j)]


def run_judge_check(spec: SweepSpec, judge_prompt: str,
                    on_check: Callable[[JudgeCheck], None] | None = None) -> list[JudgeCheck]:
    """Check every judge the spec covers (on_check sees each that passed); raise JudgeCheckFailed (the
    first failing judge's line) when one did not agree often enough with the known verdicts."""
    judges = judges_to_check(spec)
    if not judges:
        return []
    settings = spec.judge_check_settings()
    answers = calibration_answers(settings.answers, spec.pass_rule)
    checks = list(_each(judges, judge_prompt, answers, spec.pass_rule, settings.min_agreement, on_check))
    failed = [c for c in checks if not c.passed]
    if failed:
        raise JudgeCheckFailed(failed[0].line())
    return checks


def _each(judges: list[ModelSpec], prompt: str, answers: list[CalibrationAnswer], pass_rule: PassRule,
          min_agreement: float, on_check: Callable[[JudgeCheck], None] | None) -> Iterator[JudgeCheck]:
    for judge in judges:
        check = check_judge(judge, prompt, answers, pass_rule, min_agreement)
        if on_check is not None and check.passed:  # a failed one is the error's line
            on_check(check)
        yield check
