"""The simulated model server over real HTTP (127.0.0.1, a free port) with `requests`.

Prompts are rendered with scoring.render from a fixture loaded by fixtures.loader, so the server is
tested against the messages the harness really sends. Every answer must be labelled simulated.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from afpbench.fixtures.loader import load_fixture
from afpbench.scoring.judge import Judgement, build_judge_messages, read_judgement
from afpbench.scoring.render import CALCULATOR_TOOL, render
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import interruptible

FIXTURE_YAML = """
id: S01
version: "1"
title: Quarterly interest on a statement balance
risk: invents a rate that is not in the statement
task: Work out the interest owed for the quarter on the balance in the bank statement.
evidence:
  - id: E1
    source: Bank statement
    authority_rank: 1
    text: Balance 15200.00 EUR. Quarterly interest rate 3.5 percent.
outcome_requirement: States 532.00 EUR, computed from the statement balance and rate.
anchors:
  task_correctness: {"0": wrong figure, "1": right method with a slip, "2": "532.00 EUR"}
  evidence_discipline: {"0": invented rate, "1": rate used without source, "2": cites the statement}
  uncertainty_handling: {"0": hides a gap, "1": vague, "2": says what is assumed}
  failure_control: {"0": acts on invented facts, "1": hedges weakly, "2": stays within the evidence}
fatal_criteria:
  - {criterion: fabricated_fact, wording: states a rate that the statement does not give}
grader_facts: ["Balance 15200.00 EUR", "Quarterly interest rate 3.5 percent"]
"""

CANNED_YAML = """
fixture: S01
responses:
  - id: S01-pass
    style: pass_plain
    text: |
      The interest owed for the quarter is 532.00 EUR (15200.00 EUR at 3.5 percent).
    tool_calls: ["15200.00 * 0.035", "532.00 + 0"]
    gold:
      scores: {task_correctness: 2, evidence_discipline: 2, uncertainty_handling: 2, failure_control: 2}
      fatal: null
      state: MODEL_PASS
  - id: S01-fatal
    style: fatal
    text: |
      The bank now charges 4.1 percent, so the interest owed is 623.20 EUR for the quarter.
    gold:
      scores: {task_correctness: 0, evidence_discipline: 0, uncertainty_handling: 1, failure_control: 1}
      fatal: fabricated_fact
      state: MODEL_FAIL
