"""Judgement rows keep the call behind the text: finish reason, tokens, latency, the request as sent,
and what a retry changed (a retry at temperature 0 must differ from the try it repeats).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

All columns are nullable: rows written before this revision have none of these facts. SQLite drops
columns through batch mode (a table copy), which env.py turns on for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ('finish_reason', sa.String(length=48)),
    ('input_tokens', sa.Integer()),
    ('output_tokens', sa.Integer()),
    ('latency_ms', sa.Float()),
    ('request_sent', sa.JSON()),
    ('retry_change', sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table('judgement') as batch:
        for name, type_ in _COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('judgement') as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
