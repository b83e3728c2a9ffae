"""What `afpbench adjudicate show` prints: a disputed cell's record as readable text (rich renderables),
not escaped JSON. The record table of `afpbench show` (api/cli_report.py:record_table), then why the
cell is disputed, what each judge scored and why, and the cell's results and human decisions so far.
Model output, rationales and notes are data: printed as Text, never parsed as markup."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text


def _titled(title: str, *rows: tuple[str, ...], heads: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, head in enumerate(heads):
        table.add_column(head, overflow="fold", ratio=1 if i == len(heads) - 1 else None)
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def dispute_view(record: dict[str, Any], record_table: Table) -> Group:
    """`record` is the run record as JSON (workers/results/record_model.py:RunRecord)."""
    latest: dict[str, Any] = record["results"][-1]["details"] if record["results"] else {}
    reasons = latest.get("dispute_reasons") or []
    parts: list[Any] = [record_table, Text("")]
    parts.append(Text("why disputed: " + ("; ".join(map(str, reasons)) if reasons else
                                          str(record["state_reason"] or "-"))))
    judged = record["component_scores_and_rationale"]["judge_rationales"]
    rows = []
    for j in judged:
        scores, why = j.get("scores") or {}, j.get("rationales") or {}
        rows += [(f"{j['judge']} (round {j['round']})", dim, str(scores.get(dim, "-")), str(why.get(dim) or ""))
                 for dim in (scores or why)]
    parts.append(_titled("judges' scores and rationales", *rows, heads=("judge", "dimension", "score", "why"))
                 if rows else Text("no usable judgement in the latest scoring run"))
    results = [(str(r["scoring_run"]), str(r["state"]), str(r["details"].get("source", "scorer")),
                str(r["rationale"] or "-")) for r in record["results"]]
    parts.append(_titled("results, oldest first", *results, heads=("run", "state", "source", "rationale")))
    decisions = [(str(d["reviewer"]), f"{d['from_state'] or '-'} -> {d['state']}", str(d["reason"] or d["note"]))
                 for d in record["human_review_outcome"] or []]
    parts.append(_titled("human decisions", *decisions, heads=("reviewer", "from -> to", "reason"))
                 if decisions else Text("no human decision yet"))
    return Group(*parts)
