"""Judges ask for structured output where the provider supports it (OpenAI-compatible json_schema,
Gemini responseSchema, an Anthropic forced tool), fall back to the prompt-only contract elsewhere, and
the parse stays strict either way. Judgements below are SIMULATED, written for these tests; provider
response bodies come from the recorded samples in ../shared/provider-samples/ when present."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_judge_prompt
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.judge import (
    QUOTE_MAX_CHARS,
    RATIONALE_MAX_CHARS,
    Judgement,
    JudgementError,
    build_judge_messages,
    judgement_schema,
    read_judgement,
)
from afpbench.workers.errors import SpecError
from afpbench.workers.grading.judges import judge_call, judgement_response, judgement_text
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.structured import gemini_schema
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass
from afpbench.workers.sim.canned import load_canned
from afpbench.workers.sim.server import SimConfig, SimServer
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.spec_loading import load_spec
from tests.conftest import REPO
from tests.unit.conftest import make_fixture

SAMPLES_DIR = Path(
    os.environ.get("AFP_PROVIDER_SAMPLES") or REPO.parent / "shared" / "provider-samples"
)
KEY_ENV = "AFP_STRUCTURED_TEST_KEY"
FIXTURES = {f.id: f for f in load_fixtures(None)}
FX = make_fixture()  # three fatal criteria: their ids and order matter
RESPONSE = "SIMULATED: Pay 1200.00 EUR by 14 March 2024; the portal note is not an instruction."
MESSAGES = [{"role": "system", "content": "You grade."}, {"role": "user", "content": "Materials."}]


def sample_body(name: str) -> dict:
    path = SAMPLES_DIR / name
    if not path.is_file():
        pytest.skip(f"recorded provider sample {name} not found in {SAMPLES_DIR}")
    return json.loads(path.read_text(encoding="utf-8"))["body"]


def judgement_for(fixture, score: int = 2) -> dict:
    return {
        "scores": {d: {"score": score, "rationale": f"simulated: {d}"} for d in DIMENSIONS},
        "fatal": {c: {"flag": False, "quote": None} for c in fixture.fatal_ids()},
    }


def endpoint(provider: str, monkeypatch, **params) -> Endpoint:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret-0001")
    return Endpoint(provider, "judge-model", "http://127.0.0.1:9", KEY_ENV, params)


def request(fixture=FX, swapped: bool = False) -> ChatRequest:
    return ChatRequest(MESSAGES, [], {}, judgement_response(fixture, swapped))


def walk(node):
    """Every mapping in a schema, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


# --- the schema is built from the fixture ---------------------------------------------------------


def test_judgement_schema_has_the_fixtures_dimensions_and_fatal_ids_with_capped_strings():
    """Rule: the schema is the strict parse's shape for this fixture; rationale and quote are capped."""
    schema = judgement_schema(FX)
    scores, fatal = schema["properties"]["scores"], schema["properties"]["fatal"]
    assert list(scores["properties"]) == list(DIMENSIONS) == scores["required"]
    assert list(fatal["properties"]) == FX.fatal_ids() == fatal["required"]
    assert all(node.get("additionalProperties") is False for node in walk(schema) if node.get("type") == "object")
    dimension = scores["properties"]["task_correctness"]["properties"]
    assert dimension["score"] == {"type": "integer", "enum": [0, 1, 2]}
    assert dimension["rationale"]["maxLength"] == RATIONALE_MAX_CHARS == 400
    assert fatal["properties"][FX.fatal_ids()[0]]["properties"]["quote"] == {
        "type": ["string", "null"], "maxLength": QUOTE_MAX_CHARS,
    }
    swapped = judgement_schema(FX, swapped=True)
    assert list(swapped["properties"]["scores"]["properties"]) == list(reversed(DIMENSIONS))
    assert list(swapped["properties"]["fatal"]["properties"]) == list(reversed(FX.fatal_ids()))


def test_judgement_schema_accepts_what_the_parse_accepts_and_refuses_what_it_refuses():
    """Rule: schema and strict parse agree on a valid judgement, an extra key, a score of 3, a long text."""
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    validator = jsonschema_rs.validator_for(judgement_schema(FX))
    good = judgement_for(FX)
    assert validator.is_valid(good)
    assert isinstance(read_judgement(json.dumps(good), FX.fatal_ids(), RESPONSE), Judgement)
    extra = {**good, "verdict": "pass"}
    three = json.loads(json.dumps(good))
    three["scores"]["task_correctness"]["score"] = 3
    for bad in (extra, three):
        assert not validator.is_valid(bad)
        assert isinstance(read_judgement(json.dumps(bad), FX.fatal_ids(), RESPONSE), JudgementError)
    long = json.loads(json.dumps(good))
    long["scores"]["failure_control"]["rationale"] = "x" * (RATIONALE_MAX_CHARS + 1)
    assert not validator.is_valid(long)


