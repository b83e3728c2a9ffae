"""The judge's structured request against a real llama.cpp server (the `local_model_server` fixture).

Rules checked, on real judgements nobody wrote:
- the request carries the judgement's JSON Schema as `response_format` with the length caps (llama.cpp
  enforces minLength / maxLength in its grammar), and >= 90 % of real judgements parse with it;
- a judgement cut at max_tokens is "truncated at max_tokens (N tokens)", never a JSON error;
- at temperature 0 an identical request returns identical text, so a retry must change the request:
  the retry feeds the parse error back, and its request differs from the first.
The responses judged are real answers recorded from Qwen2.5-Coder via llama.cpp (tests/data/realmodel/).
"""

from __future__ import annotations

import json

import pytest

from afpbench.fixtures.loader import load_fixture
from afpbench.reference.loader import load_judge_prompt
from afpbench.scoring.judge import JudgementError, build_judge_messages, parse_judgement, verify_quotes
from afpbench.scoring.judge_reply import TRUNCATED, JudgeReply, read_reply, retry_messages
from afpbench.workers.grading.judges import judge_call, judgement_response
from afpbench.workers.sweeps.spec import ModelSpec
from tests.conftest import REPO

pytestmark = pytest.mark.realmodel

RECORDED = REPO / "tests" / "data" / "realmodel"
PARSE_RATE_FLOOR = 0.9


def recorded_answer(fixture_id: str, condition: str) -> dict:
    answers = json.loads((RECORDED / "answers.json").read_text(encoding="utf-8"))["answers"]
    return next(a for a in answers if a["fixture"] == fixture_id and a["condition"] == condition)


# Judged in this order; later tests reuse the first one's messages, so the server's prompt cache serves them.
JUDGED = [("P04", "A", False), ("P08", "D", False), ("P04", "A", True)]


def judge_spec(server, **params) -> ModelSpec:
    return ModelSpec(provider="openai-compatible", model=server.model_name, base_url=server.base_url,
                     params={"temperature": 0, **params}, timeout_s=600)


def test_structured_judgements_from_the_real_server_parse(local_model_server):
    """A handful of real judgements over recorded answers (original and swapped order): >= 90 % parse
    with the schema; a quote check failure is counted apart (a judge error, asked again in a sweep)."""
    judge = judge_spec(local_model_server)
    prompt = load_judge_prompt()
    tries = []
    for fixture_id, condition, swapped in JUDGED:
        answer = recorded_answer(fixture_id, condition)
        fixture = load_fixture(fixture_id)
        messages = build_judge_messages(fixture, answer["text"], prompt, [], swapped=swapped)
        wanted = judgement_response(fixture, swapped)
        call = judge_call(judge, messages, f"realmodel|{fixture.id}", wanted)
        assert call.error is None, call.error
        schema = call.request_sent["json"]["response_format"]["json_schema"]["schema"]
        rationale = schema["properties"]["scores"]["properties"]["task_correctness"]["properties"]["rationale"]
        assert rationale["maxLength"] > 0 and rationale["minLength"] == 1  # the caps are sent as given
        parsed = parse_judgement(call.text or "", fixture.fatal_ids())
        quoted = verify_quotes(parsed, answer["text"]) if not isinstance(parsed, JudgementError) else parsed
        tries.append((call.finish_reason, call.usage.output_tokens, parsed, quoted))
    parsed_ok = sum(not isinstance(p, JudgementError) for _, _, p, _ in tries)
    reasons = [(f, n, p.reason) for f, n, p, _ in tries if isinstance(p, JudgementError)]
    unquoted = [q.reason for _, _, _, q in tries if isinstance(q, JudgementError)]
    print(f"\njudge parse rate with the schema: {parsed_ok}/{len(tries)}; quote check failures: {unquoted}")
    assert parsed_ok / len(tries) >= PARSE_RATE_FLOOR, reasons


def test_a_judgement_cut_at_max_tokens_is_named_truncated(local_model_server):
    answer = recorded_answer("P04", "A")
    fixture = load_fixture("P04")
    messages = build_judge_messages(fixture, answer["text"], load_judge_prompt(), [])
    call = judge_call(judge_spec(local_model_server, max_tokens=24), messages, "realmodel|cut",
                      judgement_response(fixture))
    assert call.finish_reason == "length", call
    error = read_reply(JudgeReply(call.text or "", call.finish_reason, call.usage.output_tokens),
                       fixture.fatal_ids(), answer["text"])
    assert isinstance(error, JudgementError)
    assert error.reason.startswith(f"{TRUNCATED} ({call.usage.output_tokens} tokens)"), error.reason


def test_an_identical_request_repeats_itself_so_a_retry_changes_the_request(local_model_server):
    answer = recorded_answer("P04", "A")
    fixture = load_fixture("P04")
    messages = build_judge_messages(fixture, answer["text"], load_judge_prompt(), [])
    judge = judge_spec(local_model_server, max_tokens=48)  # short: the point is sameness, not a verdict
    first = judge_call(judge, messages, "realmodel|same", None)
    second = judge_call(judge, messages, "realmodel|same", None)
    assert first.text == second.text  # why a retry that changes nothing cannot help
    retried, change = retry_messages(messages, JudgementError(f"{TRUNCATED} (48 tokens)"))
    assert change.startswith("parse error fed back (try 2): ")
    third = judge_call(judge, retried, "realmodel|same", None)
    assert third.request_sent != first.request_sent
