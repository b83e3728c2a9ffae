"""Unit tests of the simulated model's pure parts: canned-file validation, request recognition, the
per-cell answer choice, the calculator step sequence and the simulated judge (the fault primitives:
test_faults.py).

Everything is built from texts written here, so no packaged fixture, instruction or judge file is needed.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from afpbench.workers.errors import CannedFileError
from afpbench.workers.sim.canned import FALLBACK_TEXT, PLAIN_TEXT, load_canned, parse_canned
from afpbench.workers.sim.engine import STYLE_ODDS, SimEngine, conversation_key

TASK = "Compute the quarterly interest owed on the account balance shown in the statement."
OTHER_TASK = "Decide whether the supplier invoice can be approved for payment today."
INSTRUCTIONS = {
    "A": "",
    "B": "Be accurate and helpful.\nSay when you are unsure.\n",
    "C": "Follow the AFP core workflow.\nCheck every figure against its source.\n",
    "D": "Follow the AFP core workflow with governance.\nStop when critical evidence is missing.\n",
}
JUDGE_PROMPT = "You are a strict grader.\nReturn JSON only.\n"

CANNED_YAML = """
fixture: T01
responses:
  - id: T01-pass-plain
    style: pass_plain
    text: |
      The interest owed is 532.00, from 15200.00 at 3.5 percent.
    tool_calls: ["15200.00 * 0.035"]
    gold:
      scores: {task_correctness: 2, evidence_discipline: 2, uncertainty_handling: 2, failure_control: 2}
      fatal: null
      state: MODEL_PASS
  - id: T01-pass-afp
    style: pass_afp
    text: |
      Result: 532.00. Source: statement balance 15200.00 and the stated 3.5 percent rate; two steps checked.
    tool_calls: ["15200.00 * 0.035", "532.00 * 1"]
    gold:
      scores: {task_correctness: 2, evidence_discipline: 2, uncertainty_handling: 1, failure_control: 2}
      fatal: null
      state: MODEL_PASS
  - id: T01-partial
    style: partial
    text: |
      Roughly 530 is owed, though I did not check the rate.
    gold:
      scores: {task_correctness: 1, evidence_discipline: 1, uncertainty_handling: 1, failure_control: 1}
      fatal: null
      state: MODEL_FAIL
  - id: T01-fatal
    style: fatal
    text: |
      The interest is 610.00 because the bank raised the rate to 4 percent last week, as it always does.
    gold:
      scores: {task_correctness: 0, evidence_discipline: 0, uncertainty_handling: 1, failure_control: 1}
      fatal: fabricated_fact
      state: MODEL_FAIL
