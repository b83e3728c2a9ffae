"""`afpbench`: the command-line front door.

Every known failure (bad fixture, bad spec, unknown provider, unreachable endpoint, refused key...)
ends as one line on stderr naming what is wrong, and exit status 2; nothing is half-written because
a sweep and its cells are created in one transaction after every check has passed. A run that
finishes with cells excluded for configuration reasons exits 3 (README, "Exit status").
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from afpbench.api import (
    cli_db,
    cli_fixtures,
    cli_localmodel,
    cli_loop,
    cli_plan,
    cli_report,
    cli_results,
    cli_run,
    cli_scoring,
    cli_serve,
    cli_view,
    cli_worker,
)

if TYPE_CHECKING:
    from afpbench.workers.errors import ServiceUnavailable

# Plain help (rich_markup_mode=None on every sub-app too): Typer's rich panels label a flag `<bool>`.
app = typer.Typer(
    rich_markup_mode=None, add_completion=False, no_args_is_help=True,
    help="afpbench: the AFP Benchmark Protocol at scale.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"afpbench {version('afpbench')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
) -> None:
    """afpbench: the AFP Benchmark Protocol at scale."""


app.add_typer(cli_fixtures.app, name="fixtures")
cli_results.register(app)
cli_loop.register(app)
cli_scoring.register(app)
cli_report.register(app)
cli_serve.register(app)
cli_view.register(app)
cli_db.register(app)
cli_localmodel.register(app)
cli_run.register(app)
cli_plan.register(app)
cli_worker.register(app)
console = Console(stderr=True)


def _usage_error(exc: BaseException) -> bool:
    """Click's usage errors (unknown command or option, bad value): Typer vendors Click in recent
    versions, so both Click's and Typer's exception types are accepted."""
    import click

    return isinstance(exc, click.ClickException) or (
        isinstance(exc, typer.TyperException) and hasattr(exc, "show") and hasattr(exc, "exit_code")
    )


def _database_unreachable(exc: BaseException) -> ServiceUnavailable | None:
    """For a database error a command met on its way (a read command opens the database when it first
    needs it), the database's own one-line refusal (ServiceUnavailable, exit 2) when the database does
    not answer now; None for any other failure, which then reads as unexpected."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    from afpbench.workers.errors import ServiceUnavailable
    from afpbench.workers.store.db import check_database

    try:
        check_database(schema=False)
    except ServiceUnavailable as refusal:
        return refusal
    return None


def main() -> None:
    """The console script: run the command, then leave without tearing the heap down (`_leave`)."""
    from afpbench.workers.memory import limit_heap_arenas

    limit_heap_arenas()  # before any thread: a run's or a worker's threads share two malloc arenas
    try:
        _run_command()
        code: str | int | None = 0
    except SystemExit as exc:
        code = exc.code
    _leave(code)


def _leave(code: str | int | None) -> NoReturn:
    """Exit with `code` as SystemExit would, but skip the interpreter's teardown of every object: after a
    1,000-cell run that teardown alone took 0.5 s, and it does nothing a finished command needs. What
    matters still happens first: the atexit handlers, the database engines disposed (closing SQLite
    writes its WAL back into the file, so the .db file alone holds every result), logs and output
    flushed. With another non-daemon thread alive the normal exit runs instead, as it waits for it."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if others:
        sys.exit(code)
    if code is None or isinstance(code, int):
        status = code or 0
    else:  # sys.exit("message"): printed on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    store = sys.modules.get("afpbench.workers.store.db")
    if store is not None:
        store.dispose_engines()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more can be said there
            pass
    os._exit(status)


def _run_command() -> None:
    """The one place that turns failures into what the user sees: usage errors as Click shows them
    (usage line, exit 2), known failures (AfpbenchError) as one line with their exit status, anything
    else as one line naming the exception (the traceback only with AFP_DEBUG=1)."""
    from afpbench.reference.errors import AfpbenchError

    logging.basicConfig(level=os.environ.get("AFP_LOG_LEVEL", "WARNING"))
    try:
        code = app(standalone_mode=False)  # click returns the exit code of typer.Exit here
        if isinstance(code, int) and code:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        console.print("aborted")
        sys.exit(130)
    except AfpbenchError as exc:
        if os.environ.get("AFP_DEBUG"):
            raise
        # escaped: a message quoting `pip install 'afpbench[local-model]'` is text, not Rich markup
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - the one place that turns failures into one line
        if _usage_error(exc):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("AFP_DEBUG"):
            raise
        unreachable = _database_unreachable(exc)
        if unreachable is not None:
            console.print(f"[red]error:[/red] {escape(str(unreachable))}", highlight=False, soft_wrap=True)
            sys.exit(unreachable.exit_code)
        console.print(
            f"[red]error:[/red] unexpected {type(exc).__name__}: {escape(str(exc))} "
            "(set AFP_DEBUG=1 for the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
