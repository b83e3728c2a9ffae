"""The validity gate over a sweep's fixtures on two processes (workers/sweeps/gate_run.py).

Rule (validity gate): every fixture's report is the one the gate gives it, whatever runs it. The split
run must equal the one-process run exactly (reports and their order), a helper process that fails
leaves the parent to gate its half, and no fork happens while another thread is alive.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions, load_judge_prompt
from afpbench.scoring.render import render
from afpbench.scoring.validity import check_fixture
from afpbench.scoring.vocabulary import afp_terms
from afpbench.workers.sweeps import gate_run

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork, 2 cores")


def _variants(n: int) -> list:
    """n fixtures: the eight pilots under new ids, some broken so that reports differ (failures kept)."""
    pilots = load_fixtures()
    out = []
    for i in range(n):
        base = pilots[i % len(pilots)]
        changes: dict = {"id": f"V{i:04d}"}
        if i % 3 == 0:  # a grader fact the model never sees: fails visible_to_model
            changes["grader_facts"] = [*base.grader_facts, f"hidden figure {1000 + i} EUR"]
        out.append(base.model_copy(update=changes))
    return out


def _gate():
    instructions, judge_prompt = load_instructions(), load_judge_prompt()
    terms = afp_terms([instructions.text("C"), instructions.text("D")])
    calls: list[int] = []

    def gate(fx) -> dict:
        calls.append(os.getpid())
        prompts = {c: render(c, fx, instructions.text(c)) for c in "ABCD"}
        report = check_fixture(fx, prompts, terms, judge_prompt)
        return {"passed": report.passed, "failures": [{"check": f.check, "detail": f.detail} for f in report.failures]}

    return gate, calls


def split_gate_gives_the_one_process_reports() -> None:
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES + 41)
    gate, calls = _gate()
    one = {fx.id: gate(fx) for fx in fixtures}
    calls.clear()
    split = gate_run.gate_all(fixtures, gate)
    assert list(split) == [fx.id for fx in fixtures]
    assert split == one
    assert any(not r["passed"] for r in split.values()) and any(r["passed"] for r in split.values())
    # The parent gated only its half: the rest came from the child (whose calls this list never sees).
    assert len(calls) == len(fixtures) // 2, f"{len(calls)} of {len(fixtures)} gated here: no split"


def failing_helper_leaves_the_parent_to_gate_its_half() -> None:
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES)
    gate, calls = _gate()
    parent = os.getpid()

    def gate_that_fails_in_the_child(fx):
        if os.getpid() != parent:
            raise RuntimeError("the helper process breaks")
        return gate(fx)

    reports = gate_run.gate_all(fixtures, gate_that_fails_in_the_child)
    assert list(reports) == [fx.id for fx in fixtures]
    assert len(calls) == len(fixtures)  # every fixture gated here after the child failed
    assert reports == {fx.id: gate(fx) for fx in fixtures}


def _in_a_fresh_process(check: str) -> None:
    """Run one of the checks above in a new interpreter: a test process has other threads alive (earlier
    tests' lease keeper, HTTP deadlines...), and with any other thread the gate rightly never forks."""
    code = f"import tests.unit.test_gate_run as t; t.{check}()"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_split_gate_gives_exactly_the_one_process_reports_in_order():
    _in_a_fresh_process("split_gate_gives_the_one_process_reports")


def test_a_failing_helper_leaves_the_parent_to_gate_its_half():
    _in_a_fresh_process("failing_helper_leaves_the_parent_to_gate_its_half")


def test_no_fork_while_another_thread_is_alive():
    fixtures = _variants(gate_run.SPLIT_FROM_FIXTURES)
    gate, calls = _gate()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        gate_run.gate_all(fixtures, gate)
    finally:
        stop.set()
        other.join()
    assert calls == [os.getpid()] * len(fixtures), "a process was forked beside a live thread"
