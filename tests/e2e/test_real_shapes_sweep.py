"""Real model output through a whole sweep (embedded mode, the CLI process, real HTTP servers on 127.0.0.1).

The tested model's server replays, byte for byte, the llama.cpp response bodies recorded from
Qwen2.5-Coder-0.5B via llama.cpp (xllamacpp 2026.10.11549) in tests/data/realmodel/answers.json; the judge
server replays a recorded real structured judgement cut at max_tokens
(tests/data/realmodel/judgements.json), then gives a SIMULATED valid judgement.

Rules checked:
- P08's answer is a tool call written as text in a ```json fence: never executed (no calculator round),
  flagged in the result details, the run record (`show --json`), the report and the verdict's rationale;
- a judge reply cut at max_tokens is "truncated at max_tokens (N tokens)", not a JSON error, and its
  row keeps finish reason, tokens, latency and the request as sent (with the schema's length caps);
- the retry changes the request (the error fed back) and its row says so; the cell is then judged.
"""

from __future__ import annotations

import json

import yaml

from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench
from tests.e2e.test_fixtures_check import judgement
from tests.e2e.test_scoring_pipeline import completion_body, replaying_server, rows

RECORDED = REPO / "tests" / "data" / "realmodel"


def test_a_real_written_tool_call_and_a_real_truncated_judgement_through_a_sweep(tmp_path):
    answers = json.loads((RECORDED / "answers.json").read_text(encoding="utf-8"))["answers"]
    p08 = next(a for a in answers if a["fixture"] == "P08" and a["condition"] == "A")
    cut = json.loads((RECORDED / "judgements.json").read_text(encoding="utf-8"))["truncated"]
    model = replaying_server(lambda request: p08["raw_body"])
    judged: list[dict] = []

    def judge_body(request: dict) -> str:
        judged.append(request)
        if len(judged) == 1:
            return cut["raw_body"]
        return completion_body(judgement(request["messages"][-1]["content"]))  # SIMULATED, flags nothing

    judge = replaying_server(judge_body)
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({
            "models": [{"provider": "openai-compatible", "model": "qwen-recorded",
                        "base_url": f"http://127.0.0.1:{model.server_port}/v1"}],
            "judges": [{"provider": "openai-compatible", "model": "judge-recorded",
                        "base_url": f"http://127.0.0.1:{judge.server_port}/v1"}],
            "fixtures": {"only": ["P08"]}, "conditions": ["A"],
        }))
        run = afpbench(["run", str(spec), "--json", "--no-judge-check"], tmp_path)  # the judge replays in order
        assert run.returncode in (0, 3), run.stderr
        sweep_id = json.loads(run.stdout)["sweep_id"]
        (cell_id,) = rows(tmp_path / "afpbench.db", "select id from cell")[0]
        shown = afpbench(["show", str(cell_id), "--json"], tmp_path)
        report = afpbench(["report", sweep_id, "--format", "md"], tmp_path)
    finally:
        model.shutdown()
        judge.shutdown()
    assert len(model.requests) == 1  # the written call was not run: no calculator round followed
    record = json.loads(shown.stdout)
    assert record["tool_calls"] == []
    assert record["written_tool_call"]["whole_answer"] is True
    assert record["written_tool_call"]["calls"][0]["name"] == "calculateLatePayment"
    assert "tool call written as text" in (record["state_reason"] or "")
    assert "Tool calls written as text" in report.stdout and "calculateLatePayment (not offered)" in report.stdout

    first, second = record["judgements"][0], record["judgements"][1]
    assert first["parse_error"].startswith(f"truncated at max_tokens ({cut['output_tokens']} tokens)")
    assert "JSON" not in first["parse_error"]
    assert first["finish_reason"] == "length" and first["tokens"]["output"] == cut["output_tokens"]
    assert first["latency_ms"] and first["latency_ms"] > 0
    schema = first["request_sent"]["json"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["scores"]["properties"]["task_correctness"]["properties"]["rationale"]["maxLength"]
    assert first["retry_change"] is None
    assert second["retry_change"].startswith("parse error fed back (try 2): truncated at max_tokens")
    assert second["parse_error"] is None and second["parsed"]
    assert judged[0]["messages"] != judged[1]["messages"]  # the retry is not the same request again
    assert "could not be used: truncated at max_tokens" in judged[1]["messages"][-1]["content"]
