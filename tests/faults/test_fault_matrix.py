"""Provider fault matrix: every fault ends in the right result state, with every attempt on record.

Protocol rules checked (AFP v0.1, result states and run records):
- PROVIDER_BLOCK when the provider refuses the content; it is not a model failure.
- INFRA_ERROR after the retry budget for persistent 5xx, timeouts, resets and unusable bodies.
- A refused key or unknown model is INFRA_ERROR that stops the model's remaining cells with one
  reason, instead of failing them one by one.
- Transient faults that clear are retried and end as an answer (here GRADER_DISPUTE: no judges).
- Every attempt is a row; no cell is left unfinished; waiting never holds a worker slot.

Sweeps run through the CLI in embedded mode against a plain HTTP server (one route per fault,
tests/faults/fault_server.py) and against the simulator (workers/sim) with its fault injection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count, write_spec
from tests.faults import fault_server as fs
from tests.faults.harness import SweepRun, http_model, run_sweep, sim_model

MAX_ATTEMPTS = 3  # AFP_MAX_ATTEMPTS for the matrix: persistent faults cost 3 tries (backoff ~0.5 s, ~1 s)
ANSWERED = "GRADER_DISPUTE"  # an answered cell with no judge configured
INFRA, BLOCK = "INFRA_ERROR", "PROVIDER_BLOCK"
STALL_TIMEOUT_S = 0.5  # the model's read timeout on stalling routes (the server stalls 2 s)


@dataclass
class Expect:
    behaviour: fs.Behaviour
    state: str
    outcomes: list[str]
    error_has: str = ""  # in every failed attempt's error
    model: dict = field(default_factory=dict)  # extra model fields (timeout_s)
    min_gaps_s: list[float] = field(default_factory=list)  # least time between attempt i's end and i+1's start


def _persistent(outcome: str, n: int = MAX_ATTEMPTS) -> list[str]:
    return [outcome] * n


CONTENT_FILTER_400 = {"error": {"message": "The prompt was filtered by the content management policy.",
                                "type": None, "code": "content_filter"}}
HTTP_MATRIX: dict[str, Expect] = {
    "ok": Expect(fs.answer(), ANSWERED, ["answer"]),
    # Rate limits and overload: a separate, larger retry budget; Retry-After is obeyed.
    "t429-retry-after": Expect(fs.first(2, fs.status(429, headers={"Retry-After": "1"})), ANSWERED,
                               ["rate_limited", "rate_limited", "answer"], min_gaps_s=[0.95, 0.95]),
    "t429-no-retry-after": Expect(fs.first(2, fs.status(429)), ANSWERED, ["rate_limited", "rate_limited", "answer"],
                                  min_gaps_s=[0.45, 0.45]),
    "t529": Expect(fs.first(2, fs.status(529)), ANSWERED, ["overloaded", "overloaded", "answer"]),
    # Transient server errors clear after k=2 attempts: exponential backoff (base 1 s, jitter 50-100 %).
    **{f"t{code}": Expect(fs.first(2, fs.status(code)), ANSWERED, ["infra_error", "infra_error", "answer"],
                          error_has=str(code), min_gaps_s=[0.45, 0.95]) for code in (500, 502, 503)},
    # Persistent server errors: INFRA_ERROR after exactly MAX_ATTEMPTS attempts.
    **{f"p{code}": Expect(fs.status(code), INFRA, _persistent("infra_error"), error_has=str(code))
       for code in (500, 502, 503)},
    "p-read-timeout": Expect(fs.stall(2.0), INFRA, _persistent("infra_error"), "read timeout",
                             {"timeout_s": STALL_TIMEOUT_S}),
    "t-read-timeout": Expect(fs.first(2, fs.stall(2.0)), ANSWERED, ["infra_error", "infra_error", "answer"],
                             "read timeout", {"timeout_s": STALL_TIMEOUT_S}),
    "p-reset": Expect(fs.reset(), INFRA, _persistent("infra_error"), "connection"),
    "t-reset": Expect(fs.first(1, fs.reset()), ANSWERED, ["infra_error", "answer"], "connection"),
    # The deadline is connect (10 s) + read timeout (1 s); bytes every 0.2 s never trip a read timeout.
    "t-trickle": Expect(fs.first(1, fs.trickle(0.2)), ANSWERED, ["infra_error", "answer"], "deadline exceeded",
                        {"timeout_s": 1.0}),
    "p-malformed-json": Expect(fs.raw(b'{"id": "x", "choices": [ oops }'), INFRA, _persistent("infra_error"),
                               "malformed JSON"),
    "p-truncated-json": Expect(fs.raw(b'{"id": "x", "object": "chat.completion", "choices": [{"index'), INFRA,
                               _persistent("infra_error"), "truncated JSON"),
    "p-short-body": Expect(fs.raw(b'{"id": "x", "choices"', content_length=4000), INFRA,
                           _persistent("infra_error"), "truncated body"),
    "p-empty-choices": Expect(fs.raw(b'{"id": "x", "object": "chat.completion", "choices": []}'), INFRA,
                              _persistent("infra_error"), "no choices"),
    # Content filters: PROVIDER_BLOCK at once, never retried, never a model failure.
    "block-finish-reason": Expect(fs.answer_with(finish="content_filter"), BLOCK, ["provider_block"],
                                  "content filter"),
    "block-400": Expect(fs.status(400, CONTENT_FILTER_400), BLOCK, ["provider_block"], "content_filter"),
}

SIM_MATRIX: dict[str, tuple[FaultConfig, Expect]] = {
    "sim-5xx": (FaultConfig(error_5xx_rate=1.0), Expect(None, INFRA, _persistent("infra_error"), "server error")),
    "sim-timeout": (FaultConfig(timeout_rate=1.0, timeout_s=2.0),
                    Expect(None, INFRA, _persistent("infra_error"), "read timeout", {"timeout_s": STALL_TIMEOUT_S})),
    "sim-filter": (FaultConfig(content_filter_rate=1.0), Expect(None, BLOCK, ["provider_block"])),
    "sim-malformed": (FaultConfig(malformed_rate=1.0), Expect(None, INFRA, _persistent("infra_error"), "JSON")),
}
SIM_FLAKY = FaultConfig(error_5xx_rate=0.5, seed=7)  # outcome depends on the sweep id: invariants only
SIM_RATE = FaultConfig(rate_per_min=30, burst=1)  # one request per 2 s, shared by two models


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> SweepRun:
    tmp = tmp_path_factory.mktemp("matrix")
    sims = {label: SimServer(SimConfig(faults=cfg)).start() for label, (cfg, _) in SIM_MATRIX.items()}
    sims["sim-flaky"] = SimServer(SimConfig(faults=SIM_FLAKY)).start()
    sims["sim-rate"] = SimServer(SimConfig(faults=SIM_RATE)).start()
    try:
        with fs.FaultServer({k: e.behaviour for k, e in HTTP_MATRIX.items()}) as server:
            models = [  # the rate-limited pair first, so both reach the simulator at the same moment
                sim_model("sim-rate-a", sims["sim-rate"].base_url),
                sim_model("sim-rate-b", sims["sim-rate"].base_url),
                *(http_model(k, server.base_url(k), **e.model) for k, e in HTTP_MATRIX.items()),
                *(sim_model(k, sims[k].base_url, **e.model) for k, (_, e) in SIM_MATRIX.items()),
                sim_model("sim-flaky", sims["sim-flaky"].base_url),
            ]
            spec = {"name": "fault matrix", "models": models, "judges": [],
                    "fixtures": {"only": ["P01"]}, "conditions": ["A"]}
            run = run_sweep(tmp, spec, threads=4, env={"AFP_MAX_ATTEMPTS": str(MAX_ATTEMPTS)})
            run.server = server  # type: ignore[attr-defined]
            run.sim_stats = {k: s.stats() for k, s in sims.items()}  # type: ignore[attr-defined]
    finally:
        for s in sims.values():
            s.stop()
    assert run.proc.returncode == 3, run.proc.stderr[-3000:]  # finished, with INFRA_ERROR cells
    return run


def test_matrix_every_cell_is_done_and_no_attempt_is_left_open(matrix):
    """No cell stuck: every cell reaches phase 'done' with a state; no attempt stays 'started'."""
    assert len(matrix.cells) == len(HTTP_MATRIX) + len(SIM_MATRIX) + 3
    assert {c.phase for c in matrix.cells} == {"done"}
    assert all(c.state for c in matrix.cells)
    assert not [a for a in matrix.attempts if a.outcome in ("started", "interrupted") or a.finished is None]


@pytest.mark.parametrize("route", list(HTTP_MATRIX))
def test_http_fault_ends_in_the_right_state_with_every_attempt_on_record(matrix, route):
    expect = HTTP_MATRIX[route]
    (cell,) = matrix.cells_of(route)
    attempts = matrix.attempts_of(cell)
    assert cell.state == expect.state, cell.reason
    assert [a.outcome for a in attempts] == expect.outcomes, [a.error for a in attempts]
    # Every request the provider saw is an attempt row, numbered 1..n, each with its HTTP round(s).
    assert len(matrix.server.requests_for(route)) == len(attempts) == cell.attempts
    assert [a.number for a in attempts] == list(range(1, len(attempts) + 1))
    assert all(len(a.rounds) >= 1 for a in attempts)
    for a in attempts:
        if a.outcome not in ("answer", "tool_call"):
            assert expect.error_has.lower() in (a.error or "").lower(), a.error
    if expect.state == INFRA:
        assert f"after {MAX_ATTEMPTS} attempts" in cell.reason


@pytest.mark.parametrize("route", [k for k, e in HTTP_MATRIX.items() if e.min_gaps_s])
def test_retries_wait_as_the_policy_says(matrix, route):
    """Retry-After is obeyed; without it, exponential backoff (1 s base, doubling, jitter >= 50 %)."""
    attempts = matrix.attempts_of(matrix.cells_of(route)[0])
    gaps = [(b.started - a.finished).total_seconds() for a, b in zip(attempts, attempts[1:], strict=False)]
    for gap, least in zip(gaps, HTTP_MATRIX[route].min_gaps_s, strict=True):
        assert gap >= least, gaps


@pytest.mark.parametrize("label", list(SIM_MATRIX))
def test_sim_fault_ends_in_the_right_state(matrix, label):
    _, expect = SIM_MATRIX[label]
    (cell,) = matrix.cells_of(label)
    attempts = matrix.attempts_of(cell)
    assert cell.state == expect.state, cell.reason
    assert [a.outcome for a in attempts] == expect.outcomes, [a.error for a in attempts]
    assert all(expect.error_has.lower() in (a.error or "").lower() for a in attempts if a.outcome != "answer")
    assert matrix.sim_stats[label]["requests"] == len(attempts)


def test_sim_flaky_server_errors_retry_until_an_answer_or_the_budget(matrix):
    (cell,) = matrix.cells_of("sim-flaky")
    outcomes = [a.outcome for a in matrix.attempts_of(cell)]
    assert matrix.sim_stats["sim-flaky"]["requests"] == len(outcomes)
    if outcomes[-1] == "answer":
        assert cell.state == ANSWERED and set(outcomes[:-1]) <= {"infra_error"}
    else:
        assert cell.state == INFRA and outcomes == _persistent("infra_error")


def test_sim_rate_limit_is_waited_out(matrix):
    """Two models share one simulated rate limit (1 request / 2 s): 429s are retried, both answer."""
    cells = matrix.cells_of("sim-rate-a") + matrix.cells_of("sim-rate-b")
    attempts = [a for c in cells for a in matrix.attempts_of(c)]
    assert {c.state for c in cells} == {ANSWERED}
    limited = [a for a in attempts if a.outcome == "rate_limited"]
    assert len(limited) == matrix.sim_stats["sim-rate"]["rate_limited"]
    assert len(attempts) == matrix.sim_stats["sim-rate"]["requests"]
    assert all(a.http_status == 429 for a in limited)


# --- one worker thread: auth errors stop a model; a long Retry-After holds no slot -------------------

AUTH_401 = {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                      "code": "invalid_api_key"}}
NOT_FOUND = {"error": {"message": "The model `m-nf404` does not exist.", "type": "invalid_request_error",
                       "code": "model_not_found"}}
STOPPING = {
    "wait5": fs.once_overall(fs.status(429, headers={"Retry-After": "5"})),
    "auth401": fs.status(401, AUTH_401),
    "forbid403": fs.status(403),
    "nf404": fs.status(404, NOT_FOUND),
    "ok": fs.answer(),
}
STOP_REASONS = {"auth401": "auth_error", "forbid403": "auth_error", "nf404": "not_found"}


@pytest.fixture(scope="module")
def single_thread(tmp_path_factory) -> SweepRun:
    tmp = tmp_path_factory.mktemp("single")
    with fs.FaultServer(STOPPING) as server:
        models = [http_model(k, server.base_url(k)) for k in STOPPING]  # wait5 first: its cells go first
        spec = {"name": "stop and wait", "models": models, "judges": [],
                "fixtures": {"only": ["P01", "P02", "P03"]}, "conditions": ["A"]}
        run = run_sweep(tmp, spec, threads=1)
        run.server = server  # type: ignore[attr-defined]
    assert run.proc.returncode == 3, run.proc.stderr[-3000:]  # finished, with stopped models
    return run


@pytest.mark.parametrize("label", list(STOP_REASONS))
def test_auth_or_unknown_model_mid_run_stops_the_model_with_one_reason(single_thread, label):
    """/models answered 200, then chat completions refuse: one attempt, the other cells stopped."""
    cells = single_thread.cells_of(label)
    attempts = [a for c in cells for a in single_thread.attempts_of(c)]
    assert len(cells) == 3 and {c.state for c in cells} == {INFRA} and {c.phase for c in cells} == {"done"}
    assert len(attempts) == 1 == len(single_thread.server.requests_for(label)), "not failed one by one"
    assert attempts[0].outcome == STOP_REASONS[label]
    tried = next(c for c in cells if c.attempts == 1)
    stopped = [c for c in cells if c is not tried]
    assert tried.reason.startswith(STOP_REASONS[label])
    assert all(c.reason == f"model stopped: {tried.reason}" and c.attempts == 0 for c in stopped)
    assert [n for n in single_thread.notices() if n.startswith(f"model {label} stopped")] == [
        f"model {label} stopped: {tried.reason}"
    ]


def test_other_models_are_untouched_by_a_stopped_model(single_thread):
    assert {c.state for c in single_thread.cells_of("ok")} == {ANSWERED}
    assert {c.state for c in single_thread.cells_of("wait5")} == {ANSWERED}
    assert {c.phase for c in single_thread.cells} == {"done"}


def test_a_retry_after_wait_holds_no_worker_slot(single_thread):
    """With one worker thread, a cell told to wait 5 s gives its slot back: other models' cells run
    (and finish) inside the wait, and the waiting cell resumes only after it."""
    waiting = next(c for c in single_thread.cells_of("wait5") if c.attempts == 2)
    first, second = single_thread.attempts_of(waiting)
    assert (first.outcome, first.http_status, second.outcome) == ("rate_limited", 429, "answer")
    assert (second.started - first.finished).total_seconds() >= 5.0
    others = [a for c in single_thread.cells if c.label != "wait5" for a in single_thread.attempts_of(c)]
    inside = [a for a in others if first.finished < a.started and a.finished < second.started]
    assert len(others) == 6, "3 stopped models' single attempts + 3 answers of 'ok'"
    # Were the slot held, none could run inside the wait; FIFO order puts the stopped models' cells
    # first, so at least those three finish inside it even on a loaded machine.
    assert len(inside) >= 3, [(a.started, a.finished) for a in others]
    # The other wait5 cells share the pool's cool-down: none of them called the provider during it (it
    # starts when the 429 arrives, a few ms before the attempt row's finished_at).
    later = [a for c in single_thread.cells_of("wait5") if c is not waiting for a in single_thread.attempts_of(c)]
    assert len(later) == 2 and all((a.started - first.finished).total_seconds() >= 4.8 for a in later)


# --- refusals at the preflight: nothing is written ---------------------------------------------------

@pytest.mark.parametrize("case", ["403-at-models", "unknown-model-listed"])
def test_refusal_at_preflight_stops_the_run_before_any_row(tmp_path, case):
    routes = {"r": fs.Route(fs.answer(), models_status=403) if case == "403-at-models"
              else fs.Route(fs.answer(), models_ids=["some-other-model"])}
    with fs.FaultServer(routes) as server:
        provider = "openai-compatible" if case == "403-at-models" else "openai"
        spec = write_spec(tmp_path / "s.yaml", models=[
            {"provider": provider, "model": "m-r", "base_url": server.base_url("r")}], judges=[])
        line = one_line_error(afpbench(["run", str(spec)], tmp_path))
        assert server.requests_for("r") == [], "no chat request after a failed preflight"
    assert ("403" in line) if case == "403-at-models" else ("unknown model 'm-r'" in line)
    assert row_count(tmp_path / "afpbench.db") == 0
