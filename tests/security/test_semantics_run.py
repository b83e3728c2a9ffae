"""Provider failure semantics end to end, and an exit status that tells the truth (README, "Exit status").

Each test runs `afpbench run` (embedded: SQLite, in-process worker threads) against a stdlib server on
loopback that answers with recorded provider responses (shared/provider-samples), then reads the
cells and attempts back with sqlite3 and compares them with the requests the server saw.

Rules checked:
- a billing 429 (`insufficient_quota`) stops the model after one attempt; waiting would not help;
- Anthropic's `x-should-retry: false` is honoured: no second attempt;
- `context_length_exceeded` fails that cell only (INFRA_ERROR, reason named); the model's other
  cells are scored;
- a run whose cells ended INFRA_ERROR (a model stopped for a bad key, ...), or in a dispute because a
  judge call failed, exits 3 with one line saying why; a run whose exclusions come from the model's
  output (PROVIDER_BLOCK, GRADER_DISPUTE awaiting a human) exits 0.
"""

from __future__ import annotations

import json

from tests.e2e.test_scoring_pipeline import lenient
from tests.faults.harness import SweepRun, run_sweep
from tests.security.semantics_server import LoopbackProvider, chat_answer, listing, reply_json, sample

FIXTURES = ["P01", "P02", "P03"]
OVERLONG = "P02"  # the fixture whose prompt the loopback model says is too long


def spec(*models: dict, judges: list[dict] | None = None) -> dict:
    return {"name": "semantics", "models": list(models), "judges": judges or [],
            "fixtures": {"only": FIXTURES}, "conditions": ["A"]}


def openai_model(label: str, server: LoopbackProvider, **extra) -> dict:
    return {"provider": "openai-compatible", "model": f"m-{label}", "label": label,
            "base_url": f"{server.url}/{label}/v1", **extra}


def routes_for(label: str, chat) -> dict:
    return {("GET", f"/{label}/v1/models"): listing(f"m-{label}"), ("POST", f"/{label}/v1/chat/completions"): chat}


def exit_line(run: SweepRun) -> str:
    lines = [line for line in run.proc.stderr.splitlines() if "excluded" in line]
    assert len(lines) == 1, run.proc.stderr
    return lines[0]


def test_insufficient_quota_stops_the_model_after_one_attempt(tmp_path):
    """Rule: a billing 429 stops the model like an auth error: one request, not one per cell and retry
    (replays: it was retried 20 times per cell over ~10 minutes). Another model in the sweep is untouched."""
    routes = {**routes_for("quota", sample("openai-responses-429-insufficient_quota-1")),
              **routes_for("ok", chat_answer())}
    with LoopbackProvider(routes) as server:
        run = run_sweep(tmp_path, spec(openai_model("quota", server), openai_model("ok", server)), threads=1,
                        env={"AFP_MAX_ATTEMPTS": "5"})
        posted = server.requests("POST", "/quota/v1/chat/completions")
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    cells = run.cells_of("quota")
    attempts = [a for c in cells for a in run.attempts_of(c)]
    assert len(posted) == 1 == len(attempts), [a.outcome for a in attempts]
    assert attempts[0].outcome == "quota_exhausted" and "waiting will not help" in attempts[0].error
    assert {c.state for c in cells} == {"INFRA_ERROR"} and {c.phase for c in cells} == {"done"}
    assert all("quota" in (c.reason or "").lower() for c in cells), [c.reason for c in cells]
    assert {c.state for c in run.cells_of("ok")} == {"GRADER_DISPUTE"}, "the other model answered"
    assert "model quota: INFRA_ERROR" in exit_line(run)


def test_x_should_retry_false_is_honoured(tmp_path):
    """Rule: the provider's own advice wins: a 500 that says `x-should-retry: false` is tried once,
    where a plain 500 is retried up to AFP_MAX_ATTEMPTS."""
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    routes = {("GET", "/v1/models/claude-x"): reply_json(200, {"type": "model", "id": "claude-x"}),
              ("POST", "/v1/messages"): reply_json(500, error, **{"x-should-retry": "false"})}
    with LoopbackProvider(routes) as server:
        model = {"provider": "anthropic", "model": "claude-x", "label": "advised", "base_url": server.url,
                 "api_key_env": "AFP_SEMANTICS_KEY"}
        run = run_sweep(tmp_path, spec(model), env={"AFP_MAX_ATTEMPTS": "3", "AFP_SEMANTICS_KEY": "k" * 24})
        posted = server.requests("POST", "/v1/messages")
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    cells = run.cells_of("advised")
    assert len(cells) == len(FIXTURES) and {c.state for c in cells} == {"INFRA_ERROR"}
    assert [c.attempts for c in cells] == [1] * len(FIXTURES), [c.reason for c in cells]
    assert len(posted) == len(FIXTURES), "one request per cell, no retry"


