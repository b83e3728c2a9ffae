"""The batch lane's tables: batch (one provider batch) and batch_entry (one cell's attempt in it).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05

A model on `lane: batch` sends its one-round cells through the provider's batch API. The batch and its
entries are rows (workers/store/batch_models.py), so a poller finds them after any worker or broker loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | Sequence[str] | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'batch',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('model_hash', sa.String(length=16), nullable=False),
        sa.Column('model_label', sa.String(length=200), nullable=False),
        sa.Column('provider', sa.String(length=32), nullable=False),
        sa.Column('pool', sa.String(length=300), nullable=False),
        sa.Column('tokens', sa.Integer(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('provider_status', sa.String(length=32), nullable=True),
        sa.Column('provider_batch_id', sa.String(length=200), nullable=True),
        sa.Column('entries', sa.Integer(), nullable=False),
        sa.Column('recorded', sa.Integer(), nullable=False),
        sa.Column('answered', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('next_poll_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('simulated', sa.Boolean(), nullable=False),
        sa.Column('details', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_batch_sweep_id'), 'batch', ['sweep_id'], unique=False)
    op.create_index('ix_batch_status_poll', 'batch', ['status', 'next_poll_at'], unique=False)
    op.create_index('ix_batch_pool_status', 'batch', ['pool', 'status'], unique=False)
    op.create_table(
        'batch_entry',
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('custom_id', sa.String(length=64), nullable=False),
        sa.Column('cell_id', sa.Integer(), nullable=False),
        sa.Column('attempt_id', sa.Integer(), nullable=False),
        sa.Column('number', sa.Integer(), nullable=False),
        sa.Column('outcome', sa.String(length=24), nullable=True),
        sa.ForeignKeyConstraint(['attempt_id'], ['attempt.id']),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.ForeignKeyConstraint(['cell_id'], ['cell.id']),
        sa.PrimaryKeyConstraint('batch_id', 'custom_id'),
    )
    op.create_index(op.f('ix_batch_entry_cell_id'), 'batch_entry', ['cell_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_batch_entry_cell_id'), table_name='batch_entry')
    op.drop_table('batch_entry')
    op.drop_index('ix_batch_pool_status', table_name='batch')
    op.drop_index('ix_batch_status_poll', table_name='batch')
    op.drop_index(op.f('ix_batch_sweep_id'), table_name='batch')
    op.drop_table('batch')
