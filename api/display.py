"""What the CLI prints: the progress bar, the end-of-run table and the --json summary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import func
from sqlmodel import select

from afpbench.scoring.rates import EXCLUDED, FAIL, PASS
from afpbench.scoring.states import ResultState, pass_rate
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Sweep

STATES = [s.value for s in ResultState]


@contextmanager
def progress_bar(console: Console, disable: bool = False) -> Iterator:
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
    with session_scope() as session:
        sweep = session.get(Sweep, sweep_id)
        rows = session.execute(
            select(Cell.condition, Cell.phase, Cell.state, func.count())
            .where(Cell.sweep_id == sweep_id)
            .group_by(Cell.condition, Cell.phase, Cell.state)
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
            "notices": sweep.notices,
            "database": database_url,
        }


def summary_table(summary: dict) -> Table:
    label = " [yellow](SIMULATED model output)[/yellow]" if summary["simulated"] else ""
    table = Table(title=f"sweep {summary['sweep_id']} — {summary['name']}{label}")
    table.add_column("condition")
    table.add_column("pass rate  PASS/(PASS+FAIL)", justify="right")
    columns = STATES + sorted({k for c in summary["by_condition"].values() for k in c if k not in STATES})
    for col in columns:
        table.add_column(col, justify="right")
    for condition, counts in summary["by_condition"].items():
        r = summary["pass_rate_by_condition"][condition]
        rate = f"{r['pass']}/{r['n']} = {r['pass_rate']:.0%}" if r["n"] else "n = 0"
        table.add_row(condition, rate, *[str(counts.get(c, 0)) for c in columns])
    notes = [
        f"{summary['done']}/{summary['cells']} cells done, {summary['attempts']} attempts",
        f"seal {summary['seal'][:16]}…",
        f"database {summary['database']}",
    ]
    notes += [f"notice: {n}" for n in summary["notices"]]
    table.caption = "\n".join(notes)
    return table
