"""The judge check before a sweep: each judge the spec's `judge_check:` covers (by default every judge that
is not simulated) is tried on a few calibration answers (the simulator's canned answers to the packaged
fixtures, the same ones `afpbench calibrate` uses), with the sweep's judge prompt and the judge's
structured output, before any cell is written. A judge that gives no usable judgement would leave every
cell awaiting a human (GRADER_DISPUTE) after the whole sweep has run; the check stops `run` (and `plan`)
with one line naming the judge and why instead (JudgeCheckFailed, exit 2).

A few calls: one try per answer (no parse retries: the check is a floor, not a measure), answers taken one
fixture at a time so they differ, sent at once up to the judge's `max_in_flight` (a CPU judge takes a
minute or two per call: four in a row would be most of ten minutes). A usable
judgement is what the scorer would use: the reply read by scoring/judge_reply.py:read_reply (not cut at
max_tokens, strict JSON, quotes found in the answer). Calls that fail (unreachable, refused, 5xx) count
apart: when every call failed the line says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import zip_longest

from afpbench.fixtures.loader import load_fixtures
from afpbench.fixtures.schema import Fixture
from afpbench.scoring.judge import Judgement, build_judge_messages
from afpbench.workers.errors import JudgeCheckFailed
from afpbench.workers.grading.judges import judge_call, judgement_response, read_call
from afpbench.workers.sim.canned import CannedResponse, load_canned
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec

ADVICE = "every cell would await a human — use a stronger judge, or --no-judge-check"


@dataclass(frozen=True)
class JudgeCheck:
    """What one judge gave on the calibration answers."""

    judge: str
    tried: int
    usable: int
    failed_calls: int
    first_problem: str | None  # the first unusable reply's reason, or the first failed call's error

    @property
    def passed(self) -> bool:
        return self.usable > 0

    def line(self) -> str:
        if self.passed:
            return f"judge check: {self.judge} gave a usable judgement ({self.usable} of {self.tried} tried)"
        why = f" ({self.first_problem[:200]})" if self.first_problem else ""
        if self.failed_calls == self.tried:
            return (f"judge {self.judge}: {self.failed_calls} of {self.tried} calls on the calibration answers "
                    f"failed{why}; {ADVICE}")
        return (f"judge {self.judge} gave 0 of {self.tried} usable judgements on the calibration answers{why}; "
                f"{ADVICE}")


def calibration_answers(count: int) -> list[tuple[Fixture, CannedResponse]]:
    """`count` canned answers with their fixtures, one fixture at a time in id order (the first answer of
    each fixture, then the second, ...)."""
    fixtures = {f.id: f for f in load_fixtures(None)}
    canned = load_canned(None, {f.id: f.fatal_ids() for f in fixtures.values()})
    per_fixture = [[(fixtures[fid], r) for r in canned[fid]] for fid in sorted(canned) if fid in fixtures]
    ordered = [a for layer in zip_longest(*per_fixture) for a in layer if a is not None]
    return ordered[:count]


def _try(judge: ModelSpec, judge_prompt: str, fixture: Fixture,
         answer: CannedResponse) -> tuple[bool, bool, str | None]:
    """(usable, call failed, the problem) of one call on one answer."""
    messages = build_judge_messages(fixture, answer.text, judge_prompt, [])
    call = judge_call(judge, messages, f"judge-check|{answer.id}", judgement_response(fixture))
    parsed = read_call(call, fixture, answer.text)
    if parsed is None:
        return False, True, call.error
    return (True, False, None) if isinstance(parsed, Judgement) else (False, False, parsed.reason)


def check_judge(judge: ModelSpec, judge_prompt: str, answers: list[tuple[Fixture, CannedResponse]]) -> JudgeCheck:
    at_once = max(1, min(len(answers), judge.limits.max_in_flight or len(answers)))
    with ThreadPoolExecutor(at_once, thread_name_prefix="judge-check") as pool:
        tries = list(pool.map(lambda a: _try(judge, judge_prompt, *a), answers))
    problem = next((p for _, _, p in tries if p), None)
    return JudgeCheck(judge.display, len(tries), sum(u for u, _, _ in tries), sum(f for _, f, _ in tries), problem)


def judges_to_check(spec: SweepSpec) -> list[ModelSpec]:
    settings = spec.judge_check_settings()
    return [j for j in spec.judges if settings.applies_to(j)]


def run_judge_check(spec: SweepSpec, judge_prompt: str,
                    on_check: Callable[[JudgeCheck], None] | None = None) -> list[JudgeCheck]:
    """Check every judge the spec covers (on_check sees each that passed); raise JudgeCheckFailed (the
    first failing judge's line) when one gave no usable judgement."""
    judges = judges_to_check(spec)
    if not judges:
        return []
    answers = calibration_answers(spec.judge_check_settings().answers)
    checks = list(_each(judges, judge_prompt, answers, on_check))
    failed = [c for c in checks if not c.passed]
    if failed:
        raise JudgeCheckFailed(failed[0].line())
    return checks


def _each(judges: list[ModelSpec], prompt: str, answers: list[tuple[Fixture, CannedResponse]],
          on_check: Callable[[JudgeCheck], None] | None) -> Iterator[JudgeCheck]:
    for judge in judges:
        check = check_judge(judge, prompt, answers)
        if on_check is not None and check.passed:  # a failed one is the error's line
            on_check(check)
        yield check