def test_context_length_exceeded_fails_that_cell_only_and_the_other_cells_are_scored(tmp_path):
    """Rule: an over-long prompt is INFRA_ERROR for that cell, with the reason named; it does not stop
    the model (replays: it stopped all of the model's cells), whose other cells are judged as usual."""
    overlong = sample("openai-chat-context_length-1")

    def chat(headers: dict, _body) -> object:
        return overlong if f"|{OVERLONG}@" in headers.get("x-afpbench-cell", "") else chat_answer()

    def judge(_headers: dict, body) -> object:
        return chat_answer(lenient(body["messages"][-1]["content"]))

    routes = {**routes_for("long", chat), **routes_for("judge", judge)}
    with LoopbackProvider(routes) as server:
        judge_model = openai_model("judge", server)
        # judge_check off: a lenient judge passes every answer, so it would fail the check's known fails.
        run = run_sweep(tmp_path, {**spec(openai_model("long", server), judges=[judge_model]), "judge_check": False},
                        threads=2)
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    by_fixture = {c.fixture_id: c for c in run.cells_of("long")}
    failed = by_fixture.pop(OVERLONG)
    assert failed.state == "INFRA_ERROR" and failed.attempts == 1
    assert "context" in failed.reason and not failed.reason.startswith("model stopped"), failed.reason
    assert [a.outcome for a in run.attempts_of(failed)] == ["context_too_long"]
    scored = list(by_fixture.values())
    assert len(scored) == len(FIXTURES) - 1
    assert {c.state for c in scored} <= {"MODEL_PASS", "MODEL_FAIL"}, [c.reason for c in scored]
    assert "model long: INFRA_ERROR" in exit_line(run)
    assert "model stopped" not in " ".join(run.notices())


def test_a_sweep_whose_model_was_stopped_for_a_bad_key_exits_3(tmp_path):
    """Rule: exit 0 only when no cell was excluded for a configuration reason; a model stopped for a
    refused key (recorded 401 invalid_api_key mid-run) makes the run exit 3 with one line naming the
    model and the cause, after the summary (replays: it exited 0)."""
    routes = {**routes_for("badkey", sample("openai-chat-401-1")), **routes_for("ok", chat_answer())}
    with LoopbackProvider(routes) as server:
        run = run_sweep(tmp_path, spec(openai_model("badkey", server), openai_model("ok", server)), threads=1)
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    summary = json.loads(run.proc.stdout)
    assert summary["by_state"]["INFRA_ERROR"] == len(FIXTURES)
    line = exit_line(run)
    assert f"{len(FIXTURES)} of {2 * len(FIXTURES)} cells excluded" in line
    assert f"model badkey: INFRA_ERROR (auth_error) x{len(FIXTURES)}" in line
    assert "model ok" not in line


def test_exclusions_from_the_models_output_exit_0(tmp_path):
    """Rule: PROVIDER_BLOCK (the provider filtered this content) and GRADER_DISPUTE awaiting a human are
    outcomes of the model's output, not of the configuration: the run exits 0, with no exit line."""
    blocked = sample("azure-chat-content_filter-1")

    def chat(headers: dict, _body) -> object:
        return blocked if f"|{OVERLONG}@" in headers.get("x-afpbench-cell", "") else chat_answer()

    with LoopbackProvider(routes_for("filtered", chat)) as server:
        run = run_sweep(tmp_path, spec(openai_model("filtered", server)))
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert sorted(c.state for c in run.cells) == ["GRADER_DISPUTE", "GRADER_DISPUTE", "PROVIDER_BLOCK"]
    assert "excluded" not in run.proc.stderr


def test_a_dispute_left_by_a_failed_judge_call_exits_3(tmp_path):
    """Rule: a GRADER_DISPUTE that a judge call failing produced (the judge unreachable for that cell,
    then unparseable) is a configuration exclusion, unlike judges disagreeing: exit 3, naming it."""
    calls: dict[str, int] = {}
    failure = sample("openai-api-500-1")

    def judge(headers: dict, _body) -> object:
        cell = headers.get("x-afpbench-cell", "")
        calls[cell] = calls.get(cell, 0) + 1
        return failure if calls[cell] == 1 else chat_answer("I think this response is fine overall.")

    routes = {**routes_for("ok", chat_answer()), **routes_for("judge", judge)}
    with LoopbackProvider(routes) as server:
        # judge_check off: the check's calls would meet the failing first reply instead of the cells.
        run = run_sweep(tmp_path, {**spec(openai_model("ok", server), judges=[openai_model("judge", server)]),
                                   "judge_check": False})
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    assert {c.state for c in run.cells} == {"GRADER_DISPUTE"}
    assert f"model ok: GRADER_DISPUTE (judge call failed) x{len(FIXTURES)}" in exit_line(run)
