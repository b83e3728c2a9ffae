"""Initial schema: the seven tables of workers/models.py.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30

Generated with `alembic revision --autogenerate` against an empty PostgreSQL 16 database, then reviewed:
SQLModel's column types are written as plain SQLAlchemy types (UTCDateTime is DateTime(timezone=True),
AutoString is String), the UNIQUE keys keep the names models.py gives them (uq_cell_key: one row per
matrix cell; uq_result_run: one result per scoring run of a cell), indexes keep their ix_ names
(ix_cell_sweep_phase serves progress counts and releases). Tables are created parents first (sweep, then
cell, then the rows that point at cells) and dropped in reverse.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('sweep',
        sa.Column('id', sa.String(length=32), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('simulated', sa.Boolean(), nullable=False),
        sa.Column('spec', sa.JSON(), nullable=False),
        sa.Column('seal_hash', sa.String(length=64), nullable=False),
        sa.Column('seal_components', sa.JSON(), nullable=False),
        sa.Column('afpbench_version', sa.String(length=32), nullable=False),
        sa.Column('notices', sa.JSON(), nullable=False),
        sa.Column('inputs', sa.JSON(), nullable=False),
        sa.Column('validity', sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_sweep_status'), 'sweep', ['status'], unique=False)
    op.create_table('aggregate',
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('claimed_by', sa.String(length=200), nullable=True),
        sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('summary', sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('sweep_id'),
    )
    op.create_table('cell',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('model_label', sa.String(length=200), nullable=False),
        sa.Column('model_hash', sa.String(length=16), nullable=False),
        sa.Column('provider', sa.String(length=32), nullable=False),
        sa.Column('condition', sa.String(length=1), nullable=False),
        sa.Column('fixture_id', sa.String(length=32), nullable=False),
        sa.Column('fixture_version', sa.String(length=32), nullable=False),
        sa.Column('repeat', sa.Integer(), nullable=False),
        sa.Column('high_risk', sa.Boolean(), nullable=False),
        sa.Column('phase', sa.String(length=16), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=True),
        sa.Column('state_reason', sa.Text(), nullable=True),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('lease_owner', sa.String(length=200), nullable=True),
        sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
        sa.Column('not_before', sa.DateTime(timezone=True), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'sweep_id', 'model_hash', 'condition', 'fixture_id', 'fixture_version', 'repeat',
            name='uq_cell_key',
        ),
    )
    op.create_index(op.f('ix_cell_phase'), 'cell', ['phase'], unique=False)
    op.create_index(op.f('ix_cell_state'), 'cell', ['state'], unique=False)
    op.create_index(op.f('ix_cell_sweep_id'), 'cell', ['sweep_id'], unique=False)
    op.create_index(op.f('ix_cell_sweep_phase'), 'cell', ['sweep_id', 'phase'], unique=False)
    op.create_table('adjudication',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('cell_id', sa.Integer(), nullable=False),
        sa.Column('reviewer', sa.String(length=200), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('scores', sa.JSON(), nullable=True),
        sa.Column('note', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['cell_id'], ['cell.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_adjudication_cell_id'), 'adjudication', ['cell_id'], unique=False)
    op.create_table('attempt',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('cell_id', sa.Integer(), nullable=False),
        sa.Column('number', sa.Integer(), nullable=False),
        sa.Column('worker', sa.String(length=200), nullable=True),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('outcome', sa.String(length=24), nullable=False),
        sa.Column('http_status', sa.Integer(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('output_text', sa.Text(), nullable=True),
        sa.Column('finish_reason', sa.String(length=48), nullable=True),
        sa.Column('tool_calls', sa.JSON(), nullable=False),
        sa.Column('input_tokens', sa.Integer(), nullable=True),
        sa.Column('output_tokens', sa.Integer(), nullable=True),
        sa.Column('cached_tokens', sa.Integer(), nullable=True),
        sa.Column('reasoning_tokens', sa.Integer(), nullable=True),
        sa.Column('latency_ms', sa.Float(), nullable=True),
        sa.Column('served_model', sa.String(length=200), nullable=True),
        sa.Column('provider_request_id', sa.String(length=200), nullable=True),
        sa.Column('reasoning_params', sa.JSON(), nullable=False),
        sa.Column('rounds', sa.JSON(), nullable=False),
        sa.Column('simulated', sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(['cell_id'], ['cell.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_attempt_cell_id'), 'attempt', ['cell_id'], unique=False)
    op.create_table('judgement',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('cell_id', sa.Integer(), nullable=False),
        sa.Column('scoring_run', sa.Integer(), nullable=False),
        sa.Column('judge_label', sa.String(length=200), nullable=False),
        sa.Column('judge_round', sa.Integer(), nullable=False),
        sa.Column('prompt_sha256', sa.String(length=64), nullable=False),
        sa.Column('raw_text', sa.Text(), nullable=True),
        sa.Column('parsed', sa.JSON(), nullable=True),
        sa.Column('parse_error', sa.Text(), nullable=True),
        sa.Column('simulated', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['cell_id'], ['cell.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_judgement_cell_id'), 'judgement', ['cell_id'], unique=False)
    op.create_table('result',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('cell_id', sa.Integer(), nullable=False),
        sa.Column('sweep_id', sa.String(length=32), nullable=False),
        sa.Column('scoring_run', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('task_correctness', sa.Integer(), nullable=True),
        sa.Column('evidence_discipline', sa.Integer(), nullable=True),
        sa.Column('uncertainty_handling', sa.Integer(), nullable=True),
        sa.Column('failure_control', sa.Integer(), nullable=True),
        sa.Column('total', sa.Integer(), nullable=True),
        sa.Column('fatal_criterion', sa.String(length=48), nullable=True),
        sa.Column('rationale', sa.Text(), nullable=True),
        sa.Column('details', sa.JSON(), nullable=False),
        sa.Column('scorer_version', sa.String(length=32), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['cell_id'], ['cell.id']),
        sa.ForeignKeyConstraint(['sweep_id'], ['sweep.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('cell_id', 'scoring_run', name='uq_result_run'),
    )
    op.create_index(op.f('ix_result_cell_id'), 'result', ['cell_id'], unique=False)
    op.create_index(op.f('ix_result_state'), 'result', ['state'], unique=False)
    op.create_index(op.f('ix_result_sweep_id'), 'result', ['sweep_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_result_sweep_id'), table_name='result')
    op.drop_index(op.f('ix_result_state'), table_name='result')
    op.drop_index(op.f('ix_result_cell_id'), table_name='result')
    op.drop_table('result')
    op.drop_index(op.f('ix_judgement_cell_id'), table_name='judgement')
    op.drop_table('judgement')
    op.drop_index(op.f('ix_attempt_cell_id'), table_name='attempt')
    op.drop_table('attempt')
    op.drop_index(op.f('ix_adjudication_cell_id'), table_name='adjudication')
    op.drop_table('adjudication')
    op.drop_index(op.f('ix_cell_sweep_phase'), table_name='cell')
    op.drop_index(op.f('ix_cell_sweep_id'), table_name='cell')
    op.drop_index(op.f('ix_cell_state'), table_name='cell')
    op.drop_index(op.f('ix_cell_phase'), table_name='cell')
    op.drop_table('cell')
    op.drop_table('aggregate')
    op.drop_index(op.f('ix_sweep_status'), table_name='sweep')
    op.drop_table('sweep')
