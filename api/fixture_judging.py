"""The judge part of `afpbench fixtures check`: the judges asked the way the scorer asks them, without
a sweep or a database.

Each judge is called through workers/grading/judges.py `call_judge` (same adapters, same limiter) with
the blind judge messages; a judgement that cannot be used (a parse error, or a flagged fatal whose quote
is not in the answer) is a judge error and is asked again, up to the default `max_parse_retries`; the
verdict comes from scoring/verdict.py `decide` with the default pass and dispute rules, and a dispute
leads to the blind order-swapped re-judge, exactly as in workers/grading/scorer.py. Every try is
reported (judge, round, error or flagged criteria), nothing is stored.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.answer_check import AnswerCheck
from afpbench.scoring.judge import Judgement, JudgementError, build_judge_messages
from afpbench.scoring.judge_reply import JudgeReply, read_reply, retry_messages
from afpbench.scoring.validity import ValidityReport
from afpbench.scoring.verdict import DisputeRule, PassRule, decide


def _round(
    fx: Fixture, answer: str, judges: list, prompt: str, shown: list[str], number: int, retries: int,
    tries: list[dict[str, Any]],
) -> tuple[list[Judgement], int]:
    from afpbench.workers.errors import JudgeUnavailable
    from afpbench.workers.grading.judges import judge_call, judgement_response

    messages = build_judge_messages(fx, answer, prompt, shown, swapped=number == 2)
    wanted = judgement_response(fx, swapped=number == 2)
    usable: list[Judgement] = []
    failures = 0
    for judge in judges:
        parsed: Judgement | JudgementError | None = None
        sent, change = messages, None  # as in a sweep: a retry feeds the reason back (scoring/judge_reply.py)
        for attempt in range(1, retries + 2):
            call = judge_call(judge, sent, f"fixtures-check|{fx.key}|judge{number}", wanted)
            if call.error:
                tries.append({"judge": judge.display, "round": number, "error": f"judge call failed: {call.error}"})
                continue
            reply = JudgeReply(call.text or "", call.finish_reason, call.usage.output_tokens)
            parsed = read_reply(reply, fx.fatal_ids(), answer)
            if isinstance(parsed, Judgement):
                tries.append({"judge": judge.display, "round": number, "error": None, "retry_change": change,
                              "scores": parsed.scores, "flagged": parsed.flagged()})  # fmt: skip
                break
            tries.append({"judge": judge.display, "round": number, "error": parsed.reason, "retry_change": change})
            sent, change = retry_messages(messages, parsed, attempt + 1)
        if parsed is None:
            raise JudgeUnavailable(f"judge {judge.display} unavailable: every call failed")
        if isinstance(parsed, Judgement):
            usable.append(parsed)
        else:
            failures += 1
    return usable, failures


def judge_answer(
    fx: Fixture, check: AnswerCheck, validity: ValidityReport, options: list[str], base_url: str | None,
    api_key_env: str | None,
) -> dict[str, Any]:
    """Ask the judges named by `options` (PROVIDER:MODEL) about the answer; the verdict and every try."""
    from afpbench.api.cli_scoring import judge_from_option
    from afpbench.reference.loader import load_judge_prompt
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim
    from afpbench.workers.sweeps.spec import DisputeRuleSpec

    judges = [judge_from_option(o, base_url, api_key_env) for o in options]
    prompt = load_judge_prompt()
    retries = DisputeRuleSpec().max_parse_retries
    outcome = replace(check.outcome, proposed_fatal=check.proposals)  # the ladder's proposal too
    provenance = check.provenance or {}
    shown = list(provenance.get("untraceable", provenance.get("originated", [])))
    pass_rule, dispute_rule = PassRule(), DisputeRule()
    tries: list[dict[str, Any]] = []
    with ExitStack() as stack:
        if needs_local_sim(judges):
            start_local_sim(stack, get_settings())
        judgements: list[Judgement]
        judgements, failures = ([], 0)
        if validity.passed:
            judgements, failures = _round(fx, check.answer, judges, prompt, shown, 1, retries, tries)
        verdict = decide("answered", validity, outcome, judgements, failures, pass_rule=pass_rule,
                         dispute_rule=dispute_rule)
        if verdict.needs_rejudge:
            swapped, swapped_failures = _round(fx, check.answer, judges, prompt, shown, 2, retries, tries)
            verdict = decide("answered", validity, outcome, judgements, failures, swapped, swapped_failures,
                             pass_rule=pass_rule, dispute_rule=dispute_rule)
    return {
        "judges": [j.display for j in judges],
        "simulated": any(j.simulated for j in judges),
        "tries": tries,
        "verdict": {
            "state": verdict.state.value, "scores": verdict.scores, "total": verdict.total,
            "fatal_criterion": verdict.fatal_criterion, "rationale": verdict.rationale,
            "dispute_reasons": verdict.dispute_reasons,
        },  # fmt: skip
    }
