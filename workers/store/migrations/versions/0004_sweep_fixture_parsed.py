"""Each sealed fixture text gets its parsed form beside it: sweep_fixture.parsed.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03

A worker parsed each fixture's YAML again at its first cell (~0.9 ms, a fifth of a distributed worker's
CPU a cell when every cell has its own fixture), although creation had parsed every text already. The
column holds that parse as JSON; workers validate it instead (~0.08 ms). It is nullable: sweeps stored
before this revision have none, and their workers parse the texts as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | Sequence[str] | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('sweep_fixture') as batch:
        batch.add_column(sa.Column('parsed', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sweep_fixture') as batch:
        batch.drop_column('parsed')
