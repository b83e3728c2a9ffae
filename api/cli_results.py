"""Sweep-level commands: verify, resume, rerun, cancel (results, adjudication and export register here too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import typer

from afpbench.reference.errors import AfpbenchError

if TYPE_CHECKING:
    from afpbench.workers.cells.rerun import NothingToRerun, Reopened

Done = TypeVar("Done")


class CommandError(AfpbenchError):
    """A user-facing failure of a command; printed as one line."""


SWEEP_HELP = "sweep id; omitted: the latest"


def latest_or(sweep: str | None) -> str:
    """The sweep a command acts on: the one named, else the latest (as `status`, `cells`, `report`,
    `export` and `verify` all default)."""
    if sweep:
        return sweep
    from afpbench.workers.sweeps.progress import latest_sweep_id

    found = latest_sweep_id()
    if found is None:
        raise CommandError("no sweeps in the database yet; run `afpbench run` first")
    return found


def register(app: typer.Typer) -> None:
    @app.command()
    def verify(sweep: str | None = typer.Argument(None, help=SWEEP_HELP)) -> None:
        """Recompute every seal component from the current inputs and name any that changed."""
        from afpbench.workers.results.human_decisions import decision_count
        from afpbench.workers.store.db import session_scope
        from afpbench.workers.store.models import Sweep
        from afpbench.workers.sweeps.coordinator import stored_inputs_intact, verify_sweep

        sweep = latest_or(sweep)
        with session_scope() as session:
            row = session.get(Sweep, sweep)
            if row is None:
                raise CommandError(f"no sweep with id {sweep!r}")
            changed = verify_sweep(row)
            stored = stored_inputs_intact(session, row)
            decisions = decision_count(session, sweep)
        # Human decisions are added after sealing and never change the seal, so say how many there are.
        typer.echo(f"the sweep has {decisions} human decision{'' if decisions == 1 else 's'}"
                   + (" (listed in the report and human_decisions.csv)" if decisions else ""))
        if stored:
            typer.echo(f"stored inputs no longer match the seal: {', '.join(stored)}")
        if changed:
            typer.echo(f"seal {row.seal_hash[:16]}… BROKEN: changed since sealing: {', '.join(changed)}")
            raise typer.Exit(1)
        if stored:
            raise typer.Exit(1)
        typer.echo(f"seal {row.seal_hash} verified: {len(row.seal_components)} components unchanged")

    @app.command()
    def resume(sweep: str) -> None:
        """Re-send every unfinished cell of a sweep (after a crash, a broker restart or a cancel); a sweep
        with nothing left to run is completed and its summary recomputed. Embedded mode has no worker
        but this process's: the cells run here, as `afpbench run` ran them."""
        from afpbench.workers.runs import progress
        from afpbench.workers.runs import resume as resume_sweep
        from afpbench.workers.settings import get_settings

        if get_settings().embedded and not progress(sweep).finished:
            _run_here(sweep, lambda: resume_sweep(sweep),
                      lambda done: f"re-sent {done.resent} cells of sweep {sweep} and ran them here")
            return
        done = resume_sweep(sweep)
        if done.completed:
            typer.echo(f"sweep {sweep} had no unfinished cells: now complete, summary recomputed")
        elif done.status == "complete":
            typer.echo(f"sweep {sweep} is complete; nothing to resume")
        else:
            typer.echo(f"re-sent {done.resent} cells of sweep {sweep}")

    @app.command()
    def rerun(
        sweep: str,
        state: str = typer.Option("INFRA_ERROR,PROVIDER_BLOCK", "--state",
                                  help="comma-separated: INFRA_ERROR, PROVIDER_BLOCK"),
        model: str | None = typer.Option(None, "--model", help="only this model's cells (its label)"),
        fixture: str | None = typer.Option(None, "--fixture", help="only this fixture's cells (its id)"),
        note: str | None = typer.Option(None, "--note", help="what was fixed or documented (kept with the rerun)"),
    ) -> None:
        """The protocol's rerun: new attempts for a sweep's finished INFRA_ERROR / PROVIDER_BLOCK cells, after
        the environment was fixed or documented. Earlier attempts and results stay on record, shown as
        superseded; refused if a sealed input changed. Embedded mode runs the cells here."""
        from afpbench.workers import runs
        from afpbench.workers.settings import get_settings

        choice = runs.RerunChoice(tuple(s.strip() for s in state.split(",") if s.strip()), model, fixture, note)
        if get_settings().embedded:
            _run_here(sweep, lambda: runs.rerun(sweep, choice), _rerun_line)
            return
        typer.echo(_rerun_line(runs.rerun(sweep, choice)))

    @app.command()
    def cancel(sweep: str) -> None:
        """Stop a sweep: no more cells are released; queued messages find it cancelled, and an
        `afpbench run` waiting for it stops (exit 4). A finished sweep is left as it is (exit 0)."""
        from afpbench.workers.runs import cancel as cancel_sweep

        done = cancel_sweep(sweep)
        if done.changed:
            typer.echo(f"sweep {sweep} cancelled; {done.unfinished} cells left unfinished")
        elif done.status == "cancelled":
            typer.echo(f"sweep {sweep} is already cancelled; {done.unfinished} cells left unfinished")
        else:
            typer.echo(f"sweep {sweep} is {done.status} with no unfinished cells; nothing to cancel")


def _rerun_line(done: Reopened | NothingToRerun) -> str:
    from afpbench.workers.cells.rerun import NothingToRerun

    if isinstance(done, NothingToRerun):
        return done.reason
    return f"rerun {done.number} of sweep {done.sweep_id}: {done.cells} cells reopened for new attempts"


def _run_here(sweep_id: str, action: Callable[[], Done], line: Callable[[Done], str]) -> None:
    """Embedded mode: messages go to this process's in-memory broker, so start the embedded worker (and
    the local simulator, if the sweep needs it), do `action` (resume, rerun), and wait as `afpbench run`
    does; `line` says what the action did."""
    from contextlib import ExitStack

    from rich.console import Console

    from afpbench.api.display import progress_bar
    from afpbench.workers.embedded import embedded_worker
    from afpbench.workers.errors import SweepNotFound
    from afpbench.workers.runs import progress, wait_for
    from afpbench.workers.settings import get_settings
    from afpbench.workers.sim.local import needs_local_sim, start_local_sim
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Sweep
    from afpbench.workers.sweeps.spec_loading import parse_spec

    settings = get_settings()
    with session_scope() as session:
        row = session.get(Sweep, sweep_id)
        if row is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        spec = parse_spec(row.spec, f"sweep {sweep_id} spec")
    with ExitStack() as stack:
        if needs_local_sim([*spec.models, *spec.judges]):
            start_local_sim(stack, settings)
        stack.enter_context(embedded_worker(settings.embedded_threads))
        done = action()
        if progress(sweep_id).finished:  # nothing was reopened or re-sent
            typer.echo(line(done))
            return
        with progress_bar(Console(stderr=True)) as update:
            final = wait_for(sweep_id, on_progress=update)
    states = ", ".join(f"{k} {v}" for k, v in sorted(final.states.items()))
    typer.echo(f"{line(done)}; {final.done} of {final.total} cells done ({states}), status {final.status}")
