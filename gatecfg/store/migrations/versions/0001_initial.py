"""Initial history store: runs, coordinates, the points of each run, and the metric_values view.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Written out rather than imported from gatecfg.store.tables: a migration must keep creating the schema
# it shipped with after the tables module moves on.
METRIC_VALUES = """
CREATE VIEW metric_values AS
SELECT runs.run_id AS run_id,
       coordinates.metric AS metric,
       coordinates.steps_key AS steps_key,
       coordinates.constraint_key AS constraint_key,
       metric_points.step AS step,
       metric_points.value AS value,
       coordinates.coordinate AS coordinate,
       COALESCE(runs.trust_override, runs.gate_trusted) AS trusted,
       runs.created_at AS created_at
FROM metric_points
JOIN coordinates ON coordinates.pk = metric_points.coordinate_pk
JOIN runs ON runs.pk = metric_points.run_pk
"""


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("series_key", sa.Text, nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("commit_sha", sa.Text),
        sa.Column("branch", sa.Text),
        sa.Column("ci_run_id", sa.Text),
        sa.Column("ci_run_attempt", sa.Text),
        sa.Column("url", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("written_by", sa.Text, nullable=False),
        sa.Column("gate_trusted", sa.Boolean, nullable=False),
        sa.Column("trust_override", sa.Boolean),
        sa.Column("trust_reason", sa.Text),
        sa.Column("trust_changed_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("pk", name="pk_runs"),
        sa.UniqueConstraint("run_id", name="uq_runs_run_id"),
    )
    op.create_index("ix_runs_series_key_created_at", "runs", ["series_key", "created_at"])
    op.create_index("ix_runs_commit_sha", "runs", ["commit_sha"])
    op.create_index("ix_runs_ci_run_id", "runs", ["ci_run_id"])

    op.create_table(
        "coordinates",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("coordinate", sa.Text, nullable=False),
        sa.Column("series_key", sa.Text, nullable=False),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("steps_key", sa.Text, nullable=False),
        sa.Column("constraint_key", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("pk", name="pk_coordinates"),
        sa.UniqueConstraint("coordinate", name="uq_coordinates_coordinate"),
    )
    op.create_index("ix_coordinates_series_key_metric", "coordinates", ["series_key", "metric"])

    op.create_table(
        "run_coordinates",
        sa.Column("coordinate_pk", sa.Integer, nullable=False),
        sa.Column("run_pk", sa.Integer, nullable=False),
        sa.Column("n_values", sa.Integer, nullable=False),
        sa.Column("steps_digest", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("coordinate_pk", "run_pk", name="pk_run_coordinates"),
        sa.ForeignKeyConstraint(
            ["coordinate_pk"],
            ["coordinates.pk"],
            name="fk_run_coordinates_coordinate_pk",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_pk"], ["runs.pk"], name="fk_run_coordinates_run_pk", ondelete="CASCADE"
        ),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_run_coordinates_run_pk", "run_coordinates", ["run_pk"])

    op.create_table(
        "metric_points",
        sa.Column("coordinate_pk", sa.Integer, nullable=False),
        sa.Column("run_pk", sa.Integer, nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("value", sa.Double),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("ref", sa.Double),
        sa.Column("lo", sa.Double),
        sa.Column("hi", sa.Double),
        sa.PrimaryKeyConstraint("coordinate_pk", "run_pk", "step", name="pk_metric_points"),
        sa.CheckConstraint("step >= -1", name="ck_metric_points_step"),
        sa.CheckConstraint(
            "status IN ('pass', 'fail', 'tracked', 'cold', 'error')", name="ck_metric_points_status"
        ),
        sqlite_with_rowid=False,
    )

    op.execute(METRIC_VALUES)


def downgrade() -> None:
    op.execute("DROP VIEW metric_values")
    op.drop_table("metric_points")
    op.drop_table("run_coordinates")
    op.drop_index("ix_coordinates_series_key_metric", table_name="coordinates")
    op.drop_table("coordinates")
    op.drop_index("ix_runs_ci_run_id", table_name="runs")
    op.drop_index("ix_runs_commit_sha", table_name="runs")
    op.drop_index("ix_runs_series_key_created_at", table_name="runs")
    op.drop_table("runs")