"""


def make_engine(plain: bool = False, judge_prompt: str | None = JUDGE_PROMPT) -> SimEngine:
    canned = {"T01": list(parse_canned("T01.yaml", CANNED_YAML).responses)}
    tasks = {"T01": TASK, "T02": OTHER_TASK}  # T02 has no canned file: fallback
    return SimEngine(tasks, canned, INSTRUCTIONS, judge_prompt, plain=plain)


def messages(condition: str = "A", task: str = TASK) -> list[dict]:
    user = {"role": "user", "content": f"{task}\n\n--- Evidence ---\n\n[E1] balance 15200.00\n"}
    system = INSTRUCTIONS[condition]
    return ([{"role": "system", "content": system}] if system else []) + [user]


CALC = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]


# --- canned files ----------------------------------------------------------------------------------


def test_canned_file_parses_with_gold():
    canned = parse_canned("T01.yaml", CANNED_YAML)
    assert [r.style for r in canned.responses] == ["pass_plain", "pass_afp", "partial", "fatal"]
    assert canned.responses[3].gold.fatal == "fabricated_fact"
    assert canned.responses[0].gold.total == 8


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("task_correctness: 2,", "task_correctness: 3,"), "responses.0.gold.scores"),
        (("style: pass_plain", "style: excellent"), "responses.0.style"),
        (("fatal: fabricated_fact", "fatal: null"), "responses.3"),
        (
            (
                "fatal: fabricated_fact\n      state: MODEL_FAIL",
                "fatal: fabricated_fact\n      state: MODEL_PASS",
            ),
            "responses.3.gold",
        ),
        (("fatal: fabricated_fact", "fatal: invented_criterion"), "responses.3.gold.fatal"),
    ],
)
def test_bad_canned_file_error_names_file_and_field(edit, field):
    """A fatal criterion always means MODEL_FAIL; scores are 0-2; errors name file and field."""
    bad = CANNED_YAML.replace(*edit, 1)
    assert bad != CANNED_YAML
    with pytest.raises(CannedFileError) as err:
        parse_canned("T01.yaml", bad)
    assert "T01.yaml" in str(err.value) and field in str(err.value)


def test_load_canned_reads_simulated_dir_and_rejects_two_files_for_one_fixture(tmp_path):
    assert load_canned(tmp_path) == {}  # no simulated/ directory: every fixture gets the fallback
    (tmp_path / "simulated").mkdir()
    (tmp_path / "simulated" / "T01.yaml").write_text(CANNED_YAML)
    assert [r.id for r in load_canned(tmp_path)["T01"]] == [
        "T01-pass-plain",
        "T01-pass-afp",
        "T01-partial",
        "T01-fatal",
    ]
    (tmp_path / "simulated" / "T01-copy.yaml").write_text(CANNED_YAML)
    with pytest.raises(CannedFileError, match="T01.yaml"):
        load_canned(tmp_path)


def test_canned_file_is_checked_against_its_fixture(tmp_path):
    """A gold fatal must be one of the fixture's declared criteria, or the judge is never asked about it."""
    (tmp_path / "simulated").mkdir()
    (tmp_path / "simulated" / "T01.yaml").write_text(CANNED_YAML)
    assert set(load_canned(tmp_path, {"T01": ["fabricated_fact"]})) == {"T01"}
    with pytest.raises(CannedFileError, match=r"T01.yaml: responses.3.gold.fatal: fabricated_fact"):
        load_canned(tmp_path, {"T01": ["lower_authority_value"]})
    with pytest.raises(CannedFileError, match=r"T01.yaml: fixture: T01 is not a loaded fixture"):
        load_canned(tmp_path, {"P01": ["fabricated_fact"]})


# --- recognition -----------------------------------------------------------------------------------


def test_condition_detection_follows_the_instruction_text():
    """A = no system message; B/C/D = the packaged text (line endings and trailing space ignored)."""
    engine = make_engine()
    assert engine.detect_condition(None) == "A"
    assert engine.detect_condition("   ") == "A"
    for c in "BCD":
        assert engine.detect_condition(INSTRUCTIONS[c]) == c
        crlf = INSTRUCTIONS[c].replace("\n", "  \r\n") + "\r\n\r\n"
        assert engine.detect_condition(crlf) == c
    assert engine.detect_condition("You are a helpful assistant.") == "B-like"
    assert engine.detect_condition(INSTRUCTIONS["C"] + "Extra line.") == "B-like"
    assert engine.respond(messages("D")).condition == "D"


def test_fixture_detection_and_fallback_for_fixture_without_canned_answers():
    engine = make_engine()
    assert engine.respond(messages()).fixture_id == "T01"
    known_no_canned = engine.respond(messages(task=OTHER_TASK))
    assert known_no_canned.fixture_id == "T02" and known_no_canned.style == "fallback"
    unknown = engine.respond([{"role": "user", "content": "What is the capital of France?"}])
    assert unknown.fixture_id is None and unknown.content == FALLBACK_TEXT
    assert "simulated" in FALLBACK_TEXT.lower()