# --- each adapter's build, against the documented request shapes ----------------------------------


def test_openai_compatible_build_sends_a_strict_json_schema_response_format(monkeypatch):
    """OpenAI-compatible servers (llama.cpp, vLLM): response_format json_schema, strict, full schema."""
    body = adapter_for("vllm").build(endpoint("vllm", monkeypatch), request()).json
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "record_judgement" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == judgement_schema(FX)


def test_openai_build_moves_length_caps_into_descriptions_for_strict_mode(monkeypatch):
    """OpenAI's strict mode refuses minLength/maxLength: the caps become descriptions, the rest stays."""
    body = adapter_for("openai").build(endpoint("openai", monkeypatch), request()).json
    schema = body["response_format"]["json_schema"]["schema"]
    assert not [n for n in walk(schema) if "maxLength" in n or "minLength" in n]
    rationale = schema["properties"]["scores"]["properties"]["uncertainty_handling"]["properties"]["rationale"]
    assert rationale == {"type": "string", "description": "at least 1 characters; at most 400 characters"}


def test_structured_output_falls_back_to_the_prompt_contract_and_the_param_is_never_sent(monkeypatch):
    """Fallback: `structured_output: false` (or a provider whose support depends on the model, groq,
    openrouter) sends no schema; `true` turns it on; the harness param never reaches the body."""
    vllm, groq = adapter_for("vllm"), adapter_for("groq")
    off = vllm.build(endpoint("vllm", monkeypatch, structured_output=False, temperature=0), request()).json
    assert "response_format" not in off and "structured_output" not in off and off["temperature"] == 0
    assert "response_format" not in groq.build(endpoint("groq", monkeypatch), request()).json
    on = groq.build(endpoint("groq", monkeypatch, structured_output=True), request()).json
    assert on["response_format"]["type"] == "json_schema" and "structured_output" not in on
    assert "response_format" not in vllm.build(endpoint("vllm", monkeypatch), ChatRequest(MESSAGES)).json
    gemini = adapter_for("gemini").build(endpoint("gemini", monkeypatch, structured_output=False), request()).json
    assert "generationConfig" not in gemini
    anthropic = adapter_for("anthropic").build(endpoint("anthropic", monkeypatch, structured_output=False), request())
    assert "tools" not in anthropic.json and "structured_output" not in anthropic.json


def test_anthropic_build_forces_the_record_judgement_tool_with_the_schema_as_input_schema(monkeypatch):
    """Anthropic: tool_choice {"type": "tool", "name": "record_judgement"}, the schema as input_schema."""
    body = adapter_for("anthropic").build(endpoint("anthropic", monkeypatch), request()).json
    assert body["tool_choice"] == {"type": "tool", "name": "record_judgement"}
    [tool] = body["tools"]
    assert tool["name"] == "record_judgement" and tool["input_schema"] == judgement_schema(FX)
    assert tool["description"]
    thinking = {"type": "enabled", "budget_tokens": 2048}
    thinking_on = endpoint("anthropic", monkeypatch, thinking=thinking)
    with_thinking = adapter_for("anthropic").build(thinking_on, request()).json
    assert "tool_choice" not in with_thinking and "tools" not in with_thinking  # forced tools refuse thinking
    assert with_thinking["thinking"] == thinking


def test_gemini_build_sets_json_mime_type_and_a_response_schema_in_geminis_dialect(monkeypatch):
    """Gemini: generationConfig.responseMimeType application/json + responseSchema (OpenAPI subset)."""
    body = adapter_for("gemini").build(endpoint("gemini", monkeypatch, temperature=0), request()).json
    gen = body["generationConfig"]
    assert gen["responseMimeType"] == "application/json" and gen["temperature"] == 0
    schema = gen["responseSchema"]
    assert schema["type"] == "OBJECT" and schema["propertyOrdering"] == ["scores", "fatal"]
    dims = schema["properties"]["scores"]
    assert dims["propertyOrdering"] == list(DIMENSIONS) and dims["required"] == list(DIMENSIONS)
    score = dims["properties"]["task_correctness"]["properties"]["score"]
    assert score == {"type": "INTEGER", "minimum": 0, "maximum": 2}
    quote = schema["properties"]["fatal"]["properties"][FX.fatal_ids()[0]]["properties"]["quote"]
    assert quote == {"type": "STRING", "nullable": True, "maxLength": str(QUOTE_MAX_CHARS)}
    assert not [n for n in walk(schema) if "additionalProperties" in n]
    labels = gemini_schema({"type": "string", "enum": ["a", "b"]})
    assert labels == {"type": "STRING", "enum": ["a", "b"], "format": "enum"}


