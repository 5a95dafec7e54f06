"""An index of run_coordinates by (coordinate_pk, steps_digest): evaluate asks whether a coordinate's older
runs stored a set of steps that its window's runs did not by seeking the digests between the window's,
so the question costs the same however long the history.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # run_coordinates holds one row per (run, coordinate): 80,000 rows at 80M values, so building the
    # index takes well under a second and needs no CONCURRENTLY.
    op.create_index(
        "ix_run_coordinates_coordinate_pk_steps_digest", "run_coordinates", ["coordinate_pk", "steps_digest"]
    )


def downgrade() -> None:
    op.drop_index("ix_run_coordinates_coordinate_pk_steps_digest", "run_coordinates")
