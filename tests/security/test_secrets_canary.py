"""Secrets never reach the database, logs, exports or reports, even from a server that echoes them.

Canary provider keys sit in the environment variables the models name, and a canary AFP_API_TOKEN in
the environment. The test server echoes the Authorization header everywhere it can: in error bodies
(401, 429, 500), in a 200 answer's text, in the body's `model` and `id`, in the X-Request-Id response
header and in a calculator tool call's arguments. After a sweep (DEBUG logging), an export and all
three report formats, not one byte sequence of any canary is found anywhere.

The model's answer text: only the known key values are replaced (by ***). Pattern masking is not
applied to model output, because a key-shaped string a model writes is its answer, not our secret.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count, write_spec
from tests.faults import fault_server as fs
from tests.faults.harness import SweepRun, http_model, query, run_sweep

KEY_SHAPED = f"sk-canary-{uuid.uuid4()}"  # caught by the key-pattern mask too
KEY_PLAIN = f"canary{uuid.uuid4().hex}"  # no recognisable shape: only known-value masking catches it
KEY_JUDGE = f"judgecanary{uuid.uuid4().hex}"
API_TOKEN = f"{uuid.uuid4().hex}-afp-token-canary"
CANARIES = {"shaped key": KEY_SHAPED, "plain key": KEY_PLAIN, "judge key": KEY_JUDGE, "API token": API_TOKEN}
NOT_A_SECRET = "sk-notasecret0123456789abcdef"  # key-shaped text the "model" writes on its own
ENV = {
    "AFP_CANARY_SHAPED": KEY_SHAPED, "AFP_CANARY_PLAIN": KEY_PLAIN, "AFP_CANARY_JUDGE": KEY_JUDGE,
    "AFP_API_TOKEN": API_TOKEN, "AFP_LOG_LEVEL": "DEBUG", "AFP_MAX_ATTEMPTS": "2",
}


def _auth(h: fs.Handler) -> str:
    return h.headers.get("Authorization") or ""


def _key(h: fs.Handler) -> str:
    return _auth(h).removeprefix("Bearer ")


def _echo_text(h: fs.Handler) -> str:
    return (f"[fault-server] Simulated echo, not a real model. You sent Authorization: {_auth(h)}. "
            f"Your key alone: {_key(h)}. Unrelated key-shaped text: {NOT_A_SECRET}.")


def echo_answer(h: fs.Handler, n: int, req: dict) -> None:
    """A 200 that echoes the key in the text, the model name, the id and a kept response header; for a
    prompt that offers the calculator, first a tool call whose arguments carry the key."""
    headers = {"X-Request-Id": f"req {_auth(h)}"}
    if req.get("tools") and not any(m.get("role") == "tool" for m in req["messages"]):
        call = {"id": "call_1", "type": "function",
                "function": {"name": "calculator", "arguments": json.dumps({"expression": "2+2", "note": _key(h)})}}
        body = fs.completion(None, finish="tool_calls", tool_calls=[call], model=f"m {_key(h)}")
    else:
        body = fs.completion(_echo_text(h), model=f"echo-{_key(h)}", request_id=f"id-{_key(h)}")
    h.send_json(200, body, headers)


def echo_error(code: int, extra_headers: dict | None = None) -> fs.Behaviour:
    def run(h: fs.Handler, n: int, req: dict) -> None:
        body = {"error": {"message": f"Rejected. Authorization: {_auth(h)} (key {_key(h)})", "code": f"c{code}"}}
        h.send_json(code, body, {"X-Request-Id": _auth(h), **(extra_headers or {})})
    return run


def html_error_cutting_the_key(h: fs.Handler, n: int, req: dict) -> None:
    """A proxy's HTML error page (not JSON) with the bare key straddling the 120-character snippet the
    error line keeps: cutting before masking would leave a key prefix that no mask recognises."""
    head = "<html><body>" + "x" * 80 + " you sent "
    h.send_json(502, f"{head}{_key(h)} (sorry)</body></html>")


ROUTES = {
    "echo-502-html": html_error_cutting_the_key,
    "echo-answer": echo_answer,
    "echo-answer-plain": echo_answer,
    "echo-429-then-answer": fs.first(1, echo_error(429, {"Retry-After": "0.2"}), echo_answer),
    "echo-500": echo_error(500),
    "echo-401": echo_error(401),
    "echo-judge": lambda h, n, req: h.send_json(200, fs.completion(_echo_text(h))),
}


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory) -> tuple[SweepRun, Path, dict]:
    tmp = tmp_path_factory.mktemp("canary")
    with fs.FaultServer(ROUTES) as server:
        models = [
            http_model("echo-answer", server.base_url("echo-answer"), api_key_env="AFP_CANARY_SHAPED"),
            http_model("echo-answer-plain", server.base_url("echo-answer-plain"), api_key_env="AFP_CANARY_PLAIN"),
            http_model("echo-429", server.base_url("echo-429-then-answer"), api_key_env="AFP_CANARY_PLAIN"),
            http_model("echo-500", server.base_url("echo-500"), api_key_env="AFP_CANARY_PLAIN"),
            http_model("echo-401", server.base_url("echo-401"), api_key_env="AFP_CANARY_SHAPED"),
            http_model("echo-502-html", server.base_url("echo-502-html"), api_key_env="AFP_CANARY_PLAIN"),
        ]
        judge = http_model("echo-judge", server.base_url("echo-judge"), api_key_env="AFP_CANARY_JUDGE")
        # judge_check off: the echoing judge gives no usable judgement, which would stop the run before it began.
        spec = {"name": "canary", "models": models, "judges": [judge],
                "fixtures": {"only": ["P01", "P08"]}, "conditions": ["A"], "judge_check": False}
        run = run_sweep(tmp, spec, threads=4, env=ENV)
        seen_keys = {s.authorization for s in server.httpd.seen}
    assert run.proc.returncode == 3, run.proc.stderr[-3000:]  # finished; echo-500 and echo-401 are INFRA_ERROR
    outputs = {"run": run.proc.stdout + run.proc.stderr}
    # `report --format html` through the CLI; the bundle holds the md and json renderings
    # (summary.md, summary.json) from the same renderer, so one report call is enough.
    proc = afpbench(["report", run.sweep_id, "--format", "html"], tmp, env=ENV)
    assert proc.returncode == 0, proc.stderr
    outputs["report html"] = proc.stdout + proc.stderr
    export = afpbench(["export", run.sweep_id, str(tmp / "bundle")], tmp, env=ENV)
    outputs["export"] = export.stdout + export.stderr
    outputs["export-exit"] = str(export.returncode)
    assert {f"Bearer {KEY_SHAPED}", f"Bearer {KEY_PLAIN}", f"Bearer {KEY_JUDGE}"} <= seen_keys, "canaries in use"
    return run, tmp, outputs


def _leaks(data: bytes) -> list[str]:
    """Canaries found in `data`, whole or as a 16-character prefix (a cut-off key is still a leak)."""
    found = []
    for name, secret in CANARIES.items():
        for form in {secret, secret[:16]}:
            if form.encode() in data:
                found.append(f"{name} ({'whole' if form == secret else 'prefix'})")
    return found


def test_the_database_file_holds_no_canary(canary_run):
    run, tmp, _ = canary_run
    files = [p for p in tmp.iterdir() if p.name.startswith("afpbench.db")]
    assert files
    for path in files:  # the file bytes, free pages included, and any WAL/SHM left behind
        assert _leaks(path.read_bytes()) == [], path.name


def test_logs_and_command_output_hold_no_canary(canary_run):
    _, _, outputs = canary_run
    for name, text in outputs.items():
        assert _leaks(text.encode()) == [], name


def test_reports_hold_no_canary(canary_run):
    """HTML from `afpbench report`; md, json and html again as written into the export bundle."""
    _, tmp, outputs = canary_run
    assert "<html" in outputs["report html"] and _leaks(outputs["report html"].encode()) == []
    for name in ("summary.md", "summary.json", "report.html"):
        text = (tmp / "bundle" / name).read_bytes()
        assert len(text) > 200 and _leaks(text) == [], name


def test_export_bundle_holds_no_canary(canary_run):
    _, tmp, outputs = canary_run
    assert outputs["export-exit"] == "0", outputs["export"]
    files = [p for p in (tmp / "bundle").rglob("*") if p.is_file()]
    assert any(p.name == "raw_outputs.jsonl" for p in files)
    for path in files:
        assert _leaks(path.read_bytes()) == [], path


def test_the_echo_reached_storage_masked_not_dropped(canary_run):
    """Not vacuous: the echoes were stored, with the key replaced by *** in every field."""
    run, _, _ = canary_run
    answered = [a for c in run.cells_of("echo-answer-plain") for a in run.attempts_of(c) if a.outcome == "answer"]
    assert answered
    for a in answered:
        assert "Authorization: Bearer ***." in a.output_text and "Your key alone: ***." in a.output_text
        assert a.served_model == "echo-***" and a.provider_request_id == "req Bearer ***"
        assert "Bearer ***" in a.rounds[-1]["headers"]["x-request-id"]
    failed = [a for c in run.cells_of("echo-500") for a in run.attempts_of(c)]
    assert failed and all("Authorization: Bearer ***" in a.error for a in failed)
    assert all("Bearer ***" in a.rounds[0]["raw_body"] for a in failed)
    cut = [a for c in run.cells_of("echo-502-html") for a in run.attempts_of(c)]
    assert cut and all(a.error.startswith("502: <html>") and "you sent *** (sorry)" in a.error for a in cut)


def test_model_text_keeps_key_shaped_text_that_is_not_a_secret(canary_run):
    """Only the known values are masked out of model output: other key-shaped text is the answer."""
    run, _, _ = canary_run
    texts = [a.output_text for c in run.cells_of("echo-answer") for a in run.attempts_of(c) if a.output_text]
    assert texts and all(NOT_A_SECRET in t for t in texts)


def test_a_tool_call_echoing_the_key_is_stored_masked(canary_run):
    run, _, _ = canary_run
    (cell,) = [c for c in run.cells_of("echo-answer") if c.fixture_id == "P08"]
    calls = [t for a in run.attempts_of(cell) for t in a.tool_calls]
    assert calls and all('"note": "***"' in t["arguments_raw"] for t in calls)
    assert all(t.get("result") == "4" for t in calls), "the masked call still ran"


def test_judge_echo_is_masked_in_stored_judgements(canary_run):
    run, _, _ = canary_run
    raw = [r[0] for r in query(run.db, "select raw_text from judgement where raw_text is not null")]
    assert raw and all("Authorization: Bearer ***" in t for t in raw)


def test_a_401_mid_run_names_the_model_but_not_the_key(canary_run):
    run, _, _ = canary_run
    notices = [n for n in run.notices() if n.startswith("model echo-401 stopped")]
    assert len(notices) == 1 and "401" in notices[0] and "***" in notices[0]


def test_preflight_refusal_echoing_a_plain_key_does_not_print_it(tmp_path):
    """The preflight masks the bare key too (a key with no known shape), not only 'Bearer <key>'."""
    with fs.FaultServer({"r": fs.answer()}) as server:
        server.httpd.RequestHandlerClass = _EchoingModelsHandler
        spec = write_spec(tmp_path / "s.yaml", models=[
            {"provider": "openai-compatible", "model": "m", "base_url": server.base_url("r"),
             "api_key_env": "AFP_CANARY_PLAIN"}], judges=[])
        proc = afpbench(["run", str(spec)], tmp_path, env={**ENV, "AFP_LOG_LEVEL": "WARNING"})
    line = one_line_error(proc)
    assert "401" in line and "AFP_CANARY_PLAIN" in line and "***" in line
    assert _leaks((proc.stdout + proc.stderr).encode()) == []
    assert row_count(tmp_path / "afpbench.db") == 0


class _EchoingModelsHandler(fs.Handler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.send_json(401, {"error": {"message": f"bad key {_key(self)}", "code": "invalid_api_key"}})


def test_a_key_with_a_line_break_is_a_config_error_that_does_not_quote_the_key(monkeypatch):
    """requests quotes a bad header value in its error; the adapter must not store that message."""
    from afpbench.workers.providers.families import adapter_for
    from afpbench.workers.providers.types import ChatRequest, Endpoint

    monkeypatch.setenv("AFP_CANARY_NEWLINE", KEY_PLAIN + "\n")
    endpoint = Endpoint("openai-compatible", "m", "http://127.0.0.1:9/v1", "AFP_CANARY_NEWLINE")
    result = adapter_for("openai-compatible").call(endpoint, ChatRequest([{"role": "user", "content": "hi"}]))
    assert result.outcome.value == "auth_error", "retrying cannot fix a malformed key"
    assert "line break" in result.error
    assert _leaks(json.dumps(result.request_sent).encode() + result.error.encode()) == []
