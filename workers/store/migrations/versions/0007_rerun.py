"""Reruns: the rerun table and, on each cell, where its superseded attempts and results end.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

`afpbench rerun` gives a finished sweep's chosen cells new attempts (workers/cells/rerun.py). The earlier
attempts and results stay on record: cell.attempt_base is how many attempts the cell had before its
latest rerun (the attempt budget counts from there), cell.result_base the scoring run its next result
takes (every earlier result is superseded), cell.rerun_id the rerun that reopened it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | Sequence[str] | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'rerun',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('number', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('states', sa.JSON(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=True),
        sa.Column('fixture', sa.String(length=32), nullable=True),
        sa.Column('cells', sa.Integer(), nullable=False),
        sa.Column('note', sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_rerun_sweep_id'), 'rerun', ['sweep_id'], unique=False)
    with op.batch_alter_table('cell') as batch:
        batch.add_column(sa.Column('attempt_base', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('result_base', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('rerun_id', sa.Integer(), nullable=True))
        batch.create_foreign_key('fk_cell_rerun_id', 'rerun', ['rerun_id'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('cell') as batch:
        batch.drop_constraint('fk_cell_rerun_id', type_='foreignkey')
        batch.drop_column('rerun_id')
        batch.drop_column('result_base')
        batch.drop_column('attempt_base')
    op.drop_index(op.f('ix_rerun_sweep_id'), table_name='rerun')
    op.drop_table('rerun')
