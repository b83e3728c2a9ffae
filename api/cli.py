"""`afpbench`: the command-line front door.

Every known failure (bad fixture, bad spec, unknown provider, unreachable endpoint, refused key...)
ends as one line on stderr naming what is wrong, and exit status 2; nothing is half-written because
a sweep and its cells are created in one transaction after every check has passed. A run that
finishes with cells excluded for configuration reasons exits 3 (README, "Exit status").
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
from contextlib import ExitStack
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from afpbench.api import (
    cli_db,
    cli_fixtures,
    cli_localmodel,
    cli_loop,
    cli_report,
    cli_results,
    cli_scoring,
    cli_serve,
    cli_view,
)
from afpbench.api.display import progress_bar, summary_json, summary_table

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="afpbench: the AFP Benchmark Protocol at scale."
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
console = Console(stderr=True)


@app.command()
def run(
    spec: str | None = typer.Argument(None, help="sweep spec YAML; omitted: the simulated demo sweep"),
    as_json: bool = typer.Option(False, "--json", help="print a machine-readable summary on stdout"),
    detach: bool = typer.Option(False, help="distributed mode: enqueue and return without waiting"),
    threads: int = typer.Option(0, help="embedded worker threads (default AFP_EMBEDDED_THREADS)"),
    fixtures: str | None = typer.Option(None, "--fixtures", help="only these fixture ids, e.g. P01,P08"),
    conditions: str | None = typer.Option(None, "--conditions", help="only these conditions, e.g. A,D"),
    models: str | None = typer.Option(None, "--models", help="only these models (label or model name), e.g. sim-1"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="only the first N fixtures in id order"),
    repeats: int | None = typer.Option(None, "--repeats", min=1, max=1000, help="repeats per cell (high-risk: >= 3)"),
) -> None:
    """Run a sweep. Embedded by default (SQLite + in-memory broker + in-process worker threads).

    Subset options change the spec before it is validated and sealed (docs/SPEC.md, "Running a subset")."""
    from afpbench.workers.errors import RunCancelled
    from afpbench.workers.memory import freeze_what_is_loaded
    from afpbench.workers.runs import attempts_count, check_services, start_sweep, wait_for
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim
    from afpbench.workers.store.db import size_pool
    from afpbench.workers.sweeps.spec import demo_spec, load_spec

    settings = get_settings()
    from afpbench.workers.sweeps.subset import Subset, apply_subset, split_list

    subset = Subset(split_list(fixtures, "--fixtures"), split_list(conditions, "--conditions"),
                    split_list(models, "--models"), limit, repeats)
    sweep_spec = apply_subset(load_spec(spec) if spec else demo_spec(), subset, spec or "demo")
    check_services(schema=False)  # before a worker or a simulator starts; the schema once inputs are read
    with ExitStack() as stack:
        if needs_local_sim([*sweep_spec.models, *sweep_spec.judges]):
            start_local_sim(stack, settings)
        if detach is False and not settings.embedded:
            console.print(
                "[dim]distributed mode: cells go to the broker; start `afpbench worker` processes[/dim]"
            )
        # The sweep before the embedded worker: its cells wait in the in-memory queues meanwhile, and with
        # no worker thread alive yet the validity gate may use a second process (workers/sweeps/gate_run.py).
        total_threads = threads or settings.embedded_threads
        pair = None
        if settings.embedded:
            size_pool(total_threads)  # before the engine is built (embedded.py)
            from afpbench.workers.embedded_pair import EmbeddedPair, may_split

            if may_split(sweep_spec, total_threads, settings):
                pair = EmbeddedPair(total_threads, settings.database_url)
                pair.hold()  # the first release waits for the fork below
        freeze_what_is_loaded()  # what is imported by now lives to the end: no collection walks it again
        try:
            sweep_id = start_sweep(sweep_spec)
        except BaseException:
            if pair is not None:
                pair.let_go()
            raise
        if settings.embedded:
            from afpbench.workers.embedded import embedded_worker

            threads_here = total_threads
            if pair is not None:
                stack.enter_context(pair)  # left after this process's worker: stops the child
                threads_here = pair.start(sweep_id)
                if pair.child_pid is not None:
                    console.print(f"[dim]embedded run on two processes: {threads_here} threads here, "
                                  f"{total_threads - threads_here} in process {pair.child_pid}[/dim]")
            worker = stack.enter_context(embedded_worker(threads_here))
            if pair is not None:  # left first: the child starts stopping while this worker stops
                stop_child = pair.ask_to_stop
                stack.push(lambda exc_type, *_: stop_child(warm=exc_type is None))
        if detach and not settings.embedded:
            typer.echo(sweep_id)
            return
        try:
            with progress_bar(console, disable=as_json) as update:
                final = wait_for(sweep_id, on_progress=update)
        except RunCancelled as exc:
            if settings.embedded:
                worker.stop_wait_s = CANCEL_WAIT_S
                if pair is not None:
                    pair.stop_wait_s = CANCEL_WAIT_S
                _exit_cancelled(stack, sweep_id, exc)
            raise
    summary = summary_json(sweep_id, final, attempts_count(sweep_id), settings.database_url_safe())
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        wide_console().print(summary_table(summary))
    _exit_status(sweep_id)


# After a cancel, how long a run waits for calls in flight to come back and record themselves.
CANCEL_WAIT_S = 3.0


def _exit_cancelled(stack: ExitStack, sweep_id: str, exc: Exception) -> None:
    """`afpbench cancel` stopped the sweep: stop the embedded worker (it waits CANCEL_WAIT_S for calls
    in flight to record themselves), record the tries still in flight as abandoned, and exit 4 now.
    os._exit, because a pool thread still blocked in a slow provider call (minutes on a CPU model)
    would otherwise keep the interpreter alive until its read timeout."""
    from afpbench.workers.runs import abandon_in_flight
    from afpbench.workers.store.db import dispose_engines

    stack.close()
    abandoned = abandon_in_flight(sweep_id)
    note = f"; {abandoned} request(s) still in flight recorded as interrupted" if abandoned else ""
    console.print(f"[red]error:[/red] {exc}{note}", highlight=False, soft_wrap=True)
    sys.stdout.flush()
    sys.stderr.flush()
    dispose_engines()
    os._exit(getattr(exc, "exit_code", 4))


def _exit_status(sweep_id: str) -> None:
    """0 only when every cell has a model-quality result or was excluded for what the model, the
    fixture or the scoring rules produced; 3 (one line saying why) when cells were excluded for
    configuration or infrastructure reasons (workers/results/exclusions.py)."""
    from afpbench.workers.errors import ExcludedForConfiguration
    from afpbench.workers.results.exclusions import configuration_exclusions

    excluded = configuration_exclusions(sweep_id)
    if excluded:
        raise ExcludedForConfiguration(f"sweep {sweep_id}: {excluded.line()}")


def wide_console() -> Console:
    """Tables name all six result states; never squeeze them into an 80-column pipe."""
    out = Console()
    return Console(width=max(out.width, 150)) if not out.is_terminal else out


@app.command()
def status(sweep: str | None = typer.Argument(None, help="sweep id; omitted: the latest")) -> None:
    """Progress of a sweep by phase and result state."""
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sweeps.progress import attempts_count, latest_sweep_id, progress

    sweep_id = sweep or latest_sweep_id()
    if sweep_id is None:
        raise cli_results.CommandError("no sweeps in the database yet; run `afpbench run` first")
    p = progress(sweep_id)
    summary = summary_json(sweep_id, p, attempts_count(sweep_id), get_settings().database_url_safe())
    wide_console().print(summary_table(summary))


@app.command()
def worker(
    queues: str = typer.Option("all", help="comma-separated queues to consume (default: every queue)"),
    concurrency: int = typer.Option(8, help="pool size"),
    pool: str = typer.Option("threads", help="threads (I/O-bound provider calls) or prefork"),
    hostname: str | None = typer.Option(None, help="node name, e.g. w1@%h"),
    loglevel: str = typer.Option("INFO"),
    beat: bool = typer.Option(False, help="also run the periodic reconciler (one worker only)"),
    processes: int = typer.Option(1, min=1, help="worker processes, each with its own pool of --concurrency"),
    events: bool = typer.Option(False, help="send task events from the start (Flower turns them on by itself)"),
) -> None:
    """Run a Celery worker for the configured broker (AFP_BROKER_URL). It refuses to start unless the
    broker and the database answer and the schema is current: a worker that cannot record a result
    would take messages only to retry them. --processes N starts N such workers (names
    <name>-1@host ... <name>-N@host), one per core: one process's threads share one GIL."""
    from afpbench.workers.celery_app import QUEUES, check_broker
    from afpbench.workers.celery_app import app as celery_app
    from afpbench.workers.settings import get_settings

    settings = get_settings()
    settings.check_timing()
    if settings.embedded:
        raise cli_results.CommandError(
            "AFP_BROKER_URL is memory:// (embedded); a separate worker needs a broker such as redis://127.0.0.1:6379/0"
        )
    wanted = list(QUEUES) if queues == "all" else [q.strip() for q in queues.split(",") if q.strip()]
    unknown = [q for q in wanted if q not in QUEUES]
    if unknown:
        raise cli_results.CommandError(f"unknown queue(s) {', '.join(unknown)}; known: {', '.join(QUEUES)}")
    argv = [
        "worker",
        f"--queues={','.join(wanted)}",
        f"--concurrency={concurrency}",
        f"--pool={pool}",
        f"--loglevel={loglevel}",
        "--without-gossip",
        # Task events are one publish per task state, several per cell, and only Flower reads them.
        *(["-E"] if events else []),
    ]
    from afpbench.workers.store.db import dispose_engines, for_worker_process

    check_broker()
    for_worker_process(concurrency)  # raises ServiceUnavailable / SchemaBehind: one line, exit 2
    if processes > 1:
        from afpbench.api.worker_group import node_names, run_group

        dispose_engines()  # the children check and connect for themselves; the parent holds no connection
        me = [sys.executable, "-m", "afpbench.api.cli", "worker", f"--queues={','.join(wanted)}",
              f"--concurrency={concurrency}", f"--pool={pool}", f"--loglevel={loglevel}",
              *(["--events"] if events else [])]
        raise typer.Exit(run_group([[*me, f"--hostname={name}", *(["--beat"] if beat and i == 0 else [])]
                                    for i, name in enumerate(node_names(hostname, processes))]))
    if hostname:
        argv.append(f"--hostname={hostname}")
    if beat:
        argv.append("--beat")
    celery_app.worker_main(argv)