"""

INSTRUCTIONS = {
    "B": "Answer accurately and say when you are unsure.\n",
    "C": "Work through the task step by step and tie each figure to its source.\n",
    "D": "Work through the task step by step, tie each figure to its source, stop on missing evidence.\n",
}
JUDGE_PROMPT = "You grade one response against a rubric. Reply with JSON only.\n"


@pytest.fixture(scope="module")
def sim_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sim")
    fixtures_dir = root / "fixtures"
    (fixtures_dir / "simulated").mkdir(parents=True)
    (fixtures_dir / "S01.yaml").write_text(FIXTURE_YAML)
    (fixtures_dir / "simulated" / "S01.yaml").write_text(CANNED_YAML)
    instructions_dir = root / "instructions"
    instructions_dir.mkdir()
    for condition, text in INSTRUCTIONS.items():
        (instructions_dir / f"{condition}.md").write_text(text)
    (root / "judge_prompt.md").write_text(JUDGE_PROMPT)
    return {"fixtures": fixtures_dir, "instructions": instructions_dir, "judge": root / "judge_prompt.md"}


def make_config(dirs: dict[str, Path], **faults) -> SimConfig:
    return SimConfig(
        faults=FaultConfig(**faults),
        fixtures_dir=str(dirs["fixtures"]),
        instructions_dir=str(dirs["instructions"]),
        judge_prompt_path=str(dirs["judge"]),
    )


def chat_body(dirs: dict[str, Path], condition: str = "C", tools: bool = False) -> dict:
    prompt = render(condition, load_fixture("S01", dirs["fixtures"]), INSTRUCTIONS.get(condition, ""))
    body: dict = {"model": "gpt-test", "messages": prompt.messages()}
    if tools:
        body["tools"] = [{"type": "function", "function": CALCULATOR_TOOL}]
    return body


def post(server: SimServer, body: dict, cell: str | None = None, **kwargs) -> requests.Response:
    headers = {"X-Afpbench-Cell": cell} if cell else {}
    return requests.post(
        f"{server.base_url}/chat/completions", json=body, headers=headers, timeout=5, **kwargs
    )


def assert_simulated(resp: requests.Response) -> None:
    assert resp.headers["X-Afpbench-Simulated"] == "1"


def test_normal_answer_is_a_labelled_openai_completion(sim_dirs):
    with SimServer(make_config(sim_dirs)) as server:
        resp = post(server, chat_body(sim_dirs), cell="sweep|m|C|S01|0")
        again = post(server, chat_body(sim_dirs), cell="sweep|m|C|S01|0")
        stats = server.stats()
    assert resp.status_code == 200
    assert_simulated(resp)
    body = resp.json()
    assert body["model"] == "sim-gpt-test" and body["system_fingerprint"] == "afpbench-sim"
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] in {
        "The interest owed for the quarter is 532.00 EUR (15200.00 EUR at 3.5 percent).\n",
        "The bank now charges 4.1 percent, so the interest owed is 623.20 EUR for the quarter.\n",
    }
    assert again.json()["choices"][0]["message"]["content"] == choice["message"]["content"]  # same cell
    usage = body["usage"]
    assert usage["completion_tokens"] == len(choice["message"]["content"].split())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert stats["requests"] == 2 and stats["by_status"] == {"200": 2}
    assert sum(stats["served_by_style"].values()) == 2
    assert stats["tokens"]["total"] == 2 * usage["total_tokens"]


def _cell_with_tool_calls(server: SimServer, dirs) -> str:
    for i in range(200):
        cell = f"cell-{i}"
        if (
            post(server, chat_body(dirs, tools=True), cell=cell).json()["choices"][0]["finish_reason"]
            == "tool_calls"
        ):
            return cell
    raise AssertionError("no cell chose the response with calculator calls")


def test_tool_call_round_trip(sim_dirs):
    with SimServer(make_config(sim_dirs)) as server:
        cell = _cell_with_tool_calls(server, sim_dirs)
        body = chat_body(sim_dirs, tools=True)
        expressions = []
        for _ in range(4):
            message = post(server, body, cell=cell).json()["choices"][0]
            if message["finish_reason"] != "tool_calls":
                break
            call = message["message"]["tool_calls"][0]
            assert message["message"]["content"] is None and call["type"] == "function"
            assert call["function"]["name"] == "calculator"
            expressions.append(json.loads(call["function"]["arguments"])["expression"])
            body["messages"] += [
                message["message"],
                {"role": "tool", "tool_call_id": call["id"], "content": "532"},
            ]
        stats = server.stats()
    assert expressions == ["15200.00 * 0.035", "532.00 + 0"]
    assert message["finish_reason"] == "stop" and message["message"]["content"].startswith(
        "The interest owed"
    )
    assert stats["tool_calls"] >= 2


def test_judge_request_gets_parseable_json_from_gold(sim_dirs):
    fatal_text = "The bank now charges 4.1 percent, so the interest owed is 623.20 EUR for the quarter."
    judge_user = (
        "Fatal criteria to check: fabricated_fact, ignored_counter_evidence\n\n"
        f'Response:\n"""\n{fatal_text}\n"""'
    )
    body = {
        "model": "judge-model",
        "messages": [
            {"role": "system", "content": JUDGE_PROMPT.replace("\n", "\r\n")},
            {"role": "user", "content": judge_user},
        ],
    }
    with SimServer(make_config(sim_dirs)) as server:
        resp = post(server, body)
        stats = server.stats()
    assert_simulated(resp)
    verdict = json.loads(resp.json()["choices"][0]["message"]["content"])
    assert {d: v["score"] for d, v in verdict["scores"].items()} == {
        "task_correctness": 0,
        "evidence_discipline": 0,
        "uncertainty_handling": 1,
        "failure_control": 1,
    }
    assert verdict["fatal"]["fabricated_fact"] == {"flag": True, "quote": fatal_text[:60]}
    assert verdict["fatal"]["ignored_counter_evidence"]["flag"] is False
    assert stats["judge_requests"] == 1


def test_judge_round_trip_through_the_real_judge_messages_and_parser(sim_dirs):
    """scoring.judge builds the request and parses the answer: the simulated judge must pass its strict
    parser, including the check that a flagged fatal quotes the response."""
    fixture = load_fixture("S01", sim_dirs["fixtures"])
    with SimServer(make_config(sim_dirs)) as server:
        for response_text, gold_total, gold_flagged in [
            (
                "The bank now charges 4.1 percent, so the interest owed is 623.20 EUR for the quarter.",
                2,
                ["fabricated_fact"],
            ),
            ("The interest owed for the quarter is 532.00 EUR (15200.00 EUR at 3.5 percent).", 8, []),
        ]:
            for swapped in (False, True):
                messages = build_judge_messages(fixture, response_text, JUDGE_PROMPT, [], swapped=swapped)
                resp = post(server, {"model": "judge", "messages": messages})
                raw = resp.json()["choices"][0]["message"]["content"]
                judgement = read_judgement(raw, fixture.fatal_ids(), response_text)
                assert isinstance(judgement, Judgement), judgement
                assert judgement.total == gold_total and judgement.flagged() == gold_flagged


class SteppedClock:
    """A monotonic clock that moves only when told: makes "20 immediate requests" exact on a slow machine."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _burst(server: SimServer, body: dict, n: int = 20) -> list[requests.Response]:
    gate = threading.Barrier(n)

    def one(i: int) -> requests.Response:
        gate.wait()
        return post(server, body, cell=f"c{i}")

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_strict_rate_limit_admits_burst_then_429_with_retry_after(sim_dirs):
    """600/min with burst 5: 20 immediate requests -> exactly 5 served, 15 refused with Retry-After;
    refused requests take no token, so one more is served exactly when one token has refilled."""
    clock = SteppedClock()
    with SimServer(make_config(sim_dirs, rate_per_min=600, burst=5), clock=clock) as server:
        body = chat_body(sim_dirs, condition="A")
        responses = _burst(server, body)
        stats = server.stats()
        clock.now += 0.09
        still_early = post(server, body, cell="early")
        clock.now += 0.01  # 0.1 s after the burst: exactly one token at 10 per second
        after = [post(server, body, cell=f"after{i}") for i in range(2)]
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * 5 + [429] * 15
    for r in responses:
        assert_simulated(r)
        assert r.headers["x-ratelimit-limit-requests"] == "600"
        if r.status_code == 429:
            assert r.headers["Retry-After"] == "0.1"
            assert (
                r.json()["error"]["code"] == "rate_limit_exceeded" and r.json()["error"]["type"] == "requests"
            )
    assert sorted(int(r.headers["x-ratelimit-remaining-requests"]) for r in responses if r.ok) == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert stats["requests"] == 20 and stats["rate_limited"] == 15
    assert stats["by_status"] == {"200": 5, "429": 15}
    assert still_early.status_code == 429 and still_early.headers["Retry-After"] == "0.1"
    assert [r.status_code for r in after] == [200, 429]


