"""What the CLI prints: the progress bar and the end-of-run summary (of api/run_overview.py's RunOverview).

The summary answers the protocol's question at a glance: per model and condition the pass rate
PASS/(PASS+FAIL) with n and its exact interval, the excluded counts beside it, and the paired
comparisons with their interval (workers/results/tables.py: TERMINAL_TABLES, rendered narrow). It fits
80 columns: short heads with a legend, text columns fold, and no number is ever cut (numbers never wrap).

Database and statistics modules are imported inside the functions that need them, so importing this
module (every CLI command does) costs only rich.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from afpbench.api.run_overview import RunOverview
    from afpbench.workers.results.table_spec import RenderedTable

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
        TextColumn("{task.fields[stages]}", markup=False),
        console=console,
        disable=disable,
        transient=False,
    )
    with bar:
        task = bar.add_task("decided", total=None, stages="")

        def update(p) -> None:  # the bar counts decided cells; beside it, where the others stand
            s = p.stages
            waiting = f" ({p.waiting_for_slot} waiting for a slot)" if p.waiting_for_slot else ""
            bar.update(task, total=p.total, completed=p.done, description=f"decided{waiting}",
                       stages=f"answering {s.answering} · answered {s.answered} · judging {s.judging}")

        yield update


def _rich_table(table: RenderedTable) -> Group:
    """A rendered table (narrow) in rich: text folds, numbers are right-aligned and never wrap; a first
    column's repeats are left blank (a model's rows read as one group). The title above and the note and
    the legend of short heads below wrap at the terminal's width, not the table's."""
    # No edges and one space of padding: 80 columns go to the cells, not to the frame.
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), pad_edge=False)
    for head in table.columns:
        if head.fold:
            out.add_column(head.header, overflow="fold", min_width=8)
        else:
            out.add_column(head.header, justify="right" if head.numeric else "left", no_wrap=True)
    previous = None
    for row in table.rows:
        first = row[0] if row[0] != previous else ""
        previous = row[0]
        out.add_row(Text(first), *(Text(cell) for cell in row[1:]))
    notes = [table.note] * bool(table.note) + [f"short heads: {', '.join(table.legend)}"] * bool(table.legend)
    return Group(Text(table.title, style="bold"), out, *(Text(note, style="dim") for note in notes))


def _notes(overview: RunOverview) -> list[str]:
    from afpbench.workers.results.spend import spend_lines
    from afpbench.workers.results.table_spec import condition_legend

    notes = [
        condition_legend(overview.by_condition),
        f"cells: {overview.stages.line()}",
        f"{overview.done}/{overview.cells} cells done, {overview.attempts} attempts; "
        f"seal {(overview.seal or '')[:16]}…; database {overview.database}",
    ]
    if overview.waiting_for_slot:
        notes.append(f"{overview.waiting_for_slot} cell(s) waiting for their pool's rate or in-flight slot to be "
                     "scored (a wait spends no attempt; AFP_SLOT_WAIT_S)")
    if overview.judges == []:
        notes.append(NO_JUDGES_NOTE)
    notes += _human_notes(overview)
    balance = overview.exclusion_balance
    flagged = [f"{t.model} {t.comparison} FLAGGED (Fisher exact p = {t.p_value:.3g})"
               for t in balance.comparisons if t.flagged]
    tested = f"{len(balance.comparisons)} tested, two-sided Fisher exact, p < {balance.alpha:g}"
    notes.append("exclusion balance: " + ("; ".join(flagged) if flagged else f"no comparison flagged ({tested})"))
    notes += spend_lines(overview.cost, overview.budget)
    notes += [f"notice: {n}" for n in overview.notices]
    return notes


def _human_notes(overview: RunOverview) -> list[str]:
    """Human decisions made and disputes awaiting one: a reader sees that people set some states."""
    out = []
    if overview.human_decisions:
        n = overview.human_decisions
        out.append(f"human decisions: {n} (`afpbench cells` marks the cells, the report lists each)"
                   if n != 1 else "human decisions: 1 (`afpbench cells` marks the cell, the report lists it)")
    awaiting = overview.by_state.get("GRADER_DISPUTE", 0)
    if awaiting:
        out.append(f"awaiting a human decision: {awaiting} GRADER_DISPUTE (`afpbench adjudicate list`)")
    return out


def summary_table(overview: RunOverview) -> Group:
    """The end-of-run and `status` summary (a rich renderable) of workers/results/tables.py's
    TERMINAL_TABLES. It fits 80 columns."""
    from afpbench.workers.results.summary import PendingComparison
    from afpbench.workers.results.tables import BATCHES, COMPARISONS, TERMINAL_TABLES
    from afpbench.workers.store.batch_models import OPEN_BATCH

    label = " [yellow](SIMULATED model output)[/yellow]" if overview.simulated else ""
    title = Text.from_markup(f"[bold]sweep {overview.sweep_id}[/bold] — ")
    title.append(overview.name)  # a spec's name is data, never markup
    title.append_text(Text.from_markup(f"{label} [dim]{overview.status}[/dim]"))
    parts: list[Any] = [title]
    if overview.no_scored_cell:  # first: the rates below are empty, and not a result
        parts.append(Text(overview.no_scored_cell, style="bold red"))
    comparisons = overview.comparisons
    pending = bool(comparisons) and all(isinstance(c, PendingComparison) for c in comparisons)
    for table in TERMINAL_TABLES:
        if table is COMPARISONS and pending:  # one line says why, instead of rows of "-"
            parts += [Text(""), Text(f"paired comparisons: {comparisons[0].reading}")]
            continue
        rendered = table.render(overview, narrow=True)
        if rendered.rows:
            parts += [Text(""), _rich_table(rendered)]
    if overview.batches:  # the batch lane's batches and their state
        parts += [Text(""), _rich_table(BATCHES.render(overview.batches, narrow=True))]
        # The error column is too wide for 80 columns: an open batch's says why it waits (e.g. an unconfirmed
        # submission the provider is asked about before anything is sent again), so it is printed below.
        parts += [Text(f"batch {b.id} ({b.status}): {b.error}", style="yellow") for b in overview.batches
                  if b.error and b.status in OPEN_BATCH]
    parts += [Text(""), *(Text(note, style="dim") for note in _notes(overview))]
    return Group(*parts)