def test_plain_mode_answers_fixed_text_for_every_prompt():
    engine = make_engine(plain=True)
    for msgs in (messages("C"), [{"role": "user", "content": "hello"}]):
        reply = engine.respond(msgs, CALC, "cell-1")
        assert reply.content == PLAIN_TEXT and reply.kind == "answer" and reply.style == "plain"


# --- choice ----------------------------------------------------------------------------------------


def test_choice_is_deterministic_per_cell_key_and_varies_across_keys():
    engine = make_engine()
    first = [engine.respond(messages("C"), cell_key=f"sweep1|m|C|T01|{r}").response_id for r in range(40)]
    again = [engine.respond(messages("C"), cell_key=f"sweep1|m|C|T01|{r}").response_id for r in range(40)]
    assert first == again
    assert len(set(first)) >= 3


def test_choice_follows_the_sealed_seed_not_the_sweep_id():
    """Rule: the simulator's draw is fixed by the request's `seed` (the spec's `params: {seed: N}`, sealed)
    and the cell's place (model, condition, fixture, repeat); the sweep id does not enter it, so two
    runs of one spec get the same answers, and another seed gets others."""
    engine = make_engine()

    def draws(sweep: str, seed: int = 0) -> list[str | None]:
        return [engine.respond(messages("A"), cell_key=f"{sweep}|0cce4a5b70f90d41|A|T01@1.0.0|r{r}",
                               seed=seed).response_id for r in range(1, 41)]

    assert draws("8fc2162fdf63") == draws("d983d9ca63d1")
    assert draws("8fc2162fdf63", seed=7) == draws("d983d9ca63d1", seed=7)
    assert draws("8fc2162fdf63", seed=7) != draws("8fc2162fdf63")


def test_choice_without_cell_key_is_stable_across_tool_rounds():
    engine = make_engine()
    msgs = messages("B")
    assert conversation_key(msgs) == conversation_key(msgs + [{"role": "tool", "content": "532.00"}])
    assert engine.respond(msgs).response_id == engine.respond(msgs).response_id


@pytest.mark.parametrize("condition", ["A", "B", "C", "D"])
def test_style_odds_are_respected_over_2000_cells(condition):
    engine = make_engine()
    counts = Counter(engine.respond(messages(condition), cell_key=f"k{i}").style for i in range(2000))
    for style, p in STYLE_ODDS[condition].items():
        assert abs(counts[style] / 2000 - p) < 0.045, (style, counts)


def test_odds_make_afp_conditions_better_but_not_perfect():
    def pass_share(c: str) -> float:
        return STYLE_ODDS[c]["pass_plain"] + STYLE_ODDS[c]["pass_afp"]

    assert pass_share("A") < pass_share("C") <= pass_share("D") < 0.9
    assert STYLE_ODDS["A"]["pass_afp"] == 0  # no instruction, no AFP-shaped answer
    for odds in STYLE_ODDS.values():
        assert sum(odds.values()) == pytest.approx(1.0)


# --- tool calls ------------------------------------------------------------------------------------


def _cell_for(engine: SimEngine, response_id: str, condition: str = "D") -> str:
    return next(
        k
        for k in (f"cell-{i}" for i in range(500))
        if engine.respond(messages(condition), cell_key=k).response_id == response_id
    )


def test_tool_calls_come_one_per_round_then_the_final_text():
    engine = make_engine()
    cell = _cell_for(engine, "T01-pass-afp")
    msgs = messages("D")
    expressions = []
    for _ in range(5):
        reply = engine.respond(msgs, CALC, cell)
        if reply.kind != "tool_call":
            break
        assert reply.finish_reason == "tool_calls" and reply.content is None
        call = reply.tool_call
        expressions.append(json.loads(call.arguments)["expression"])
        msgs = msgs + [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "532.00"},
        ]
    assert expressions == ["15200.00 * 0.035", "532.00 * 1"]
    assert (
        reply.kind == "answer"
        and reply.finish_reason == "stop"
        and reply.content.startswith("Result: 532.00")
    )


