"""The everyday loop: `sweeps` (recent sweeps), `cells SWEEP` (ids, states, scores) and `init [DIR]`.

Register with `cli_loop.register(app)`. These commands answer at once: everything heavy (the database
layer, the spec models) is imported inside the command, and nothing here imports Celery.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from afpbench.api.cli_results import CommandError, latest_or

# `--example` names -> the example specs shipped in afpbench.reference/specs/.
EXAMPLES = {
    "local": "local-openai-compatible.yaml",
    "local-model": "local-model.yaml",  # against `afpbench local-model serve`
    "openai": "openai.yaml",
    "anthropic": "anthropic.yaml",
    "gemini": "gemini.yaml",
    "two-models": "two-models-with-judge.yaml",
}


def _state(value: str | None) -> str | None:
    if value is None:
        return None
    from afpbench.scoring.states import ResultState

    known = [s.value for s in ResultState]
    wanted = value.strip().upper()
    if wanted not in known:
        raise CommandError(f"--state: unknown result state {value!r}; known: {', '.join(known)}")
    return wanted


def _condition(value: str | None) -> str | None:
    if value is None:
        return None
    from afpbench.reference.protocol_facts import CONDITIONS

    if value.strip().upper() not in CONDITIONS:
        raise CommandError(f"--condition: unknown condition {value!r}; known: {', '.join(CONDITIONS)}")
    return value.strip().upper()


def _score(line) -> str:
    if line.total is None:
        return "-"
    dims = "".join("-" if v is None else str(v) for v in line.scores.values())
    return f"{line.total} ({dims})"


def register(app: typer.Typer) -> None:
    @app.command()
    def sweeps(limit: int = typer.Option(20, "--limit", min=1, max=1000, help="how many, newest first"),
               as_json: bool = typer.Option(False, "--json", help="print the list as JSON")) -> None:
        """Recent sweeps: id, name, models, status, progress, simulated, created."""
        from afpbench.workers.results.listing import recent_sweeps
        from afpbench.workers.store.db import session_scope

        with session_scope() as session:
            lines = recent_sweeps(session, limit)
        if as_json:
            typer.echo(json.dumps([line.as_json() for line in lines], indent=2))
            return
        if not lines:
            typer.echo("no sweeps in the database yet; run `afpbench run` first")
            return
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title="sweeps, newest first", caption="sim: simulated model output", box=box.SIMPLE_HEAD,
                      pad_edge=False)
        table.add_column("id", no_wrap=True)
        table.add_column("name", overflow="fold", ratio=1)
        table.add_column("models", overflow="fold", ratio=1)
        table.add_column("status", no_wrap=True)
        table.add_column("done", justify="right", no_wrap=True)
        table.add_column("sim", no_wrap=True)
        table.add_column("created (UTC)", no_wrap=True)
        for s in lines:
            table.add_row(s.id, Text(s.name), Text(", ".join(s.models)), s.status, f"{s.done}/{s.cells}",
                          "sim" if s.simulated else "", s.created_at.strftime("%y-%m-%d %H:%M"))
        Console().print(table)

    @app.command()
    def cells(
        sweep: str | None = typer.Argument(None, help="sweep id; omitted: the latest"),
        state: str | None = typer.Option(None, "--state", help="result state, e.g. GRADER_DISPUTE"),
        fixture: str | None = typer.Option(None, "--fixture", help="fixture id, or id@version"),
        condition: str | None = typer.Option(None, "--condition", help="A, B, C or D"),
        model: str | None = typer.Option(None, "--model",
                                         help="model label (as tables show it, e.g. sim), model name or hash"),
        as_json: bool = typer.Option(False, "--json", help="print the cells as JSON"),
    ) -> None:
        """A sweep's cells: ids (for `afpbench show ID`), states and scores."""
        from afpbench.workers.errors import SweepNotFound, UnknownFilterValue
        from afpbench.workers.results.listing import CellFilter, sweep_cells
        from afpbench.workers.store.db import session_scope

        where = CellFilter(state=_state(state), fixture=fixture, condition=_condition(condition), model=model)
        sweep_id = latest_or(sweep)
        try:
            with session_scope() as session:
                lines = sweep_cells(session, sweep_id, where)
        except (SweepNotFound, UnknownFilterValue) as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            typer.echo(json.dumps([line.as_json() for line in lines], indent=2))
            return
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"sweep {sweep_id}: {len(lines)} cells", box=box.SIMPLE_HEAD, pad_edge=False,
                      caption="score: total (task, evidence, uncertainty, failure control; 0-2 each)")
        table.add_column("id", justify="right", no_wrap=True)
        table.add_column("model", overflow="fold", ratio=1)
        table.add_column("cond", no_wrap=True)
        table.add_column("fixture", no_wrap=True)
        table.add_column("rep", justify="right", no_wrap=True)
        table.add_column("state", overflow="fold")
        table.add_column("score", no_wrap=True)
        table.add_column("fatal", overflow="fold", ratio=1)
        for c in lines:
            state = c.state or f"({c.phase})"
            table.add_row(str(c.id), Text(c.model), c.condition, c.fixture, str(c.repeat),
                          Text(state + (f" (human: {c.decided_by})" if c.decided_by else "")), _score(c),
                          c.fatal_criterion or "")
        Console().print(table)

    @app.command()
    def init(
        directory: Path = typer.Argument(Path("."), help="where to write the example spec"),
        example: str = typer.Option("local", "--example", help=f"one of: {', '.join(EXAMPLES)}"),
    ) -> None:
        """Write a commented example sweep spec to start from (never overwrites a file)."""
        from importlib import resources

        if example not in EXAMPLES:
            raise CommandError(f"--example: unknown example {example!r}; known: {', '.join(EXAMPLES)}")
        name = EXAMPLES[example]
        text = resources.files("afpbench.reference").joinpath("specs", name).read_text(encoding="utf-8")
        target = directory / name
        if directory.exists() and not directory.is_dir():
            raise CommandError(f"{directory}: not a directory")
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with target.open("x", encoding="utf-8") as out:  # "x": refuse to overwrite, atomically
                out.write(text)
        except FileExistsError:
            raise CommandError(f"{target}: already exists; not overwritten (remove it or choose another DIR)") from None
        except OSError as exc:
            raise CommandError(f"{target}: cannot write: {exc.strerror or exc}") from None
        typer.echo(f"wrote {target} ({example} example); edit it, then: afpbench run {target}")
