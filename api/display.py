"""What the CLI prints: the progress bar, the end-of-run table and the --json summary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import func, select
from sqlmodel import col

from afpbench.scoring.balance import exclusion_balance
from afpbench.scoring.rates import EXCLUDED, FAIL, PASS, UNFINISHED
from afpbench.scoring.states import ResultState, pass_rate
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.results.aggregation import COMPARISONS
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Sweep

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
        balance = _balance(session, sweep_id)
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
            "exclusion_balance": balance,
            "notices": sweep.notices,
            "database": database_url,
        }


def _balance(session, sweep_id: str) -> dict:
    """The exclusion balance (scoring/balance.py) from one GROUP BY: the same reading as the report's."""
    cols = (col(Cell.model_hash), col(Cell.model_label), col(Cell.condition), col(Cell.phase), col(Cell.state))
    counts: dict[tuple[str, str], dict[str, int]] = {}
    labels: dict[str, str] = {}
    for model_hash, label, condition, phase, state, n in session.execute(
        select(*cols, func.count()).where(col(Cell.sweep_id) == sweep_id).group_by(*cols)
    ).all():
        labels[model_hash] = label
        outcome = state if phase == Phase.done and state else UNFINISHED
        slot = counts.setdefault((model_hash, condition), {})
        slot[outcome] = slot.get(outcome, 0) + n
    return exclusion_balance(counts, labels, COMPARISONS).model_dump(mode="json")


def summary_table(summary: dict) -> Table:
    label = " [yellow](SIMULATED model output)[/yellow]" if summary["simulated"] else ""
    table = Table(title=f"sweep {summary['sweep_id']} — {summary['name']}{label}")
    table.add_column("condition")
    table.add_column("pass rate  PASS/(PASS+FAIL)", justify="right")
    columns = STATES + sorted({k for c in summary["by_condition"].values() for k in c if k not in STATES})
    for name in columns:
        table.add_column(name, justify="right")
    for condition, counts in summary["by_condition"].items():
        r = summary["pass_rate_by_condition"][condition]
        rate = f"{r['pass']}/{r['n']} = {r['pass_rate']:.0%}" if r["n"] else "n = 0"
        table.add_row(condition, rate, *[str(counts.get(c, 0)) for c in columns])
    notes = [
        f"{summary['done']}/{summary['cells']} cells done, {summary['attempts']} attempts",
        f"seal {summary['seal'][:16]}…",
        f"database {summary['database']}",
    ]
    balance = summary["exclusion_balance"]
    flagged = [f"{t['model']} {t['comparison']} FLAGGED (Fisher exact p = {t['p_value']:.3g})"
               for t in balance["comparisons"] if t["flagged"]]
    tested = f"{len(balance['comparisons'])} tested, two-sided Fisher exact, p < {balance['alpha']:g}"
    notes.append("exclusion balance: " + ("; ".join(flagged) if flagged else f"no comparison flagged ({tested})"))
    notes += [f"notice: {n}" for n in summary["notices"]]
    table.caption = "\n".join(notes)
    return table