def test_rate_limit_on_the_real_clock_refills_at_the_rate(sim_dirs):
    """Real monotonic clock: a burst admits 5 plus at most what refilled while it lasted (10/s)."""
    with SimServer(make_config(sim_dirs, rate_per_min=600, burst=5)) as server:
        body = chat_body(sim_dirs, condition="A")
        began = time.monotonic()
        responses = _burst(server, body)
        window = time.monotonic() - began
        stats = server.stats()
        time.sleep(0.15)
        after = post(server, body, cell="after")
    served = sum(r.ok for r in responses)
    assert 5 <= served <= 5 + int(window * 10) + 1
    assert all(r.status_code in (200, 429) for r in responses)
    assert all(0.1 <= float(r.headers["Retry-After"]) <= 0.1 for r in responses if r.status_code == 429)
    assert stats["by_status"].get("429", 0) == stats["rate_limited"] == 20 - served
    assert after.status_code == 200


def test_injected_server_errors_rotate_500_502_503(sim_dirs):
    with SimServer(make_config(sim_dirs, error_5xx_rate=1.0)) as server:
        responses = [post(server, chat_body(sim_dirs), cell=f"c{i}") for i in range(3)]
        stats = server.stats()
    assert [r.status_code for r in responses] == [500, 502, 503]
    for r in responses:
        assert_simulated(r)
        assert r.json()["error"]["type"] == "server_error"
    assert stats["errors_5xx"] == 3 and stats["by_status"] == {"500": 1, "502": 1, "503": 1}


