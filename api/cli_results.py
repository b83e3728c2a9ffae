"""Sweep-level commands: verify, resume, cancel (results, adjudication and export register here too)."""

from __future__ import annotations

import typer

from afpbench.reference.errors import AfpbenchError


class CommandError(AfpbenchError):
    """A user-facing failure of a command; printed as one line."""


def register(app: typer.Typer) -> None:
    @app.command()
    def verify(sweep: str) -> None:
        """Recompute every seal component from the current inputs and name any that changed."""
        from afpbench.workers.results.decisions import decision_count
        from afpbench.workers.store.db import session_scope
        from afpbench.workers.store.models import Sweep
        from afpbench.workers.sweeps.coordinator import stored_inputs_intact, verify_sweep

        with session_scope() as session:
            row = session.get(Sweep, sweep)
            if row is None:
                raise CommandError(f"no sweep with id {sweep!r}")
            changed = verify_sweep(row)
            stored = stored_inputs_intact(row)
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
        """Re-send every unfinished cell of a sweep (after a crash or a broker restart)."""
        from afpbench.workers.sweeps.runs import resume as resume_sweep

        typer.echo(f"re-sent {resume_sweep(sweep)} cells of sweep {sweep}")

    @app.command()
    def cancel(sweep: str) -> None:
        """Stop a sweep: no more cells are released; queued messages find it cancelled."""
        from afpbench.workers.sweeps.runs import cancel as cancel_sweep

        typer.echo(f"sweep {sweep} cancelled; {cancel_sweep(sweep)} cells left unfinished")
