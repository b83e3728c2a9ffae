"""The typed contracts of the results layer (SQLite): the stored summary is SweepSummary's JSON and reads
back as the same model; the run record is RunRecord's JSON; aggregation stores but never claims."""

from __future__ import annotations

import json

import pytest

from afpbench.reference.loader import protocol
from afpbench.workers.results.aggregation import aggregate_sweep, snapshot, stored_summary
from afpbench.workers.results.record_model import GraderPromptFile, RunRecord
from afpbench.workers.results.records import records_jsonl, run_record
from afpbench.workers.results.summary import (
    FixtureConditionRow,
    FixtureRows,
    PairedComparison,
    PendingComparison,
    RunSummary,
    SweepSummary,
    joined,
)
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, JudgementRow, SweepStatus
from tests.unit.sweep_builder import CellMaker, make_sweep

PASS, FAIL = "MODEL_PASS", "MODEL_FAIL"


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


def _pairs(sweep_id: str, high_risk_repeats: int, status: str = SweepStatus.complete) -> list[int]:
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, sweep_id, status=status))
        ids = []
        for r, (c, b) in enumerate([(PASS, FAIL), (PASS, FAIL), (FAIL, PASS), (PASS, PASS)], start=1):
            ids += [cells.add("C", "P01", c, repeat=r), cells.add("B", "P01", b, repeat=r)]
        for cond in ("B", "C"):
            for _ in range(high_risk_repeats):
                ids.append(cells.add(cond, "P05", PASS, high_risk=True))
        ids.append(cells.add("C", "P02", "INFRA_ERROR", reason="reset"))
    return ids


def test_stored_summary_is_the_models_json_and_reads_back_equal(db):
    _pairs("sw", 3)
    with session_scope() as s:
        s.add(Aggregate(sweep_id="sw", claimed_by="test"))
    summary = aggregate_sweep("sw")
    assert isinstance(summary, SweepSummary)
    with session_scope() as s:
        stored = s.get(Aggregate, "sw")
        assert "by_fixture_condition" not in stored.summary  # the rows have their own column
        assert stored.summary | {"by_fixture_condition": stored.fixture_rows} == summary.model_dump(mode="json")
    assert stored_summary("sw") == summary
    assert isinstance(_comparison(summary, "C vs B"), PairedComparison)
    assert summary.totals.passed == 11 and summary.totals.model_dump()["pass"] == 11


def test_a_part_of_the_summary_is_read_without_the_per_fixture_rows(db):
    """`afpbench run` reads RunSummary: the per-fixture rows (2.8 MB of JSON at 10,000 fixtures) are never
    parsed for it. Rows spoilt in the database leave the part readable and the whole summary unreadable."""
    _pairs("part", 3)
    with session_scope() as s:
        s.add(Aggregate(sweep_id="part", claimed_by="test"))
    summary = aggregate_sweep("part")
    with session_scope() as s:
        s.get(Aggregate, "part").fixture_rows = {"not": "rows"}
    part = stored_summary("part", RunSummary)
    assert part is not None and part.by_model_condition == summary.by_model_condition
    assert stored_summary("part") is None  # the whole summary does not validate: computed afresh by callers


def test_a_summary_stored_with_its_rows_inside_reads_back(db):
    """Migration 0005: a summary stored before it holds by_fixture_condition inside and no fixture_rows."""
    _pairs("pre5", 3)
    with session_scope() as s:
        s.add(Aggregate(sweep_id="pre5", claimed_by="test"))
    summary = aggregate_sweep("pre5")
    with session_scope() as s:
        row = s.get(Aggregate, "pre5")
        row.summary, row.fixture_rows = summary.model_dump(mode="json"), None
    assert stored_summary("pre5") == summary
    assert stored_summary("pre5", RunSummary).comparisons == summary.comparisons