@app.command()
def sim(
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    latency_ms: float = typer.Option(0.0),
    rate_per_min: float | None = typer.Option(
        None, help="strict token-bucket limit; 429 + Retry-After beyond it"
    ),
    burst: int = typer.Option(1),
    error_5xx_rate: float = typer.Option(0.0),
    timeout_rate: float = typer.Option(0.0),
    content_filter_rate: float = typer.Option(0.0),
    malformed_rate: float = typer.Option(0.0),
    plain: bool = typer.Option(False, help="answer every prompt with one short text (throughput benchmarks)"),
    seed: int = typer.Option(0),
) -> None:
    """Serve a simulated OpenAI-compatible model (its output is labelled simulated everywhere)."""
    from afpbench.workers.sim.server import FaultConfig, SimConfig, serve_forever

    faults = FaultConfig(
        latency_ms=latency_ms,
        rate_per_min=rate_per_min,
        burst=burst,
        error_5xx_rate=error_5xx_rate,
        timeout_rate=timeout_rate,
        content_filter_rate=content_filter_rate,
        malformed_rate=malformed_rate,
        seed=seed,
    )
    console.print(f"sim (simulated model) on http://{host}:{port}/v1")
    serve_forever(SimConfig(faults=faults, plain=plain), host, port)


def _usage_error(exc: BaseException) -> bool:
    """Click's usage errors (unknown command or option, bad value): Typer vendors Click in recent
    versions, so both Click's and Typer's exception types are accepted."""
    import click

    return isinstance(exc, click.ClickException) or (
        isinstance(exc, typer.TyperException) and hasattr(exc, "show") and hasattr(exc, "exit_code")
    )


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
        console.print(
            f"[red]error:[/red] unexpected {type(exc).__name__}: {escape(str(exc))} "
            "(set AFP_DEBUG=1 for the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
