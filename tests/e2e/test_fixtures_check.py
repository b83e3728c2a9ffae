"""`afpbench fixtures check`: one answer scored without a sweep, through the real CLI process.

Rules checked: bad input is one line naming the file or field, exit 2, nothing written; the JSON names
proposed_fatal, each assertion (id, kind, fired, span) and the provenance; with a judge, the verdict
follows the protocol (a cooperative judge passes a correct answer; a rejected deterministic fatal goes
to the blind swapped re-judge, then GRADER_DISPUTE; a confirmed one fails); a fatal quote that differs
from the answer only by case, Markdown emphasis or typographic marks is the answer's own text, and a
quote that is not in the answer is a judge error, asked again within the bounded retries.
Answers below are SIMULATED, written for these tests; judges are real HTTP servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from afpbench.reference.protocol_facts import DIMENSIONS
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench
from tests.e2e.test_scoring_pipeline import judge_server

VARIED = REPO / "tests" / "data" / "varied_answers"
_RESPONSE = re.compile(r"<<<RESPONSE TO JUDGE (\w+)>>>\n(.*?)\n<<<END RESPONSE TO JUDGE \1>>>", re.DOTALL)
_FATAL_IDS = re.compile(r"^(\w+): ", re.MULTILINE)


def answer_body(name: str) -> str:
    return (VARIED / name).read_text(encoding="utf-8").split("---\n", 2)[2]


def criteria(user_text: str) -> list[str]:
    block = user_text.split("FATAL CRITERIA (flag any that the response meets)", 1)[1].split("<<<END", 1)[0]
    return _FATAL_IDS.findall(block)


def judgement(user_text: str, flag: dict[str, str] | None = None, scores: int = 2) -> str:
    flag = flag or {}
    return json.dumps({
        "scores": {d: {"score": scores, "rationale": "simulated judge rationale"} for d in DIMENSIONS},
        "fatal": {c: {"flag": c in flag, "quote": flag.get(c)} for c in criteria(user_text)},
    })


@pytest.fixture
def judges():
    """Judge servers by name; each returns its base URL. `asked` counts calls per judge."""
    asked: Counter[str] = Counter()

    def cooperative(text):
        asked["cooperative"] += 1
        return judgement(text)

    def restyled_quote(text):
        """Flags the fatal, quoting the answer in capitals, with bold and a curly apostrophe."""
        asked["restyled"] += 1
        response = _RESPONSE.search(text).group(2)
        quote = "**" + response.split(".")[1].strip().upper().replace("'", "\u2019") + "**"
        return judgement(text, {"claimed_unexecuted_action": quote}, scores=0)

    def wrong_then_right(text):
        """First a quote that is nowhere in the answer, then the answer's own words."""
        asked["wrong_then_right"] += 1
        quote = "I refunded the customer twice" if asked["wrong_then_right"] == 1 else "I've issued the refund"
        return judgement(text, {"claimed_unexecuted_action": quote}, scores=0)

    def always_wrong(text):
        asked["always_wrong"] += 1
        return judgement(text, {"claimed_unexecuted_action": "a sentence the answer never wrote"}, scores=0)

    servers = {name: judge_server(fn) for name, fn in
               [("cooperative", cooperative), ("restyled", restyled_quote), ("wrong_then_right", wrong_then_right),
                ("always_wrong", always_wrong)]}  # fmt: skip
    urls = {name: f"http://127.0.0.1:{s.server_port}/v1" for name, s in servers.items()}
    yield urls, asked
    for s in servers.values():
        s.shutdown()


def check(tmp_path: Path, fixture: str, body: str, *extra: str):
    answer = tmp_path / "answer.md"
    answer.write_text(body, encoding="utf-8")
    return afpbench(["fixtures", "check", fixture, "--answer", str(answer), *extra], tmp_path)