def test_retry_of_a_failed_cell_can_succeed(sim_dirs):
    """Fault draws depend on the attempt number per cell, so a retry is a fresh draw."""
    with SimServer(make_config(sim_dirs, error_5xx_rate=0.5, seed=3)) as server:
        statuses = [post(server, chat_body(sim_dirs), cell="one-cell").status_code for _ in range(12)]
    assert 200 in statuses and any(s >= 500 for s in statuses)


def test_injected_content_filter_is_an_azure_style_200(sim_dirs):
    with SimServer(make_config(sim_dirs, content_filter_rate=1.0)) as server:
        resp = post(server, chat_body(sim_dirs), cell="c")
        stats = server.stats()
    assert resp.status_code == 200
    assert_simulated(resp)
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "content_filter" and choice["message"]["content"] is None
    assert any(v["filtered"] for v in choice["content_filter_results"].values())
    assert stats["filtered"] == 1 and stats["served_by_style"] == {}


def test_injected_malformed_body_does_not_parse(sim_dirs):
    with SimServer(make_config(sim_dirs, malformed_rate=1.0)) as server:
        resp = post(server, chat_body(sim_dirs), cell="c")
        stats = server.stats()
    assert resp.status_code == 200
    assert_simulated(resp)
    with pytest.raises(ValueError):
        json.loads(resp.text)
    assert stats["malformed"] == 1


def test_injected_timeout_fires_the_client_read_timeout_and_stop_is_prompt(sim_dirs):
    server = SimServer(make_config(sim_dirs, timeout_rate=1.0, timeout_s=30)).start()
    try:
        with pytest.raises(requests.ReadTimeout):
            requests.post(f"{server.base_url}/chat/completions", json=chat_body(sim_dirs), timeout=0.3)
        assert server.stats()["timeouts"] == 1
    finally:
        began = time.monotonic()
        server.stop()
    # The stalled request (held 30 s) does not hold the server open; the bound only catches that wait.
    assert time.monotonic() - began < 15


def test_models_stats_reset_and_bad_requests(sim_dirs):
    with SimServer(make_config(sim_dirs)) as server:
        models = requests.get(f"{server.base_url}/models", timeout=5)
        bad = requests.post(f"{server.base_url}/chat/completions", data=b"{not json", timeout=5)
        missing = requests.get(server.base_url.replace("/v1", "/nowhere"), timeout=5)
        root = server.base_url.removesuffix("/v1")
        before = requests.get(f"{root}/_sim/stats", timeout=5).json()
        requests.post(f"{root}/_sim/reset", timeout=5)
        after = requests.get(f"{root}/_sim/stats", timeout=5).json()
    assert_simulated(models)
    assert models.json()["data"][0]["id"].startswith("sim-")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert missing.status_code == 404
    assert_simulated(missing)
    assert before["requests"] == 1 and before["by_status"] == {"400": 1}
    assert after["requests"] == 0 and after["by_status"] == {}


def test_plain_mode_on_packaged_defaults_answers_fixed_text():
    """Plain mode loads no fixtures, so it runs without any packaged files and answers every prompt alike."""
    with SimServer(SimConfig(plain=True)) as server:
        resp = post(server, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200
    assert "simulated" in resp.json()["choices"][0]["message"]["content"].lower()


def test_serve_forever_stops_cleanly_on_ctrl_c():
    """The CLI's foreground server: announces itself as simulated, serves, and exits 0 on SIGINT."""
    code = (
        "from afpbench.workers.sim.server import SimConfig, serve_forever; "
        "serve_forever(SimConfig(plain=True), '127.0.0.1', 0)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=interruptible,
    )
    try:
        banner = proc.stdout.readline()
        assert "SIMULATED" in banner
        base_url = banner.split(" at ")[-1].strip()
        assert requests.get(f"{base_url}/models", timeout=5).status_code == 200
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "stopped" in out
