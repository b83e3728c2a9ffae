"""`afpbench run` and `afpbench status`: start a sweep (embedded by default) and watch it to its summary
and exit status; a sweep's progress by phase and result state."""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack

import typer
from rich.console import Console

from afpbench.api.cli_results import SWEEP_HELP, latest_or
from afpbench.api.display import progress_bar, summary_table

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(status)


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
    no_judge_check: bool = typer.Option(False, "--no-judge-check",
                                        help="skip trying the judges on calibration answers before the sweep"),
    pilot: str | None = typer.Option(None, "--pilot", help="a pilot sweep: its measured variance, output tokens and "
                                                           "swapped re-judges go into the plan (as `plan --from`)"),
) -> None:
    """Run a sweep. Embedded by default (SQLite + in-memory broker + in-process worker threads).

    Subset options change the spec before it is validated and sealed (docs/SPEC.md, "Running a subset")."""
    from afpbench.workers.errors import RunCancelled
    from afpbench.workers.memory import freeze_what_is_loaded
    from afpbench.workers.runs import attempts_count, check_services, start_sweep, wait_for
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim
    from afpbench.workers.store.db import size_pool
    from afpbench.workers.sweeps.spec_loading import demo_spec, load_spec

    settings = get_settings()
    from afpbench.workers.sweeps.subset import Subset, apply_subset, split_list

    subset = Subset(split_list(fixtures, "--fixtures"), split_list(conditions, "--conditions"),
                    split_list(models, "--models"), limit, repeats)
    sweep_spec = apply_subset(load_spec(spec) if spec else demo_spec(), subset, spec or "demo")
    check_services(schema=False, spec=sweep_spec)  # before a worker or a sim starts; the schema once inputs are read
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
            sweep_id = start_sweep(sweep_spec, judge_check=not no_judge_check, on_plan=_print_line,
                                   on_judge_check=_print_line, pilot=pilot)
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
    from afpbench.api.run_overview import run_overview

    overview = run_overview(sweep_id, final, attempts_count(sweep_id), settings.database_url_safe())
    if as_json:
        typer.echo(json.dumps(overview.model_dump(mode="json"), indent=2))
    else:
        Console().print(summary_table(overview))
    _exit_status(sweep_id)


def _print_line(item: object) -> None:
    """The plan's one line, a judge check's: on stderr, before the sweep starts."""
    line = item.headline() if hasattr(item, "headline") else item.line()  # type: ignore[attr-defined]
    console.print(line, style="dim", highlight=False, markup=False, soft_wrap=True)


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


def status(sweep: str | None = typer.Argument(None, help=SWEEP_HELP)) -> None:
    """Progress of a sweep by phase and result state."""
    from afpbench.api.run_overview import run_overview
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sweeps.progress import attempts_count, progress

    sweep_id = latest_or(sweep)
    p = progress(sweep_id)
    overview = run_overview(sweep_id, p, attempts_count(sweep_id), get_settings().database_url_safe())
    Console().print(summary_table(overview))
