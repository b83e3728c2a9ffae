"""The scoring pipeline end to end through the CLI (embedded mode, real worker threads, real HTTP judges):

- a fixture failing the validity gate yields INVALID_TEST cells naming the check, and is never sent;
- disagreeing judges -> blind order-swapped re-judge -> GRADER_DISPUTE;
- an unparseable judgement -> GRADER_DISPUTE, never a fail;
- a human decision resolves a dispute; judge rows and earlier results remain as history.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from afpbench.fixtures.schema import FatalCriterionId
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench

FATAL_IDS = re.compile("|".join(c.value for c in FatalCriterionId))


def completion_body(content: str) -> str:
    """An OpenAI-compatible chat completion answering `content`."""
    return json.dumps({
        "id": "j1", "object": "chat.completion", "model": "test-judge",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    })


def replaying_server(bodies):
    """An OpenAI-compatible server: POST answers `bodies(request) -> str`, sent as is (a recorded body
    replays byte for byte); the requests are kept in `server.requests`."""
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body: bytes):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(b'{"object": "list", "data": []}')

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(request)
            self._send(bodies(request).encode("utf-8"))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = requests  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def judge_server(reply):
    """A minimal OpenAI-compatible judge: `reply(user_text) -> str` is the assistant content."""
    return replaying_server(lambda request: completion_body(reply(request["messages"][-1]["content"])))


def lenient(user_text: str) -> str:
    """Scores everything 2 and flags nothing: disagrees with the gold judge on every failing answer."""
    dims = ["task_correctness", "evidence_discipline", "uncertainty_handling", "failure_control"]
    ids = list(dict.fromkeys(FATAL_IDS.findall(user_text.split("FATAL CRITERIA", 1)[-1])))
    return json.dumps({
        "scores": {d: {"score": 2, "rationale": "looks fine"} for d in dims},
        "fatal": {c: {"flag": False, "quote": None} for c in ids},
    })


@pytest.fixture
def servers():
    started = [judge_server(lenient), judge_server(lambda _text: "I think this response is fine overall.")]
    yield [f"http://127.0.0.1:{s.server_port}/v1" for s in started]
    for s in started:
        s.shutdown()


def rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_invalid_fixture_cells_are_invalid_test_and_never_sent(tmp_path):
    fixtures = tmp_path / "fx"
    shutil.copytree(REPO / "fixtures" / "pilot", fixtures)
    data = yaml.safe_load((fixtures / "P01.yaml").read_text())
    data["grader_facts"].append("the auditor signed the ledger on 2 February")
    (fixtures / "P01.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [{"provider": "sim", "model": "sim-1"}],
        "fixtures": {"dir": str(fixtures), "only": ["P01", "P02"]}, "conditions": ["A", "C"],
    }))
    proc = afpbench(["run", str(spec), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["by_state"].get("INVALID_TEST") == 2
    db = tmp_path / "afpbench.db"
    invalid = rows(db, "select fixture_id, state_reason, attempts from cell where state='INVALID_TEST'")
    assert {r[0] for r in invalid} == {"P01"}
    assert all("visible_to_model" in r[1] and "auditor" in r[1] for r in invalid)
    assert all(r[2] == 0 for r in invalid), "an invalid fixture is never sent to the model"
    assert rows(db, "select count(*) from attempt a join cell c on c.id=a.cell_id where c.fixture_id='P01'")[0][0] == 0


def test_disputes_rejudge_then_human_decision_keeps_history(tmp_path, servers):
    lenient_url, garbled_url = servers
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}],
        "judges": [{"provider": "sim", "model": "sim-1"},
                   {"provider": "openai-compatible", "model": "lenient-judge", "base_url": lenient_url}],
        "judge_check": False,  # the lenient judge passes every answer: it would stop at the check's known fails
        "fixtures": {"only": ["P01", "P04", "P06"]}, "conditions": ["A", "B"],
    }))
    proc = afpbench(["run", str(spec), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    db = tmp_path / "afpbench.db"
    states = dict(rows(db, "select state, count(*) from cell group by state"))
    assert set(states) <= {"MODEL_PASS", "MODEL_FAIL", "GRADER_DISPUTE"}
    disputed = rows(db, "select id from cell where state='GRADER_DISPUTE' order by id")
    assert disputed, f"the lenient judge must disagree with the gold judge somewhere: {states}"
    cell_id = disputed[0][0]
    rounds = rows(db, f"select distinct judge_round from judgement where cell_id={cell_id} order by 1")
    assert rounds == [(1,), (2,)], "a dispute is re-judged blind with the order swapped before a human sees it"

    listed = afpbench(["adjudicate", "list"], tmp_path)
    assert listed.returncode == 0 and str(cell_id) in listed.stdout
    shown = afpbench(["adjudicate", "show", str(cell_id)], tmp_path)
    assert shown.returncode == 0 and "judges disagree" in shown.stdout
    decided = afpbench(["adjudicate", "decide", str(cell_id), "--state", "MODEL_FAIL", "--reviewer", "alice",
                        "--note", "fabricated the missing figure", "--scores", "0,1,1,1"], tmp_path)
    assert decided.returncode == 0, decided.stderr
    assert rows(db, f"select state from cell where id={cell_id}") == [("MODEL_FAIL",)]
    history = rows(db, f"select scoring_run, state from result where cell_id={cell_id} order by scoring_run")
    assert history == [(1, "GRADER_DISPUTE"), (2, "MODEL_FAIL")]
    assert rows(db, f"select count(*) from judgement where cell_id={cell_id}")[0][0] >= 4
    assert rows(db, f"select reviewer from adjudication where cell_id={cell_id}") == [("alice",)]

    again = ["adjudicate", "decide", str(cell_id), "--state", "MODEL_PASS", "--reviewer", "bob",
             "--note", "x", "--scores", "0,0,0,0"]
    not_disputed = afpbench(again, tmp_path)  # decided once: it is no longer a dispute
    assert not_disputed.returncode == 2 and "not GRADER_DISPUTE" in not_disputed.stderr
    bad = afpbench([*again, "--override", "--reason", "second opinion"], tmp_path)
    assert bad.returncode == 2 and "pass rule" in bad.stderr


def test_unparseable_judgement_is_a_dispute_never_a_fail(tmp_path, servers):
    _, garbled_url = servers
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}],
        "judges": [{"provider": "openai-compatible", "model": "garbled-judge", "base_url": garbled_url}],
        "fixtures": {"only": ["P02"]}, "conditions": ["A"],
        "dispute_rule": {"max_parse_retries": 1},
        "judge_check": False,  # the judge is made to garble: the check before the run would stop the run
    }))
    proc = afpbench(["run", str(spec), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    db = tmp_path / "afpbench.db"
    assert rows(db, "select state from cell") == [("GRADER_DISPUTE",)]
    assert "no usable judgement" in rows(db, "select state_reason from cell")[0][0]
    errors = rows(db, "select parse_error from judgement")
    assert len(errors) == 2 and all(e[0] for e in errors), "every try is kept, with its parse error"
