"""A judge reply read as a judgement: truncation named as such (not a JSON error), repetition loops named,
and a retry that differs from the try it repeats. Texts written for these tests are SIMULATED; the real
shapes recorded from a local model are in tests/unit/scoring/test_realmodel_shapes.py."""

import json

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.judge import Judgement, JudgementError
from afpbench.scoring.judge_reply import TRUNCATED, JudgeReply, read_reply, retry_messages
from afpbench.scoring.repetition import repetition_loop

RESPONSE = "SIMULATED: the refund request is logged; a human must approve it before it is issued."
FATAL_IDS = ["claimed_unexecuted_action", "fabricated_key_fact"]


def judgement(flagged: dict[str, str] | None = None) -> str:
    flagged = flagged or {}
    return json.dumps({
        "scores": {d: {"score": 2, "rationale": f"simulated rationale for {d}"} for d in DIMENSIONS},
        "fatal": {c: {"flag": c in flagged, "quote": flagged.get(c)} for c in FATAL_IDS},
    })


def test_a_reply_cut_at_max_tokens_says_truncated_with_the_token_count_not_a_json_error():
    cut = judgement()[:120]
    error = read_reply(JudgeReply(cut, "length", 512), FATAL_IDS, RESPONSE)
    assert isinstance(error, JudgementError)
    assert error.reason == f"{TRUNCATED} (512 tokens)"
    assert "JSON" not in error.reason


def test_a_truncated_reply_is_never_parsed_even_when_its_text_happens_to_be_valid_json():
    error = read_reply(JudgeReply(judgement(), "length", 300), FATAL_IDS, RESPONSE)
    assert isinstance(error, JudgementError) and error.reason.startswith(TRUNCATED)


def test_a_truncated_reply_ending_in_a_loop_names_the_loop():
    looping = judgement()[:80] + ' "the answer is correct.' * 40 + ' "the ans'
    error = read_reply(JudgeReply(looping, "length", 900), FATAL_IDS, RESPONSE)
    assert isinstance(error, JudgementError)
    assert error.reason.startswith(f"{TRUNCATED} (900 tokens); repetition loop: ")
    assert "the answer is correct." in error.reason


def test_a_complete_reply_parses_as_before():
    assert isinstance(read_reply(JudgeReply(judgement(), "stop", 200), FATAL_IDS, RESPONSE), Judgement)


def test_a_loop_is_a_long_repeat_with_words_not_layout_or_ordinary_prose():
    assert repetition_loop("| a | b |\n|---|---|\n" + "-" * 120) is None
    assert repetition_loop("The vendor meets two requirements. The third is unresolved.") is None
    loop = repetition_loop("Summary: " + "fatal: none. " * 12 + "fat")
    assert loop is not None and loop.repeats > 12 and "fatal: none." in loop.unit


def test_a_retry_feeds_the_reason_back_and_records_that_change():
    messages = [{"role": "system", "content": "judge"}, {"role": "user", "content": "materials"}]
    error = JudgementError("flagged fatal quote not found in the response: ['claimed_unexecuted_action']",
                           ["claimed_unexecuted_action"])
    retried, change = retry_messages(messages, error)
    assert retried[0] == messages[0] and messages[1]["content"] == "materials"  # the original is untouched
    assert retried[1]["content"].startswith("materials\n")
    assert error.reason in retried[1]["content"] and "RESPONSE TO JUDGE" in retried[1]["content"]
    assert change == f"parse error fed back (try 2): {error.reason}"
    again, _ = retry_messages(messages, JudgementError(f"{TRUNCATED} (900 tokens)"))
    assert again[1]["content"].count("could not be used") == 1  # feedback replaces, never piles up
    assert "do not repeat yourself" in again[1]["content"]


def test_each_retry_is_a_different_request_even_for_the_same_reason():
    """Judges: at temperature 0 an identical request returns identical text (a real llama.cpp judge gave
    the same unusable reply to tries 2 and 3, each fed the same reason), so every try's request differs."""
    messages = [{"role": "system", "content": "judge"}, {"role": "user", "content": "materials"}]
    error = JudgementError("flagged fatal quote not found in the response: ['followed_injection']",
                           ["followed_injection"])
    second, change2 = retry_messages(messages, error, 2)
    third, change3 = retry_messages(messages, error, 3)
    assert second != third and change2 != change3
    assert "Try 3." in third[1]["content"] and third[1]["content"].count("could not be used") == 1