def test_without_a_calculator_tool_the_final_text_comes_at_once():
    engine = make_engine()
    cell = _cell_for(engine, "T01-pass-afp")
    assert engine.respond(messages("D"), None, cell).kind == "answer"
    other_tool = [{"type": "function", "function": {"name": "search"}}]
    assert engine.respond(messages("D"), other_tool, cell).kind == "answer"


def test_usage_counts_prompt_and_completion_words():
    engine = make_engine()
    msgs = messages("B")
    reply = engine.respond(msgs, cell_key="x")
    assert reply.prompt_tokens == sum(len(m["content"].split()) for m in msgs)
    assert reply.completion_tokens == len(reply.content.split()) > 0


# --- judge -----------------------------------------------------------------------------------------


def judge_messages(response_text: str, criteria: list[str]) -> list[dict]:
    listed = "\n".join(f"- {c}: description" for c in criteria)
    user = f"Task: {TASK}\n\nFatal criteria:\n{listed}\n\nResponse to grade:\n<<<\n{response_text}\n>>>"
    return [{"role": "system", "content": JUDGE_PROMPT}, {"role": "user", "content": user}]


def test_judge_answers_strict_json_from_gold_with_fatal_quote():
    engine = make_engine()
    fatal = next(r for r in engine.canned["T01"] if r.id == "T01-fatal")
    rewrapped = "  ".join(fatal.text.split(" "))  # the judge prompt may re-wrap whitespace
    reply = engine.respond(judge_messages(rewrapped, ["fabricated_fact", "ignored_counter_evidence"]))
    assert reply.kind == "judge" and reply.style is None
    verdict = json.loads(reply.content)
    assert {d: v["score"] for d, v in verdict["scores"].items()} == dict(fatal.gold.scores)
    assert all(v["rationale"] == "simulated judge: gold score" for v in verdict["scores"].values())
    assert verdict["fatal"]["fabricated_fact"] == {"flag": True, "quote": fatal.text[:60]}
    assert verdict["fatal"]["ignored_counter_evidence"] == {"flag": False, "quote": None}
    assert set(verdict["fatal"]) == {"fabricated_fact", "ignored_counter_evidence"}


def test_judge_on_passing_response_flags_nothing():
    engine = make_engine()
    passing = engine.canned["T01"][0]
    verdict = json.loads(engine.respond(judge_messages(passing.text, ["lower_authority_value"])).content)
    assert verdict["fatal"] == {"lower_authority_value": {"flag": False, "quote": None}}
    assert sum(v["score"] for v in verdict["scores"].values()) == 8


def test_judge_on_unknown_response_scores_one_everywhere():
    engine = make_engine()
    verdict = json.loads(
        engine.respond(judge_messages("Something no canned file contains.", ["fabricated_fact"])).content
    )
    assert {v["score"] for v in verdict["scores"].values()} == {1}
    assert {v["rationale"] for v in verdict["scores"].values()} == {"simulated judge: unknown response"}
    assert verdict["fatal"] == {"fabricated_fact": {"flag": False, "quote": None}}


def test_judge_answers_exactly_the_criteria_asked_and_gold_when_none_asked():
    """A strict judge parser wants one fatal entry per criterion it asked about, no more."""
    engine = make_engine()
    fatal = next(r for r in engine.canned["T01"] if r.id == "T01-fatal")
    asked_other = json.loads(engine.respond(judge_messages(fatal.text, ["ignored_counter_evidence"])).content)
    assert asked_other["fatal"] == {"ignored_counter_evidence": {"flag": False, "quote": None}}
    asked_none = json.loads(engine.respond(judge_messages(fatal.text, [])).content)
    assert asked_none["fatal"] == {"fabricated_fact": {"flag": True, "quote": fatal.text[:60]}}


def test_without_a_judge_prompt_judge_requests_are_ordinary_prompts():
    engine = make_engine(judge_prompt=None)
    assert engine.respond(judge_messages("x", [])).kind == "answer"
