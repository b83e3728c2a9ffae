"""`afpbench db upgrade` and `afpbench db current`: the database schema, through Alembic migrations.

Run `afpbench db upgrade` once per deployment before new workers start (compose and Kubernetes run it
as a one-shot job); it is safe to run from many places at once and does nothing when already at head.
"""

from __future__ import annotations

import typer

db_app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                   help="Database schema: migrate to the code's revision, show it.")


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@db_app.command("upgrade")
def upgrade(
    revision: str = typer.Option("head", help="target revision (default: the newest this code knows)"),
) -> None:
    """Migrate AFP_DATABASE_URL to the revision this code needs (creates the tables on a new database)."""
    from afpbench.workers.settings import get_settings
    from afpbench.workers.store import migrate

    url = get_settings().database_url
    before = migrate.current_revision(url)
    reached = migrate.upgrade(url, revision)
    if before == reached:
        typer.echo(f"{_safe(url)}: already at {reached}")
    else:
        typer.echo(f"{_safe(url)}: upgraded {before or 'base'} -> {reached}")


@db_app.command("current")
def current(
    check: bool = typer.Option(False, "--check", help="exit 1 unless the database is at the code's revision"),
    url: str | None = typer.Option(None, help="database URL (default AFP_DATABASE_URL)"),
) -> None:
    """Print the database's schema revision and the one this code needs."""
    from afpbench.workers.settings import get_settings
    from afpbench.workers.store import migrate

    url = url or get_settings().database_url
    found = migrate.current_revision(url)
    head = migrate.head_revision()
    if found == head:
        state = "up to date"
    elif found is None or found in migrate.known_revisions():
        state = "behind: run `afpbench db upgrade`"
    else:
        state = "ahead: migrated by a newer afpbench"
    typer.echo(f"{_safe(url)}: database {found or 'base (never migrated)'}, code {head} ({state})")
    if check and found != head:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
