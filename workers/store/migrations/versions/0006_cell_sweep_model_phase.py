"""An index for a model's cells in a phase: cell (sweep_id, model_hash, phase).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Every release asks, for each model with room in its window, for its lowest pending cells. A sweep's cells
are numbered model by model, and SQLite answered from (sweep_id, phase) in id order (the unique key
begins with sweep_id and model_hash too, but would need a sort), so the question for the hundredth model
read past the pending cells of the ninety-nine before it: once the models without a declared rate
shared one window (small windows, a release at every top-up), a 100-model sweep spent its time there.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0006'
down_revision: str | Sequence[str] | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_cell_sweep_model_phase', 'cell', ['sweep_id', 'model_hash', 'phase'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_cell_sweep_model_phase', table_name='cell')
