"""The judge check on the real small model (issue 37 acceptance): the shipped local-model example, whose
judge is the 0.5B model, stops at the judge check before any cell is written, in one line naming the judge
and why (with `--no-judge-check` it runs as before: test_sweep_embedded.py, test_sweep_distributed.py)."""

from __future__ import annotations

import pytest

from afpbench.workers.grading.judge_check import ADVICE
from tests.realmodel.spec_helper import example_spec, run_cli

pytestmark = pytest.mark.realmodel


def test_the_shipped_example_stops_at_the_judge_check_naming_why(local_model_server, tmp_path):
    spec = example_spec(local_model_server, tmp_path)
    proc, seconds = run_cli(["run", str(spec), "--json"], tmp_path, timeout=3600)
    print(f"\njudge check of the example's judge: exit {proc.returncode} after {seconds:.0f} s")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: judge openai-compatible/{local_model_server.model_name} gave 0 of 4 usable "
                           "judgements on the calibration answers ("), proc.stderr
    assert line.endswith(ADVICE) and proc.stdout == ""
    listed, _ = run_cli(["status"], tmp_path)  # nothing was written: no sweep
    assert listed.returncode != 0 and "no sweeps" in listed.stderr, listed.stdout + listed.stderr
