"""One attempt budget (AFP_MAX_ATTEMPTS) bounds every retry path, 429s included (issue #15, item 5).

Rules checked:
- No outcome class gets a cell more than AFP_MAX_ATTEMPTS attempts, however many messages arrive:
  duplicates, redeliveries after a countdown, reconciler resends, and a worker that died mid-try.
- The claim itself refuses to start attempt AFP_MAX_ATTEMPTS + 1: the cell ends INFRA_ERROR naming
  the budget and how its last attempt ended, and no request is sent.
- 429s stop at AFP_MAX_ATTEMPTS (before: 20 tries whatever the setting said).

A real stdlib HTTP server injects each outcome class (tests/faults/fault_server.py); cells run through
the real execution path on a real PostgreSQL database, where a trigger injects the storage fault.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from tests.faults import fault_server as fs
from tests.faults.harness import http_model, run_sweep

MAX_ATTEMPTS = 3
SCORED = {"GRADER_DISPUTE", "MODEL_PASS", "MODEL_FAIL"}  # answered; no judges configured here
INFRA = "INFRA_ERROR"
QUICK = {"Retry-After": "0.01"}  # the limiter cools the pool down for this long after a 429 / 529
STORAGE_FAULT = "STORAGE-FAULT: the test database refuses to store this answer"
CALCULATOR_CALL = {"id": "call_1", "type": "function",
                   "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}}


def _error(code: str, message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


# outcome class -> (server behaviour, outcome rows it produces, end state, retried until the budget)
# quota_exhausted and context_too_long come from the provider-semantics classification (item 6); until
# it is in place the same real answers classify as rate_limited / auth_error, which are listed too.
CASES: dict[str, tuple[fs.Behaviour, set[str], set[str], bool]] = {
    "answer": (fs.answer(), {"answer"}, SCORED, False),
    "tool_call": (fs.answer_with(text=None, finish="tool_calls", tool_calls=[CALCULATOR_CALL]),
                  {"tool_call"}, SCORED, False),
    "provider_block": (fs.answer_with(finish="content_filter"), {"provider_block"}, {"PROVIDER_BLOCK"}, False),
    "rate_limited": (fs.status(429, headers=QUICK), {"rate_limited"}, {INFRA}, True),
    "overloaded": (fs.status(529, headers=QUICK), {"overloaded"}, {INFRA}, True),
    "infra_error": (fs.status(500), {"infra_error"}, {INFRA}, True),
    "auth_error": (fs.status(401), {"auth_error"}, {INFRA}, False),
    "not_found": (fs.status(404, _error("model_not_found", "no such model")), {"not_found"}, {INFRA}, False),
    "truncated": (fs.answer_with(finish="length"), {"truncated"}, SCORED, False),
    "quota_exhausted": (fs.status(429, _error("insufficient_quota", "You exceeded your current quota"), QUICK),
                        {"quota_exhausted", "rate_limited"}, {INFRA}, False),
    "context_too_long": (fs.status(400, _error("context_length_exceeded", "maximum context length is 8 tokens")),
                         {"context_too_long", "auth_error"}, {INFRA}, False),
    "storage_error": (fs.answer(STORAGE_FAULT), {"storage_error"}, {INFRA}, True),
}

# Refuses any attempt row carrying the poison text: a write failure the storage layer cannot foresee.
REFUSE_POISON = """
CREATE FUNCTION afp_test_refuse() RETURNS trigger AS $$ BEGIN
  IF strpos(NEW.output_text, 'STORAGE-FAULT') > 0 THEN RAISE EXCEPTION 'injected storage fault'; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER afp_test_refuse BEFORE UPDATE ON attempt FOR EACH ROW EXECUTE FUNCTION afp_test_refuse();
