"""The judge check on the real small model (issue 37, acceptance): the shipped local-model example's judge
(the 0.5B model) is tried on the calibration answers before anything is written, through `afpbench plan`
(the same check `run` makes, without a sweep after it, so the test is bounded by the check: 4 calls, at
most 3 at once on the server's 3 slots).

Protocol rule (docs/PROTOCOL.md, "The judge check before a sweep"): a judge passes only when it agrees
with the known verdicts of the balanced calibration answers on at least 3 of 4. The 0.5B judge does not:
the run stops (exit 2, no plan printed) with one line naming the judge and why — no usable judgement, or
too few agreeing with the first disagreement. A stop for failed calls would be the server's failing, not
the judge's, and fails this test. The outcome and its time are printed (-s) for the closing note.
With `--no-judge-check` nothing is called and the run goes on as before (test_sweep_embedded.py).
"""

from __future__ import annotations

import re

import pytest

from afpbench.workers.grading.judge_check import DISAGREES, NO_USABLE
from tests.realmodel.spec_helper import example_spec, run_cli

pytestmark = pytest.mark.realmodel

PROBLEM = r"(P0\d-[\w-]+): (.+)"  # the first answer that did not agree, and why


def test_the_shipped_example_judge_stops_at_the_judge_check_naming_why(local_model_server, tmp_path):
    spec = example_spec(local_model_server, tmp_path)
    judge = re.escape(f"openai-compatible/{local_model_server.model_name}")
    proc, seconds = run_cli(["plan", str(spec)], tmp_path, timeout=3600)
    lines = proc.stderr.strip().splitlines()
    print(f"\njudge check of the example's judge: exit {proc.returncode} after {seconds:.0f} s: {lines[-1:]}")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    none_usable = re.fullmatch(rf"error: judge {judge} gave 0 of 4 usable judgements on the calibration answers "
                               rf"\({PROBLEM}\); {re.escape(NO_USABLE)}", lines[-1])
    too_few = re.fullmatch(rf"error: judge {judge} agreed with the known verdict on ([0-2]) of 4 calibration "
                           rf"answers \(3 needed; ([1-4]) usable; {PROBLEM}\); {re.escape(DISAGREES)}", lines[-1])
    assert none_usable or too_few, proc.stderr


def test_no_judge_check_calls_nothing(local_model_server, tmp_path):
    spec = example_spec(local_model_server, tmp_path)
    proc, _ = run_cli(["plan", str(spec), "--no-judge-check", "--json"], tmp_path, timeout=300)
    assert proc.returncode == 0 and "judge check" not in proc.stderr, proc.stderr
