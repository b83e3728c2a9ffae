"""A summary's per-fixture rows get a column of their own: aggregate.fixture_rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

The rows grow with the sweep (10,000 fixtures: 2.8 MB of the summary's JSON) and most readers do not
want them: `afpbench run` prints a part of the summary, and parsing the whole document to read that part
held the parser's tree of every row (+11 MB at 10,000 fixtures, the peak of the run). The rows are stored
apart; a reader of the whole summary joins them back. Nullable: a summary stored before this revision
holds its rows inside, and is read as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('aggregate') as batch:
        batch.add_column(sa.Column('fixture_rows', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('aggregate') as batch:
        batch.drop_column('fixture_rows')
