"""Each stored value's night-to-night spread (`sd`) beside its band, in the metric's units: what a budget
gate's verdict read as "value vs usual ± spread", so that `gatecfg history` shows the same interval.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, no default: no table rewrite on PostgreSQL (metric_points is the bulk of a store), and
    # every value written before reads as having no spread, as band gates' values do.
    op.add_column("metric_points", sa.Column("sd", sa.Double))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch copy of metric_points would break the
    # `metric_values` view that reads it.
    op.drop_column("metric_points", "sd")
