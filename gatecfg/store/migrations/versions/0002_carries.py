"""Carried history: the `carries` table of `gatecfg carry`.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-15
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ACTIVE = "undone_at IS NULL"


def upgrade() -> None:
    op.create_table(
        "carries",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("coordinate", sa.Text, nullable=False),
        sa.Column("from_coordinate", sa.Text, nullable=False),
        sa.Column("series_key", sa.Text, nullable=False),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("steps_key", sa.Text, nullable=False),
        sa.Column("constraint_key", sa.Text, nullable=False),
        sa.Column("from_constraint_key", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("commit_sha", sa.Text),
        sa.Column("base_commit", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("undone_at", sa.DateTime(timezone=True)),
        sa.Column("undo_reason", sa.Text),
        sa.PrimaryKeyConstraint("pk", name="pk_carries"),
    )
    op.create_index(
        "uq_carries_active",
        "carries",
        ["coordinate", "from_coordinate"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )


def downgrade() -> None:
    op.drop_index("uq_carries_active", table_name="carries")
    op.drop_table("carries")
