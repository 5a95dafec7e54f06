"""The reason a run was written against the write policy (`evaluate --override-write-policy`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on PostgreSQL, and old rows read as NULL
    # (written under the policy, or before there was one).
    op.add_column("runs", sa.Column("write_override", sa.Text))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN: SQLite has it since 3.35 (2021); a batch copy of `runs` would break
    # the `metric_values` view that reads it.
    op.drop_column("runs", "write_override")
