"""Alembic environment for afpbench, driven from code (workers/migrate.py); there is no alembic.ini.

The connection normally comes from `config.attributes["connection"]`, opened and locked by
workers/migrate.py so that many processes starting at once migrate one at a time. Without one, the URL
in `config.attributes["url"]` is used (an engine of our own, no pooling).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import DateTime, TypeDecorator, create_engine, pool
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

from afpbench.workers.store import (
    batch_models,  # noqa: F401  (the batch lane's tables)
    models,  # noqa: F401  (registers the tables on SQLModel.metadata)
)

target_metadata = SQLModel.metadata


def render_item(type_: str, obj, _autogen_context):
    """Render SQLModel's column types as their plain SQLAlchemy equivalents, so revisions never import
    sqlmodel (whose type classes may move between versions)."""
    if type_ != "type":
        return False
    if isinstance(obj, AutoString):
        return f"sa.String(length={obj.length})" if obj.length else "sa.String()"
    if isinstance(obj, TypeDecorator) and isinstance(obj.impl, DateTime):
        return f"sa.DateTime(timezone={obj.impl.timezone!r})"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_item=render_item,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(context.config.attributes["url"], poolclass=pool.NullPool)
    try:
        with engine.begin() as own:
            _configure(own)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


def run_offline() -> None:
    """`--sql` mode: print the DDL for a DBA instead of running it."""
    context.configure(
        url=context.config.attributes["url"], target_metadata=target_metadata, literal_binds=True,
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
