"""`afpbench calibrate` runs the same preflight as `run` for its judge, and exits non-zero when it
could not judge (README, "Exit status"): it reported "32 unparseable" and exited 0 for a judge that
was never reached."""

from __future__ import annotations

import json

from tests.e2e.test_cli_errors import afpbench, one_line_error
from tests.security.semantics_server import LoopbackProvider, listing, sample


def test_calibrate_against_an_unreachable_judge_exits_non_zero_before_any_call(tmp_path):
    """Rule: the judge's endpoint is preflighted like `run`'s: unreachable -> one line, exit 2."""
    proc = afpbench(["calibrate", "--judge", "openai-compatible:judge-1", "--base-url", "http://127.0.0.1:9/v1"],
                    tmp_path)
    line = one_line_error(proc)
    assert proc.returncode == 2
    assert "judge-1" in line and "unreachable" in line and "127.0.0.1:9" in line
    assert "unparseable" not in proc.stdout


def test_calibrate_whose_judge_calls_fail_exits_3_and_says_why(tmp_path):
    """Rule: a judge that passes the preflight but answers no call (recorded 500 server_error) could not
    judge: failed calls are counted apart from unparseable answers, and the command exits 3 with one line."""
    routes = {("GET", "/v1/models"): listing("judge-1"),
              ("POST", "/v1/chat/completions"): sample("openai-api-500-1")}
    with LoopbackProvider(routes) as server:
        proc = afpbench(["calibrate", "--judge", "openai-compatible:judge-1", "--base-url", f"{server.url}/v1",
                         "--json"], tmp_path)
        calls = len(server.requests("POST"))
    assert proc.returncode == 3, proc.stderr
    report = json.loads(proc.stdout)
    assert report["failed_calls"] == report["items"] == calls > 0
    assert report["unparseable"] == 0
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "could not judge" in line and f"{calls} of {calls} calls failed" in line and "infra_error" in line


def test_calibrate_with_a_working_judge_exits_0(tmp_path):
    proc = afpbench(["calibrate", "--judge", "sim:sim-1", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["failed_calls"] == 0 and report["items"] > 0
