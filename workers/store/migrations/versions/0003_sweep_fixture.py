"""Fixture texts move from the sweep's one inputs JSON value into rows of their own: sweep_fixture.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

A sweep of 10,000 fixtures stored a single 75 MB JSON value, built and copied about three times over
while it was written, and read whole by each worker at its first cell. Each file is now a row (sweep,
position in the set, file name, fixture id, exact text). Sweeps stored before this revision are moved
over: their texts and id maps come out of `inputs` into rows; the rest of `inputs` stays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_sweep = sa.table('sweep', sa.column('id', sa.String()), sa.column('inputs', sa.JSON()))
_rows = sa.table('sweep_fixture', sa.column('sweep_id', sa.String()), sa.column('position', sa.Integer()),
                 sa.column('name', sa.Text()), sa.column('fixture_id', sa.String()), sa.column('text', sa.Text()))


def upgrade() -> None:
    op.create_table(
        'sweep_fixture',
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('name', sa.Text(), nullable=False),
        sa.Column('fixture_id', sa.String(length=32), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('sweep_id', 'position'),
        sa.UniqueConstraint('sweep_id', 'fixture_id', name='uq_sweep_fixture_id'),
    )
    bind = op.get_bind()
    for sweep_id in _sweep_ids(bind):  # one sweep's inputs at a time: each may hold 75 MB of texts
        inputs = _as_dict(bind.execute(sa.select(_sweep.c.inputs).where(_sweep.c.id == sweep_id)).scalar_one())
        files = inputs.pop('fixture_files', None) or {}
        ids = inputs.pop('fixture_ids', None)
        rows = [{'sweep_id': sweep_id, 'position': i, 'name': name, 'fixture_id': _fixture_id(name, text, ids),
                 'text': text} for i, (name, text) in enumerate(files.items())]
        if rows:
            bind.execute(_rows.insert(), rows)
        bind.execute(_sweep.update().where(_sweep.c.id == sweep_id).values(inputs=inputs))


def _sweep_ids(bind) -> list[str]:
    return list(bind.execute(sa.select(_sweep.c.id)).scalars())


def _as_dict(value) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value)


def _fixture_id(name: str, text: str, ids) -> str:
    """The id the sweep's id map gave the file; a sweep stored before that map parses the text once."""
    if isinstance(ids, dict) and isinstance(ids.get(name), str):
        return ids[name]
    from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture

    try:
        return parse_fixture(FixtureFile(name, text)).id
    except FixtureError:  # a text edited by hand in the database: reading its fixture names the file then
        return name[:32]


def downgrade() -> None:
    bind = op.get_bind()
    for sweep_id in _sweep_ids(bind):
        inputs = bind.execute(sa.select(_sweep.c.inputs).where(_sweep.c.id == sweep_id)).scalar_one()
        rows = bind.execute(sa.select(_rows).where(_rows.c.sweep_id == sweep_id).order_by(_rows.c.position)).all()
        inputs = {**_as_dict(inputs), 'fixture_files': {r.name: r.text for r in rows},
                  'fixture_ids': {r.name: r.fixture_id for r in rows}}
        bind.execute(_sweep.update().where(_sweep.c.id == sweep_id).values(inputs=inputs))
    op.drop_table('sweep_fixture')
