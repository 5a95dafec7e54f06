"""Trust per gate, failures that rejoin their baseline, and accepted shifts (issue 24).

* `run_coordinates.gate_trusted`: the gate's own verdict when the run was written (NULL for every row
  written before this revision: the run's verdict, `runs.gate_trusted`, counts for it, as it did).
* `run_coordinates.trust_override` / `trust_reason` / `trust_changed_at`: `gatecfg trust --metric` and
  `untrust --metric`, for one gate of a run (NULL: the run's override, if any, counts).
* `run_coordinates.rejoined`: why a value its gate failed later joined that gate's baseline: `recovered`
  (the gate passed on a later nightly, so the failure did not hold) or `shift N` (accepted shift N).
* `shifts`: each sustained shift that evaluate followed (`policy.accept_shift_after`): the gate's
  coordinate, the first run and commit of the new level, its size, how many nightlies it held, when it was
  accepted, and when (and why) it was undone. An active acceptance starts its coordinate's baseline at
  the first run of the shift.

Every existing history stays readable and judged as before: the new columns are NULL on old rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable columns without defaults: no table rewrite on PostgreSQL, old rows read as NULL.
    op.add_column("run_coordinates", sa.Column("gate_trusted", sa.Boolean))
    op.add_column("run_coordinates", sa.Column("trust_override", sa.Boolean))
    op.add_column("run_coordinates", sa.Column("trust_reason", sa.Text))
    op.add_column("run_coordinates", sa.Column("trust_changed_at", sa.DateTime(timezone=True)))
    op.add_column("run_coordinates", sa.Column("rejoined", sa.Text))
    op.create_table(
        "shifts",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("coordinate", sa.Text, nullable=False),
        sa.Column("series_key", sa.Text, nullable=False),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("first_run_id", sa.Text, nullable=False),
        sa.Column("first_created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("commit_sha", sa.Text),
        sa.Column("direction", sa.Text, nullable=False),
        sa.Column("size", sa.Double),
        sa.Column("nightlies", sa.Integer, nullable=False),
        sa.Column("accepted_run_id", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("undone_at", sa.DateTime(timezone=True)),
        sa.Column("undo_reason", sa.Text),
        sa.CheckConstraint("direction IN ('up', 'down')", name="ck_shifts_direction"),
        sa.PrimaryKeyConstraint("pk", name="pk_shifts"),
    )
    op.create_index("ix_shifts_coordinate", "shifts", ["coordinate"])


def downgrade() -> None:
    op.drop_index("ix_shifts_coordinate", "shifts")
    op.drop_table("shifts")
    for column in ("rejoined", "trust_changed_at", "trust_reason", "trust_override", "gate_trusted"):
        op.drop_column("run_coordinates", column)
