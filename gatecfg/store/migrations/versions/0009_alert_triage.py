"""Triage remembered (issue 37, docs/alerts.md): what people decided about an alert, and how to undo it.

* `alert_decisions`: one row per `gatecfg alerts ack`: the alert's id, the verdict (`intended`,
  `environment`, `false-alarm`, `regression`), the reason and link, who decided and when, the cause the
  alert named, and its undo (when, by whom, why). At most one active (not undone) decision per alert.
* `alert_gates`: the gates a decision covered (what `alerts --stats` counts), the shift an `intended` or
  `environment` decision accepted, and when a `regression` gate passed again and closed.
* `alert_prior`: what each (coordinate, run) row's trust columns held before a decision changed them, so
  that undoing it restores them exactly.
* `run_coordinates.failed_steps` / `error_steps` / `change`: a failed gate's steps that failed or errored,
  those that errored, and its mean relative change, written with the run, so that `alerts` reads no
  point of a fleet's failing gates.

New tables and nullable columns: every existing history stays readable and judged exactly as before (an
older failed gate is summarised from its points).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

ACTIVE = "undone_at IS NULL"


def upgrade() -> None:
    # Nullable, no default: no table rewrite on PostgreSQL.
    op.add_column("run_coordinates", sa.Column("failed_steps", sa.Integer))
    op.add_column("run_coordinates", sa.Column("error_steps", sa.Integer))
    op.add_column("run_coordinates", sa.Column("change", sa.Double))
    op.create_table(
        "alert_decisions",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("alert", sa.Text, nullable=False),
        sa.Column("verdict", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("link", sa.Text),
        sa.Column("decided_by", sa.Text, nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cause", sa.Text, nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("undone_at", sa.DateTime(timezone=True)),
        sa.Column("undone_by", sa.Text),
        sa.Column("undo_reason", sa.Text),
        sa.CheckConstraint(
            "verdict IN ('intended', 'environment', 'false-alarm', 'regression')",
            name="ck_alert_decisions_verdict",
        ),
        sa.PrimaryKeyConstraint("pk", name="pk_alert_decisions"),
    )
    op.create_index(
        "uq_alert_decisions_active",
        "alert_decisions",
        ["alert"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )
    op.create_table(
        "alert_gates",
        sa.Column("decision_pk", sa.Integer, nullable=False),
        sa.Column("coordinate", sa.Text, nullable=False),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("first_run_id", sa.Text, nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("shift_pk", sa.Integer),
        sa.Column("closed_run_id", sa.Text),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(
            ["decision_pk"],
            ["alert_decisions.pk"],
            name="fk_alert_gates_decision_pk",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("decision_pk", "coordinate", name="pk_alert_gates"),
    )
    op.create_index("ix_alert_gates_coordinate", "alert_gates", ["coordinate"])
    op.create_table(
        "alert_prior",
        sa.Column("decision_pk", sa.Integer, nullable=False),
        sa.Column("coordinate_pk", sa.Integer, nullable=False),
        sa.Column("run_pk", sa.Integer, nullable=False),
        sa.Column("trust_override", sa.Boolean),
        sa.Column("trust_reason", sa.Text),
        sa.Column("trust_changed_at", sa.DateTime(timezone=True)),
        sa.Column("rejoined", sa.Text),
        sa.ForeignKeyConstraint(
            ["decision_pk"],
            ["alert_decisions.pk"],
            name="fk_alert_prior_decision_pk",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["coordinate_pk"], ["coordinates.pk"], name="fk_alert_prior_coordinate_pk", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.pk"], name="fk_alert_prior_run_pk", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("decision_pk", "coordinate_pk", "run_pk", name="pk_alert_prior"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("alert_prior")
    op.drop_index("ix_alert_gates_coordinate", table_name="alert_gates")
    op.drop_table("alert_gates")
    op.drop_index("uq_alert_decisions_active", table_name="alert_decisions")
    op.drop_table("alert_decisions")
    op.drop_column("run_coordinates", "change")
    op.drop_column("run_coordinates", "error_steps")
    op.drop_column("run_coordinates", "failed_steps")