def test_fixture_rows_json_is_pydantics_json_of_the_rows():
    """The rows are written from their shared blocks (never built as models for the column); the text is
    exactly what pydantic writes for the models, labels with quotes, backslashes and non-ASCII included."""
    from pydantic import TypeAdapter

    from afpbench.scoring.rates import FAIL as F
    from afpbench.scoring.rates import PASS as P
    from afpbench.scoring.rates import rate_block

    zero, mixed = rate_block({P: 3}), rate_block({P: 2, F: 1, "INFRA_ERROR": 4, "UNFINISHED": 1})
    blocks = {("P01", "1.0", "A"): zero, ('q"uote\\', "2", "B"): mixed, ("Zürich-😀", "1.0", "C"): zero,
              ("P05", "3.1.4", "D"): mixed}
    rows = FixtureRows(blocks, frozenset({("P05", "3.1.4"), ("Zürich-😀", "1.0")}))
    models = rows.models()
    assert [m.high_risk for m in models] == [False, False, True, True]
    assert rows.json() == TypeAdapter(list[FixtureConditionRow]).dump_json(models).decode()
    assert FixtureRows({}, frozenset()).json() == "[]"


@pytest.mark.parametrize("head", ["", "[]", "{}", " { } ", '"text"'])
def test_a_stored_head_that_is_no_object_with_fields_is_refused(head):
    with pytest.raises(ValueError, match="not a JSON object"):
        joined(head, "[]")


def test_pending_comparisons_carry_no_test_fields(db):
    _pairs("hr", 2)
    summary = snapshot("hr")
    pending = _comparison(summary, "C vs B")
    assert isinstance(pending, PendingComparison)
    assert set(pending.model_dump()) == {"model", "model_hash", "comparison", "first", "second", "status", "reading"}


def test_aggregation_stores_only_into_a_claimed_row(db):
    """The Aggregate row is the completion claim; aggregation never creates it (the caller claims first)."""
    _pairs("fin", 3, status=SweepStatus.running)
    summary = aggregate_sweep("fin")
    assert summary.unfinished == 0 and summary.complete is False  # not claimed: the sweep is not marked complete
    with session_scope() as s:
        assert s.get(Aggregate, "fin") is None
    assert stored_summary("fin") is None


def test_stored_summary_of_another_shape_is_not_returned(db):
    _pairs("old", 3)
    with session_scope() as s:
        s.add(Aggregate(sweep_id="old", claimed_by="test"))
    assert stored_summary("old") is None  # claimed, not computed yet
    with session_scope() as s:
        s.get(Aggregate, "old").summary = {"sweep_id": "old", "totals": {}}  # written by another version
    assert stored_summary("old") is None
    assert stored_summary("nope") is None


def test_run_record_is_the_models_json_with_every_protocol_field(db):
    ids = _pairs("rec", 3)
    with session_scope() as s:
        s.add(JudgementRow(cell_id=ids[0], scoring_run=1, judge_label="j", prompt_sha256="h", raw_text="{}",
                        parsed={"scores": {"task_correctness": 2}, "rationales": {"task_correctness": "ok"}}))
    with session_scope() as s:
        record = run_record(s, ids[0])
        lines = list(records_jsonl(s, "rec", judge_prompt_file="judge_prompt.md"))
    dumped = record.model_dump(mode="json")
    assert [f for f in protocol()["run_record"] if f not in dumped] == []
    assert RunRecord.model_validate(dumped) == record
    assert record.grader_model == ["j"] and record.grader_prompt.sha256 == ["h"]
    first = RunRecord.model_validate_json(lines[0])
    assert isinstance(first.grader_prompt, GraderPromptFile) and first.grader_prompt.text_file == "judge_prompt.md"
    assert lines[0] == json.dumps(first.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)
    assert first.component_scores_and_rationale.judge_rationales[0].rationales == {"task_correctness": "ok"}


def _comparison(summary: SweepSummary, name: str):
    hits = [c for c in summary.comparisons if c.comparison == name]
    assert len(hits) == 1
    return hits[0]
