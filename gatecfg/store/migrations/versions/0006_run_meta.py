"""What a run carries beyond its identity (`evaluate --meta key=value` and what the CI tells: the
container image, library versions, the runner), as a JSON object per run.

Revision ID: 0006
Revises: 0004 (to be re-pointed to 0005 when the `baselines` branch's migration is merged)
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, no default: no table rewrite on PostgreSQL, and every older run reads as carrying nothing.
    op.add_column("runs", sa.Column("meta", sa.Text))


def downgrade() -> None:
    # As 0003: DROP COLUMN, since a batch copy of `runs` would break the `metric_values` view.
    op.drop_column("runs", "meta")
