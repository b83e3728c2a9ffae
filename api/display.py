"""What the CLI prints: the progress bar, the end-of-run summary and the --json summary.

The summary answers the protocol's question at a glance: per model and condition the pass rate
PASS/(PASS+FAIL) with n and its exact interval, the excluded counts beside it, and the paired
comparisons with their interval. It fits 80 columns: excluded states are abbreviated with a legend,
text columns fold, and no number is ever cut (numbers never wrap).

Database and statistics modules are imported inside the functions that need them, so importing this
module (every CLI command does) costs only rich.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

# Excluded states as short column heads (the legend under the table spells them out).
EXCLUDED_ABBREVIATIONS = {"PROVIDER_BLOCK": "PB", "INFRA_ERROR": "IE", "INVALID_TEST": "IT",
                          "GRADER_DISPUTE": "GD", "unfinished": "UF"}
NO_JUDGES_NOTE = ("no judges (judges: [] in the spec): the rubric is not scored, so every answered cell "
                  "ends GRADER_DISPUTE awaiting a human decision (`afpbench adjudicate`); add judges to "
                  "score automatically")


@contextmanager
def progress_bar(console: Console, disable: bool = False) -> Iterator:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=disable,
        transient=False,
    )
    with bar:
        task = bar.add_task("cells", total=None)

        def update(p) -> None:
            bar.update(task, total=p.total, completed=p.done)

        yield update


def summary_json(sweep_id: str, progress, attempts: int, database_url: str) -> dict:
    """The run's summary as JSON. The rates per model and condition, the comparisons and the exclusion
    balance are the sweep summary's own (workers/results/aggregation.py: the report's reading)."""
    from sqlalchemy import func
    from sqlalchemy import select as select_columns  # sqlmodel's select takes at most four columns
    from sqlmodel import col, select

    from afpbench.scoring.rates import EXCLUDED, FAIL, PASS
    from afpbench.scoring.states import pass_rate
    from afpbench.workers.errors import SweepNotFound
    from afpbench.workers.results.aggregation import snapshot, stored_summary
    from afpbench.workers.results.summary import RunSummary
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Cell, Sweep

    # A finished sweep has its summary stored (only the parts shown are read); a running one is computed now.
    summary = (stored_summary(sweep_id, RunSummary) if progress.finished else None) or snapshot(sweep_id, interim=None)
    with session_scope() as session:
        # The columns shown, not the row: its stored inputs hold every fixture text (70 MB at 10,000).
        sweep = session.execute(
            select_columns(col(Sweep.name), col(Sweep.simulated), col(Sweep.seal_hash), col(Sweep.notices),
                           col(Sweep.spec)).where(col(Sweep.id) == sweep_id)
        ).first()
        if sweep is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        rows = session.execute(
            select(col(Cell.condition), col(Cell.phase), col(Cell.state), func.count())
            .where(col(Cell.sweep_id) == sweep_id)
            .group_by(Cell.condition, Cell.phase, col(Cell.state))
        ).all()
        by_condition: dict[str, dict[str, int]] = {}
        for condition, phase, state, n in rows:
            key = state or f"({phase})"
            slot = by_condition.setdefault(condition, {})
            slot[key] = slot.get(key, 0) + n
        rates = {}
        for condition, counts in sorted(by_condition.items()):
            p, f = counts.get(PASS, 0), counts.get(FAIL, 0)
            rates[condition] = {
                "pass": p,
                "n": p + f,
                "pass_rate": pass_rate(p, f),
                "excluded": {s: counts[s] for s in EXCLUDED if counts.get(s)},
            }
        return {
            "sweep_id": sweep_id,
            "name": sweep.name,
            "simulated": sweep.simulated,
            "status": progress.status,
            "seal": sweep.seal_hash,
            "cells": progress.total,
            "done": progress.done,
            "by_phase": progress.phases,
            "by_state": progress.states,
            "by_condition": dict(sorted(by_condition.items())),
            "pass_rate_by_condition": rates,
            "attempts": attempts,
            "exclusion_balance": summary.exclusion_balance.model_dump(mode="json"),
            "notices": sweep.notices,
            "database": database_url,
            "judges": [j.get("label") or f"{j['provider']}/{j['model']}" for j in sweep.spec.get("judges", [])],
            "by_model_condition": [r.model_dump(mode="json") for r in summary.by_model_condition],
            "comparisons": [c.model_dump(mode="json") for c in summary.comparisons],
            "no_scored_cell": summary.no_scored_cell,
        }


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _rate_cells(row: dict[str, Any]) -> tuple[str, str, str]:
    """(PASS/n, rate, 95% interval) of one rate block."""
    if not row["n"]:
        return "0/0", "-", "-"
    low, high = row["pass_rate_ci95"]
    return f"{row['pass']}/{row['n']}", _pct(row["pass_rate"]), f"{_pct(low)}-{_pct(high)}"


def _rates_table(summary: dict) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="pass rate PASS/(PASS+FAIL) per model and condition",
                  title_justify="left")
    table.add_column("model", overflow="fold", ratio=1, min_width=8)
    table.add_column("cond", no_wrap=True)
    table.add_column("PASS/n", justify="right", no_wrap=True)
    table.add_column("rate", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    for head in EXCLUDED_ABBREVIATIONS.values():
        table.add_column(head, justify="right", no_wrap=True)
    previous = None
    for row in summary.get("by_model_condition", []):
        model = row["model"] if row["model"] != previous else ""
        previous = row["model"]
        excluded = [str(row["excluded"].get(state, 0)) for state in list(EXCLUDED_ABBREVIATIONS)[:-1]]
        table.add_row(Text(model), row["condition"], *_rate_cells(row), *excluded, str(row["unfinished"]))
    return table


def _signed_pts(x: float) -> str:
    return f"{x * 100:+.0f}"


def _comparisons_table(summary: dict) -> Table | Text:
    rows = sorted(summary.get("comparisons", []), key=lambda c: c["model"])  # stable: keeps C vs B first
    if rows and all(c["status"] == "pending" for c in rows):
        return Text(f"paired comparisons: {rows[0]['reading']}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left",
                  title="paired comparisons (same model, fixture, repeat): first minus second, points")
    table.add_column("model", overflow="fold", ratio=1, min_width=8)
    table.add_column("compare", no_wrap=True)
    table.add_column("diff", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    table.add_column("McNemar p", justify="right", no_wrap=True)
    table.add_column("pairs", justify="right", no_wrap=True)
    previous = None
    for c in rows:
        model = c["model"] if c["model"] != previous else ""
        previous = c["model"]
        if c["status"] == "ok":
            low, high = c["difference_ci95"]
            table.add_row(Text(model), c["comparison"], _signed_pts(c["difference"]),
                          f"{_signed_pts(low)} to {_signed_pts(high)}", f"{c['p_value']:.3g}", str(c["n_pairs"]))
        else:
            table.add_row(Text(model), c["comparison"], "-", "-", "-", str(c.get("n_pairs", 0)))
    return table


def _notes(summary: dict) -> list[str]:
    legend = ", ".join(f"{short} {state}" for state, short in EXCLUDED_ABBREVIATIONS.items())
    notes = [
        f"excluded, outside the rate: {legend}; 95% CI: exact Clopper-Pearson; "
        "comparison CI: Newcombe's paired interval",
        f"{summary['done']}/{summary['cells']} cells done, {summary['attempts']} attempts; "
        f"seal {summary['seal'][:16]}…; database {summary['database']}",
    ]
    if summary.get("judges") == []:
        notes.append(NO_JUDGES_NOTE)
    balance = summary["exclusion_balance"]
    flagged = [f"{t['model']} {t['comparison']} FLAGGED (Fisher exact p = {t['p_value']:.3g})"
               for t in balance["comparisons"] if t["flagged"]]
    tested = f"{len(balance['comparisons'])} tested, two-sided Fisher exact, p < {balance['alpha']:g}"
    notes.append("exclusion balance: " + ("; ".join(flagged) if flagged else f"no comparison flagged ({tested})"))
    notes += [f"notice: {n}" for n in summary["notices"]]
    return notes


def summary_table(summary: dict) -> Group:
    """The end-of-run and `status` summary (a rich renderable)."""
    label = " [yellow](SIMULATED model output)[/yellow]" if summary["simulated"] else ""
    title = Text.from_markup(f"[bold]sweep {summary['sweep_id']}[/bold] — ")
    title.append(summary["name"])  # a spec's name is data, never markup
    title.append_text(Text.from_markup(f"{label} [dim]{summary['status']}[/dim]"))
    parts: list[Any] = [title]
    if summary.get("no_scored_cell"):  # first: the rates below are empty, and not a result
        parts.append(Text(summary["no_scored_cell"], style="bold red"))
    parts.append(_rates_table(summary))
    if summary.get("comparisons"):
        parts.append(_comparisons_table(summary))
    parts += [Text(note, style="dim") for note in _notes(summary)]
    return Group(*parts)
