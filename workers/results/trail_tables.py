"""The trail tables of a report: human decisions, tool calls written as text, reruns (what changed a cell's
state after its scoring, or what a model did instead of calling a tool). Listed in REPORT_TABLES by
workers/results/tables.py, defined as every table is (workers/results/table_spec.py)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from afpbench.workers.results.summary import HumanDecisionEntry, RerunEntry, SweepSummary, WrittenToolCallEntry
from afpbench.workers.results.table_spec import CONDITION, COUNT, LABEL, MODEL, YES_NO, Column, Table

# The cell a trail row is about: its id (for `afpbench show`), model, condition, fixture and repeat.
CELL_COLUMNS: tuple[Column[Any], ...] = (
    Column("cell_id", "cell", attrgetter("cell_id"), COUNT), MODEL, CONDITION,
    Column("fixture", "fixture", lambda r: f"{r.fixture} r{r.repeat}"))


def _decisions_note(s: SweepSummary) -> str:
    if not s.human_decisions:
        return "no human decisions"
    return (f"{len(s.human_decisions)} human decisions set the state of these cells (an override changed a "
            "judged verdict and needed a reason); the sealed inputs are unchanged")


HUMAN_DECISIONS = Table[HumanDecisionEntry](
    "human_decisions", "Human decisions",
    (*CELL_COLUMNS,
     Column("from_to", "from -> to", lambda d: f"{d.from_state or '-'} -> {d.to_state}"),
     Column("kind", "kind", lambda d: "override" if d.override else "dispute", LABEL),
     Column("reviewer", "reviewer", attrgetter("reviewer")), Column("reason", "reason", attrgetter("reason")),
     Column("decided_at", "decided at (UTC)", attrgetter("decided_at"))),
    attrgetter("human_decisions"), _decisions_note)

WRITTEN_TOOL_CALLS = Table[WrittenToolCallEntry](
    "written_tool_calls", "Tool calls written as text",
    (*CELL_COLUMNS,
     Column("tools", "tools", lambda w: ", ".join(w.tools)),
     Column("whole_answer", "whole answer", attrgetter("whole_answer"), YES_NO),
     Column("state", "state", attrgetter("state"), LABEL)),
    attrgetter("written_tool_calls"),
    lambda s: ("the answer carried a tool call as text instead of making it: never executed, scored as text"
               if s.written_tool_calls else "no answer wrote a tool call as text"))


def _reruns_note(s: SweepSummary) -> str:
    if not s.reruns:
        return "no rerun"
    return (f"{s.superseded.attempts} attempts and {s.superseded.results} results superseded by reruns: kept on "
            "record (run records, records.jsonl), never counted; each cell's latest result is the one counted")


RERUNS = Table[RerunEntry](
    "reruns", "Reruns (INFRA_ERROR / PROVIDER_BLOCK cells given new attempts)",
    (Column("number", "rerun", attrgetter("number"), COUNT), Column("at", "at (UTC)", attrgetter("at")),
     Column("chosen", "chosen", lambda r: " ".join([",".join(r.states), *(f"{k}={v}" for k, v in
                                                   (("model", r.model), ("fixture", r.fixture)) if v)])),
     Column("cells", "cells", attrgetter("cells"), COUNT), Column("note", "note", lambda r: r.note or "-")),
    attrgetter("reruns"), _reruns_note)