"""


@pytest.fixture
def one_cell(postgres_url, settings_env):
    """Start a one-cell sweep (P01, condition A) against `base_url`; returns (sweep id, cell id)."""
    settings_env(AFP_DATABASE_URL=postgres_url, AFP_BROKER_URL="memory://", AFP_MAX_ATTEMPTS=str(MAX_ATTEMPTS))
    from afpbench.workers.runs import start_sweep
    from afpbench.workers.store.db import get_engine
    from afpbench.workers.sweeps.spec_loading import parse_spec

    with get_engine().begin() as conn:
        conn.exec_driver_sql(REFUSE_POISON)

    def start(base_url: str) -> int:
        spec = parse_spec({"name": "budget", "models": [http_model("m", base_url)], "judges": [],
                           "fixtures": {"only": ["P01"]}, "conditions": ["A"]})
        sweep_id = start_sweep(spec, check_endpoints=False)
        with get_engine().connect() as conn:
            return conn.execute(text("select id from cell where sweep_id = :s"), {"s": sweep_id}).scalar_one()

    return start


def _sql(statement: str, **params):
    from afpbench.workers.store.db import get_engine

    with get_engine().begin() as conn:
        result = conn.execute(text(statement), params)
        return result.all() if result.returns_rows else []


def _die_after_claiming(cell_id: int) -> None:
    """What a worker killed mid-call leaves behind: the claim and its `started` attempt, a lease that ends."""
    from afpbench.workers.cells.claim import Claimed, claim
    from afpbench.workers.store.db import transaction

    with transaction() as conn:
        assert isinstance(claim(conn, cell_id, "killed-worker", 0.0, MAX_ATTEMPTS), Claimed)


def _hammer(cell_id: int, rounds: int = 3 * MAX_ATTEMPTS) -> None:
    """Every way a cell's execute message can arrive again: two copies at once (a duplicate), then,
    as after a countdown, a reconciler resend or a redelivery, with the backoff and any lease over."""
    from afpbench.workers.cells.execution import execute_cell

    for _ in range(rounds):
        for worker in ("w1", "w2"):
            execute_cell(cell_id, worker)
        _sql("update cell set not_before = null, lease_until = now() - interval '1 second' "
             "where id = :c and phase <> 'done'", c=cell_id)
        time.sleep(0.05)  # past the limiter's cool-down after a 429 / 529 (Retry-After 0.01)


@pytest.mark.parametrize("outcome_class", list(CASES))
def test_no_outcome_class_gets_more_than_max_attempts(one_cell, outcome_class):
    """Rule: one attempt budget bounds every retry path, whatever the outcome class of the attempts."""
    behaviour, outcomes, states, retried = CASES[outcome_class]
    with fs.FaultServer({"r": behaviour}) as server:
        cell_id = one_cell(server.base_url("r"))
        _die_after_claiming(cell_id)  # attempt 1: lost with its worker; it counts
        _hammer(cell_id)
        requests = len(server.requests_for("r"))
    (cell,) = _sql("select phase, state, state_reason, attempts from cell where id = :c", c=cell_id)
    attempts = _sql("select number, outcome from attempt where cell_id = :c order by number", c=cell_id)
    assert cell.phase == "done" and cell.state in states, cell
    assert cell.attempts == len(attempts) <= MAX_ATTEMPTS
    assert [a.number for a in attempts] == list(range(1, len(attempts) + 1))
    assert attempts[0].outcome == "interrupted"
    assert {a.outcome for a in attempts[1:]} <= outcomes, attempts
    assert requests == len(attempts) - 1, "every request is an attempt row; none beyond the budget"
    if retried:
        assert len(attempts) == MAX_ATTEMPTS
        assert f"after {MAX_ATTEMPTS} attempts" in cell.state_reason
    elif outcome_class not in ("quota_exhausted", "context_too_long"):
        assert len(attempts) == 2, "not retried"
    results = _sql("select state from result where cell_id = :c", c=cell_id)
    assert [r.state for r in results] == [cell.state], "exactly one result"


def test_the_claim_refuses_attempt_max_plus_one(one_cell):
    """Rule: the claim never starts attempt AFP_MAX_ATTEMPTS + 1; the cell ends INFRA_ERROR naming the
    budget, without a request, and later messages find it done."""
    from afpbench.workers.cells.claim import claim
    from afpbench.workers.cells.decisions import Finished
    from afpbench.workers.cells.execution import execute_cell
    from afpbench.workers.cells.reconciler import reconcile_sweep
    from afpbench.workers.store.db import transaction

    with fs.FaultServer({"r": fs.answer()}) as server:
        cell_id = one_cell(server.base_url("r"))
        for _ in range(MAX_ATTEMPTS):
            _die_after_claiming(cell_id)
        decision = execute_cell(cell_id, "w1")
        assert isinstance(decision, Finished) and decision.state == INFRA
        assert decision.reason == ("attempt budget spent after 3 attempts (AFP_MAX_ATTEMPTS=3): "
                                   "the last was lost with its worker")
        (sweep_id,) = _sql("select sweep_id from cell where id = :c", c=cell_id)[0]
        reconcile_sweep(sweep_id)
        assert execute_cell(cell_id, "w2").reason == "already done"
        with transaction() as conn:
            assert claim(conn, cell_id, "w3", 60.0, MAX_ATTEMPTS) is None
        assert server.requests_for("r") == []
    (cell,) = _sql("select phase, state, state_reason, attempts from cell where id = :c", c=cell_id)
    assert (cell.phase, cell.state, cell.attempts) == ("done", INFRA, MAX_ATTEMPTS)
    assert cell.state_reason == decision.reason
    outcomes = [r.outcome for r in _sql("select outcome from attempt where cell_id = :c", c=cell_id)]
    assert outcomes == ["interrupted"] * MAX_ATTEMPTS, "no attempt left 'started'"
    assert [r.state for r in _sql("select state from result where cell_id = :c", c=cell_id)] == [INFRA]


def test_429s_stop_at_afp_max_attempts(tmp_path):
    """Rule: 429s count against AFP_MAX_ATTEMPTS like any other retry (a whole `afpbench run`)."""
    with fs.FaultServer({"always-429": fs.status(429, headers={"Retry-After": "0.05"})}) as server:
        spec = {"name": "429s", "models": [http_model("m", server.base_url("always-429"))], "judges": [],
                "fixtures": {"only": ["P01"]}, "conditions": ["A"]}
        run = run_sweep(tmp_path, spec, env={"AFP_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}, timeout=120)
        requests = len(server.requests_for("always-429"))
    # The cell ended INFRA_ERROR (not the model's output): the run says so with exit status 3.
    assert run.proc.returncode == 3, run.proc.stderr[-2000:]
    (cell,) = run.cells
    assert cell.state == INFRA and f"rate_limited after {MAX_ATTEMPTS} attempts" in cell.reason
    assert [a.outcome for a in run.attempts_of(cell)] == ["rate_limited"] * MAX_ATTEMPTS
    assert requests == MAX_ATTEMPTS
