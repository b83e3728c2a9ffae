"""Result commands: show a run record, aggregate, report, export the publication bundle.

Register with `cli_report.register(app)`. Every failure is raised as api.cli_results.CommandError so the
CLI prints it as one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from afpbench.api.cli_results import SWEEP_HELP, CommandError, latest_or

if TYPE_CHECKING:
    from afpbench.workers.results.summary import SweepSummary

FORMATS = ("md", "html", "json")


def _summary(sweep: str) -> SweepSummary:
    from afpbench.workers.errors import SweepNotFound
    from afpbench.workers.results.aggregation import snapshot

    try:
        return snapshot(sweep, interim=None)
    except SweepNotFound as exc:
        raise CommandError(str(exc)) from None


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _written(record: object) -> str:
    from afpbench.scoring.written_tool_call import WrittenToolCalls

    written = WrittenToolCalls.from_record(record)
    return written.describe() if written else "none"


def record_json(cell: int) -> dict:
    """One cell's run record as JSON data; an unknown cell is one line."""
    from afpbench.workers.errors import RecordNotFound
    from afpbench.workers.results.records import run_record
    from afpbench.workers.store.db import session_scope

    try:
        with session_scope() as session:
            return run_record(session, cell).model_dump(mode="json")
    except RecordNotFound as exc:
        raise CommandError(str(exc)) from None


def record_table(record: dict) -> Table:
    sim = record["simulated"]
    flag = " [yellow](SIMULATED)[/yellow]" if sim["model_output"] or sim["grading"] or sim["sweep"] else ""
    table = Table(title=f"cell {record['cell_id']}: {record['cell_key']}{flag}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    scores = record["component_scores_and_rationale"]
    rows = [
        ("model", f"{record['model']} ({record['provider']}; served {record['served_model_version']})"),
        ("reasoning mode", json.dumps(record["reasoning_mode"])),
        ("condition", f"{record['condition']} (instructions {record['instruction_version']['version']}, "
                      f"sha256 {str(record['instruction_version']['sha256'])[:16]}…)"),
        ("fixture", f"{record['fixture_id']}@{record['fixture_version']} repeat {record['repeat']}"
                    + (" (high risk)" if record["high_risk"] else "")),
        ("executed at", str(record["executed_at"])),
        ("result state", str(record["result_state"])),
        ("state reason", str(record["state_reason"] or "-")),
        ("scores", json.dumps(scores["scores"]) + f" total {scores['total']}"),
        ("fatal criterion", str(record["fatal_criterion"] or "-")),
        ("rationale", str(scores["rationale"])),
        ("tokens", json.dumps(record["tokens"])),
        ("tool calls", str(len(record["tool_calls"]))),
        ("tool call written as text", _written(record["written_tool_call"])),
        ("latency", f"{record['latency']['ms']} ms"),
        ("graders", ", ".join(record["grader_model"]) or "-"),
        ("grader prompt sha256", ", ".join(record["grader_prompt"]["sha256"]) or "-"),
        ("human review", json.dumps(record["human_review_outcome"])),
        ("attempts / results", f"{len(record['attempts'])} / {len(record['results'])}"),
        ("superseded", _superseded(record)),
        ("raw output", str(record["raw_output"]["text"])),
    ]
    for name, value in rows:
        table.add_row(name, Text(value))  # Text: model output and rationales are data, never rich markup
    return table


def _superseded(record: dict) -> str:
    """Which attempts and results a rerun superseded, and the rerun's note (else "-")."""
    attempts = [str(a["number"]) for a in record["attempts"] if a["superseded"]]
    results = [str(r["scoring_run"]) for r in record["results"] if r["superseded"]]
    if not attempts and not results:
        return "-"
    by = next(x["superseded"] for x in [*record["attempts"], *record["results"]] if x["superseded"])
    return f"attempts {', '.join(attempts) or '-'}; results (scoring runs) {', '.join(results) or '-'}; by {by}"


def register(app: typer.Typer) -> None:
    @app.command()
    def show(cell: int = typer.Argument(..., help="cell id"),
             as_json: bool = typer.Option(False, "--json", help="print the full run record as JSON")) -> None:
        """Show the run record of one cell (every field the protocol requires)."""
        record = record_json(cell)
        if as_json:
            typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        else:
            Console().print(record_table(record))

    @app.command()
    def aggregate(sweep: str) -> None:
        """Recompute a sweep's summary now (stored once the sweep is complete; interim otherwise)."""
        from afpbench.workers.cells.finish import aggregate_now
        from afpbench.workers.errors import SweepNotFound

        try:
            summary = aggregate_now(sweep, "cli")
        except SweepNotFound as exc:
            raise CommandError(str(exc)) from None
        label = "stored" if summary.complete else "interim, not stored (sweep not complete)"
        sim = " SIMULATED" if summary.simulated else ""
        typer.echo(f"sweep {sweep}: {summary.cells} cells, {summary.unfinished} unfinished; summary {label}{sim}")

    @app.command()
    def report(sweep: str | None = typer.Argument(None, help=SWEEP_HELP),
               fmt: str = typer.Option("md", "--format", help="md, html or json"),
               out: Path | None = typer.Option(None, "--out", help="write to this file instead of stdout")) -> None:
        """Render the sweep's summary tables (HTML: self-contained page with plots)."""
        from afpbench.api.report import render_report

        if fmt not in FORMATS:
            raise CommandError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        text = render_report(_summary(latest_or(sweep)), fmt)
        if out is None:
            typer.echo(text, nl=False)
            return
        try:
            _write_atomically(out, text)
        except OSError as exc:
            raise CommandError(f"{out}: cannot write the report: {exc.strerror}") from None
        typer.echo(f"wrote {out}")

    @app.command()
    def export(where: list[str] = typer.Argument(..., metavar="[SWEEP] DIRECTORY",
                                                 help="sweep id (omitted: the latest) and the bundle's directory")
               ) -> None:
        """Write the publication bundle; STATUS.md says published only when every item is present."""
        from afpbench.api.report import render_report
        from afpbench.workers.errors import ExportError, SweepNotFound
        from afpbench.workers.results.export import export_bundle

        if len(where) > 2:
            raise typer.BadParameter(f"give [SWEEP] DIRECTORY, not {len(where)} arguments", param_hint="SWEEP")
        sweep, directory = latest_or(where[0] if len(where) == 2 else None), Path(where[-1])
        try:
            result = export_bundle(sweep, directory, renderer=render_report)
        except (ExportError, SweepNotFound) as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"{directory}: cannot write the bundle: {exc.strerror or exc}") from None
        typer.echo(f"{result.directory}: {len(result.files)} files; status: {result.status}"
                   + (" (SIMULATED)" if result.simulated else ""))
        for item in result.missing:
            typer.echo(f"  missing: {item}")