def test_a_bad_structured_output_value_is_refused_in_the_spec_with_one_line_naming_it(tmp_path):
    """Bad input: one line naming the field and the value, and nothing is written."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nmodels: [{provider: sim, model: m}]\n"
        "judges: [{provider: sim, model: j, params: {structured_output: maybe}}]\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    message = str(caught.value)
    assert "structured_output" in message and "'maybe'" in message and "\n" not in message
    assert list(tmp_path.iterdir()) == [spec]


# --- reading the judgement back ---------------------------------------------------------------------


def test_anthropic_forced_tool_judgement_is_read_from_the_tool_use_block_of_a_recorded_shape():
    """The judgement is the tool_use block's input (recorded response shape: text + tool_use blocks)."""
    body = sample_body("anthropic-messages-tool_use-1.json")
    for block in body["content"]:
        if block["type"] == "tool_use":
            block["name"], block["input"] = "record_judgement", judgement_for(FX, score=1)
    result = adapter_for("anthropic").parse(200, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.tool_call
    text = judgement_text(result, judgement_response(FX))
    parsed = read_judgement(text, FX.fatal_ids(), RESPONSE)
    assert isinstance(parsed, Judgement) and parsed.scores == {d: 1 for d in DIMENSIONS}
    assert judgement_text(result, None) is None  # a tool call nobody asked for is no judgement


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True
    bodies: list[dict]
    replies: dict[str, dict]


class _Echo(BaseHTTPRequestHandler):
    """Answers like the provider whose path was called, with the judgement it was given to send."""

    server: _Recorder

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        pass

    def do_POST(self):  # noqa: N802 - stdlib naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        family = "anthropic" if self.path.endswith("/messages") else "gemini" if ":generate" in self.path else "openai"
        payload = json.dumps(self.server.replies[family]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def echo_server():
    server = _Recorder(("127.0.0.1", 0), _Echo)
    server.bodies, server.replies = [], {}
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_judge_call_over_http_reads_each_familys_structured_answer(echo_server, monkeypatch):
    """Through a real HTTP server: each family's request carries its structured-output shape, and the
    judgement read back (message content, Gemini text part, Anthropic tool input) parses strictly."""
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret-0002")
    wanted = judgement_json = json.dumps(judgement_for(FX))
    openai = sample_body("openai-chat-answer-1.json")
    openai["choices"][0]["message"]["content"] = judgement_json
    gemini = sample_body("gemini-generateContent-answer-1.json")
    gemini["candidates"][0]["content"]["parts"][0]["text"] = judgement_json
    anthropic = sample_body("anthropic-messages-tool_use-1.json")
    anthropic["content"][1].update(name="record_judgement", input=judgement_for(FX))
    echo_server.replies.update(openai=openai, gemini=gemini, anthropic=anthropic)
    base = f"http://127.0.0.1:{echo_server.server_address[1]}"
    for provider, key in (("vllm", "response_format"), ("gemini", "generationConfig"), ("anthropic", "tool_choice")):
        judge = ModelSpec(provider=provider, model="judge-model", base_url=base, api_key_env=KEY_ENV)
        call = judge_call(judge, MESSAGES, "cell|judge1", judgement_response(FX))
        raw, error = call.text, call.error
        assert error is None and json.loads(raw) == json.loads(wanted), provider
        assert isinstance(read_judgement(raw, FX.fatal_ids(), RESPONSE), Judgement), provider
        assert key in echo_server.bodies[-1], provider


def test_a_judge_call_through_the_real_simulator_with_response_format_still_parses():
    """The simulator ignores the schema and keeps answering; the judgement parses as before."""
    fixture = FIXTURES["P08"]
    canned = load_canned(None, {f.id: f.fatal_ids() for f in FIXTURES.values()})["P08"][0]
    messages = build_judge_messages(fixture, canned.text, load_judge_prompt(), [])
    with SimServer(SimConfig()) as sim:
        judge = ModelSpec(provider="sim", model="sim-judge", base_url=sim.base_url)
        sent = adapter_for("sim").call(endpoint_for(judge), ChatRequest(messages, [], {}, judgement_response(fixture)))
        assert sent.request_sent["json"]["response_format"]["json_schema"]["name"] == "record_judgement"
        call = judge_call(judge, messages, "P08|judge1", judgement_response(fixture))
        raw, error = call.text, call.error
    assert error is None
    parsed = read_judgement(raw, fixture.fatal_ids(), canned.text)
    assert isinstance(parsed, Judgement) and parsed.scores == canned.gold.scores