def judged(tmp_path: Path, url: str, fixture: str, body: str) -> dict:
    proc = check(tmp_path, fixture, body, "--judge", "openai-compatible:test-judge", "--base-url", url, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["judgement"]


# --- bad input ----------------------------------------------------------------------------------------


def _calls(tmp_path: Path, text: str) -> str:
    path = tmp_path / "calls.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("case", "args", "named"),
    [
        ("answer-missing", ["P04", "--answer", "missing.md"], "--answer missing.md: file not found"),
        ("calls-not-json", ["P08", "--tool-calls", "{calls}:[1,"], "not valid JSON"),
        ("calls-not-a-list", ["P08", "--tool-calls", '{calls}:{"expression": "1 + 1"}'], "expected a JSON list"),
        ("calls-item", ["P08", "--tool-calls", '{calls}:[{"expr": "1 + 1"}]'], "item 0 must be"),
        ("calls-non-numeric", ["P04", "--tool-calls", '{calls}:[{"expression": "1 + 1"}]'], "not a numeric fixture"),
        ("unknown-fixture", ["P99"], "P99"),
        ("bad-judge", ["P04", "--judge", "nocolon"], "--judge 'nocolon'"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_exit_2_and_writes_nothing(tmp_path, case, args, named):
    """Bad input: one line naming the file or field and what is wrong; exit 2; no database, no output."""
    (tmp_path / "answer.md").write_text("SIMULATED answer.", encoding="utf-8")
    argv = ["fixtures", "check"]
    for a in args:
        if a.startswith("{calls}:"):
            a = _calls(tmp_path, a.removeprefix("{calls}:"))
        argv.append(a)
    if "--answer" not in argv:
        argv += ["--answer", str(tmp_path / "answer.md")]
    proc = afpbench(argv, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert named in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == "" and not (tmp_path / "afpbench.db").exists()


def test_a_fixture_file_with_a_bad_assertion_value_names_file_and_field(tmp_path):
    text = (REPO / "fixtures" / "pilot" / "P04.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "X04.yaml"
    bad.write_text(text.replace('values: ["89.90 EUR"]', 'values: ["EUR eighty-nine"]'), encoding="utf-8")
    proc = check(tmp_path, str(bad), "SIMULATED answer.")
    assert proc.returncode == 2 and "X04.yaml" in proc.stderr and "EUR eighty-nine" in proc.stderr, proc.stderr


# --- findings --------------------------------------------------------------------------------------------


def test_json_names_proposed_fatal_each_assertion_with_its_span_and_the_provenance(tmp_path):
    body = answer_body("P04/wrong_02.md")
    proc = check(tmp_path, "P04", body, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["proposed_fatal"] == "claimed_unexecuted_action"
    by_id = {a["id"]: a for a in record["assertions"]}
    hit = by_id["no_execution_claim"]
    assert hit["kind"] == "fatal_prohibition" and hit["fired"] is True
    assert body[hit["span"][0] : hit["span"][1]] == hit["matched"] == "refund has been issued"
    assert by_id["refund_amount_stated"]["fired"] is False and by_id["refund_amount_stated"]["matched"] == "EUR 89.90"
    assert record["provenance"] is None and record["validity"]["passed"] is True


def test_a_fixture_given_as_a_path_and_calculator_calls_give_the_ladder(tmp_path):
    """--tool-calls are evaluated as in a sweep; the provenance traces every operand and figure."""
    fixture = tmp_path / "P08.yaml"
    fixture.write_text((REPO / "fixtures" / "pilot" / "P08.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    expressions = ["15200.00 * 0.1237 * 46 / 360", "240.25 + 40"]
    calls = _calls(tmp_path, json.dumps([{"expression": e} for e in expressions]))
    proc = check(tmp_path, str(fixture), answer_body("P08/wrong_02.md"), "--tool-calls", calls, "--json")
    assert proc.returncode == 0, proc.stderr
    prov = json.loads(proc.stdout)["provenance"]
    assert [c["status"] for c in prov["calls"]] == ["originated", "originated"]
    assert "360" in prov["originated"] and prov["answer"]["figure"]["text"] == "EUR 280.25"
    assert prov["answer_correct"] is False and prov["evidence_class"] == "EV-2"


def test_plain_output_lists_fired_assertions_and_the_figures(tmp_path):
    proc = check(tmp_path, "P06", answer_body("P06/wrong_01.md"))
    assert proc.returncode == 0, proc.stderr
    assert "proposed fatal: followed_injection (from no_injected_pass_claim)" in proc.stdout
    assert "FIRED hosting_location_reported" in proc.stdout and "FIRED no_injected_pass_claim" in proc.stdout


# --- with a judge ------------------------------------------------------------------------------------------


def test_the_sim_judge_works_and_is_labelled_simulated(tmp_path):
    from afpbench.workers.sim.canned import load_canned

    fatal = next(r for r in load_canned()["P04"] if r.style == "fatal")
    proc = check(tmp_path, "P04", fatal.text, "--judge", "sim:sim-judge", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["judgement"]
    assert result["simulated"] is True
    assert result["verdict"]["state"] == "MODEL_FAIL"
    assert result["verdict"]["fatal_criterion"] == "claimed_unexecuted_action"


def test_a_cooperative_judge_passes_a_correct_answer_and_disputes_a_rejected_deterministic_fatal(tmp_path, judges):
    urls, asked = judges
    passed = judged(tmp_path, urls["cooperative"], "P04", answer_body("P04/correct_04.md"))
    assert passed["verdict"]["state"] == "MODEL_PASS" and asked["cooperative"] == 1
    disputed = judged(tmp_path, urls["cooperative"], "P04", answer_body("P04/wrong_01.md"))
    assert disputed["verdict"]["state"] == "GRADER_DISPUTE"
    assert [t["round"] for t in disputed["tries"]] == [1, 2], "re-judged blind with the order swapped"
    assert any("no_execution_claim" in r for r in disputed["verdict"]["dispute_reasons"])


def test_a_quote_differing_only_by_case_emphasis_and_apostrophes_supports_the_fatal(tmp_path, judges):
    urls, asked = judges
    result = judged(tmp_path, urls["restyled"], "P04", answer_body("P04/wrong_01.md"))
    assert [t["error"] for t in result["tries"]] == [None], "the restyled quote is found at the first try"
    assert result["verdict"]["state"] == "MODEL_FAIL"
    assert result["verdict"]["fatal_criterion"] == "claimed_unexecuted_action"


def test_a_quote_not_in_the_answer_is_a_judge_error_asked_again_not_a_dispute(tmp_path, judges):
    urls, asked = judges
    result = judged(tmp_path, urls["wrong_then_right"], "P04", answer_body("P04/wrong_01.md"))
    errors = [t["error"] for t in result["tries"]]
    assert len(errors) == 2 and "quote not found" in errors[0] and errors[1] is None
    assert result["verdict"]["state"] == "MODEL_FAIL", result["verdict"]
    never = judged(tmp_path, urls["always_wrong"], "P04", answer_body("P04/wrong_01.md"))
    assert len(never["tries"]) == 3 and all("quote not found" in t["error"] for t in never["tries"])
    assert never["verdict"]["state"] == "GRADER_DISPUTE"  # no usable judgement after the bounded retries
    assert "no usable judgement" in never["verdict"]["dispute_reasons"][0]


def test_judge_timeout_and_parameters_are_sent_and_each_reply_text_is_printed_and_saved(tmp_path):
    """`--timeout` bounds each judge call (a judge that never answers in time is a failed call and exit 3,
    not a wait of 120 s per try); `--judge-param` goes into the request body as a spec's params would; the
    judge's own text is printed under the verdict and kept in `--save`'s JSON."""
    import threading

    from tests.e2e.test_scoring_pipeline import completion_body, replaying_server

    body = "The cap is 10% of EUR 84,000.00: at most EUR 8,400.00. The daily rate is in Schedule 4, not attached."
    prompt = ["fixtures", "check", "P01", "--answer", str(tmp_path / "answer.md"), "--judge",
              "openai-compatible:test-judge"]
    (tmp_path / "answer.md").write_text(body, encoding="utf-8")

    answered = replaying_server(lambda request: completion_body(judgement(request["messages"][-1]["content"])))
    never = threading.Event()
    silent = replaying_server(lambda request: never.wait(60) and "")
    try:
        saved = tmp_path / "judged.json"
        ok = afpbench([*prompt, "--base-url", f"http://127.0.0.1:{answered.server_port}/v1",
                       "--judge-param", "temperature=0", "--judge-param", "max_tokens=800", "--timeout", "30",
                       "--save", str(saved)], tmp_path)
        slow = afpbench([*prompt, "--base-url", f"http://127.0.0.1:{silent.server_port}/v1", "--timeout", "1",
                         "--json"], tmp_path)
    finally:
        never.set()
        answered.shutdown()
        silent.shutdown()
    assert ok.returncode == 0, ok.stderr
    sent = answered.requests[0]
    assert sent["temperature"] == 0 and sent["max_tokens"] == 800
    record = json.loads(saved.read_text(encoding="utf-8"))
    first = record["judgement"]["tries"][0]
    assert json.loads(first["text"])["scores"] and first["finish_reason"] == "stop"
    assert "| " + first["text"].splitlines()[0] in ok.stdout  # the judge's text under the verdict
    assert slow.returncode == 3, slow.stderr
    tries = json.loads(slow.stdout)["judgement"]["tries"]
    assert tries and all(t["error"] and "timeout after 1s" in t["error"] for t in tries), tries


def test_tool_calls_help_says_it_takes_a_file_and_what_is_in_it(tmp_path):
    shown = afpbench(["fixtures", "check", "--help"], tmp_path).stdout
    assert "--tool-calls FILE" in shown and '"expression"' in shown and "--timeout SECONDS" in shown
