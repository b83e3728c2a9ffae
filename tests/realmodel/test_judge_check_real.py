"""The judge check on the real small model (issue 37): the shipped local-model example's judge (the 0.5B
model) tried on the calibration answers before anything is written, through `afpbench plan` (the same
check `run` makes, without a sweep after it, so the test is bounded by the check alone).

The rule is "no usable judgement stops the run". Measured on this tier (2 shared cores): the 0.5B judge
gave at least one usable judgement of four, so the check passes and names it; a judge that gives none
stops with the one line asserted here. Either way the outcome is printed (-s) for the closing note.
With `--no-judge-check` nothing is called and the run goes on as before (test_sweep_embedded.py).
"""

from __future__ import annotations

import pytest

from afpbench.workers.grading.judge_check import ADVICE
from tests.realmodel.spec_helper import example_spec, run_cli

pytestmark = pytest.mark.realmodel


def test_the_shipped_example_judge_is_checked_before_anything_is_written(local_model_server, tmp_path):
    spec = example_spec(local_model_server, tmp_path)
    judge = f"openai-compatible/{local_model_server.model_name}"
    proc, seconds = run_cli(["plan", str(spec)], tmp_path, timeout=3600)
    print(f"\njudge check of the example's judge: exit {proc.returncode} after {seconds:.0f} s: "
          f"{proc.stderr.strip().splitlines()[-1:]}")
    lines = proc.stderr.strip().splitlines()
    if proc.returncode == 2:  # no usable judgement: one line naming the judge and why, no plan printed
        assert lines[-1].startswith(f"error: judge {judge} gave 0 of 4 usable judgements on the calibration "
                                    "answers") and lines[-1].endswith(ADVICE), proc.stderr
        assert proc.stdout == ""
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert any(line.startswith(f"judge check: {judge} gave a usable judgement (") for line in lines), proc.stderr
        assert proc.stdout.startswith("plan: ")


def test_no_judge_check_calls_nothing(local_model_server, tmp_path):
    spec = example_spec(local_model_server, tmp_path)
    proc, _ = run_cli(["plan", str(spec), "--no-judge-check", "--json"], tmp_path, timeout=300)
    assert proc.returncode == 0 and "judge check" not in proc.stderr, proc.stderr
