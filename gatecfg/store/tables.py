"""The history store's tables as SQLAlchemy Core metadata (the migrations create them)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


class UTCDateTime(sa.TypeDecorator[datetime]):
    """An aware UTC datetime on every dialect.

    SQLite keeps no zone and sorts timestamps as text, so values are normalised to UTC on the way in
    (same-width text then sorts chronologically) and marked UTC on the way out.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"the history store needs timezone-aware datetimes, got {value!r}")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# Explicit constraint names so that later migrations can address them on both dialects.
metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Text, nullable=False, unique=True),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("series_key", sa.Text, nullable=False),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("commit_sha", sa.Text),
    sa.Column("branch", sa.Text),
    sa.Column("ci_run_id", sa.Text),
    sa.Column("ci_run_attempt", sa.Text),
    sa.Column("url", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("written_by", sa.Text, nullable=False),
    sa.Column("gate_trusted", sa.Boolean, nullable=False),
    sa.Column("trust_override", sa.Boolean),
    sa.Column("trust_reason", sa.Text),
    sa.Column("trust_changed_at", UTCDateTime),
    sa.Column("write_override", sa.Text),
    sa.Column("meta", sa.Text),  # a JSON object of strings, or NULL: what the run carries (RunInfo.meta)
    sa.Index(None, "series_key", "created_at"),
    sa.Index(None, "commit_sha"),
    sa.Index(None, "ci_run_id"),
)

coordinates = sa.Table(
    "coordinates",
    metadata,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("coordinate", sa.Text, nullable=False, unique=True),
    sa.Column("series_key", sa.Text, nullable=False),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("steps_key", sa.Text, nullable=False),
    sa.Column("constraint_key", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index(None, "series_key", "metric"),
)

# One row per (run, coordinate) it stored: small enough to rank runs per coordinate before touching the
# points. `steps_digest` fingerprints the steps with finite values, so the baseline query can tell
# whether runs beyond its window hold steps that the window lacks.
run_coordinates = sa.Table(
    "run_coordinates",
    metadata,
    sa.Column(
        "coordinate_pk",
        sa.Integer,
        sa.ForeignKey("coordinates.pk", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True),
    sa.Column("n_values", sa.Integer, nullable=False),
    sa.Column("steps_digest", sa.Text, nullable=False),
    # Trust per gate (revision 0005; NULL on older rows, where the run's trust counts): the gate's own
    # verdict when written, a `trust`/`untrust --metric` override, and why a failed value later joined
    # the gate's baseline (`recovered`: the gate passed on a later nightly; `shift N`: accepted shift N).
    sa.Column("gate_trusted", sa.Boolean),
    sa.Column("trust_override", sa.Boolean),
    sa.Column("trust_reason", sa.Text),
    sa.Column("trust_changed_at", UTCDateTime),
    sa.Column("rejoined", sa.Text),
    # A failed gate's summary for `gatecfg alerts` (revision 0009; NULL where the gate passed, and on
    # older rows, which alerts summarise from their points): steps that failed or errored, those that
    # errored, and the mean
    # relative change of its steps against their baselines.
    sa.Column("failed_steps", sa.Integer),
    sa.Column("error_steps", sa.Integer),
    sa.Column("change", sa.Double),
    sa.Index(None, "run_pk"),
    sa.Index(None, "coordinate_pk", "steps_digest"),
    sqlite_with_rowid=False,
)

# `value` is NULL for NaN (SQLite cannot store NaN, so both dialects agree on NULL); infinities are kept.
# No foreign key to run_coordinates: PostgreSQL checks one per inserted row, which was half the time of
# writing a run. Store.write_run, the only writer, inserts points with their run_coordinates row in one
# transaction; whatever deletes runs or coordinates must delete their points too.
metric_points = sa.Table(
    "metric_points",
    metadata,
    sa.Column("coordinate_pk", sa.Integer, primary_key=True),
    sa.Column("run_pk", sa.Integer, primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("value", sa.Double),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("ref", sa.Double),
    sa.Column("lo", sa.Double),
    sa.Column("hi", sa.Double),
    # The step's night-to-night spread in the metric's units, as its verdict read it (a budget gate's
    # "± spread"; revision 0007): NULL for a band gate's value and for every value written before.
    sa.Column("sd", sa.Double),
    sa.CheckConstraint("step >= -1", name="step"),
    sa.CheckConstraint("status IN ('pass', 'fail', 'tracked', 'cold', 'error')", name="status"),
    sqlite_with_rowid=False,
)

# `coordinate` continues the history of `from_coordinate` after a constraint-only re-key (`gatecfg carry`):
# its baselines read the older coordinate's values too. Hashes rather than foreign keys, because a carry
# is usually recorded before any run has written the new coordinate. An undone carry stays as a record
# (`gatecfg history` shows both), so only the active rows are unique per pair.
carries = sa.Table(
    "carries",
    metadata,
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
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("undone_at", UTCDateTime),
    sa.Column("undo_reason", sa.Text),
    sa.Index(
        "uq_carries_active",
        "coordinate",
        "from_coordinate",
        unique=True,
        sqlite_where=sa.text("undone_at IS NULL"),
        postgresql_where=sa.text("undone_at IS NULL"),
    ),
)

# A sustained shift that evaluate followed after `policy.accept_shift_after` nightlies: while it is active
# (not undone), its coordinate's baseline starts at `first_created_at`, the first run of the new level.
shifts = sa.Table(
    "shifts",
    metadata,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("coordinate", sa.Text, nullable=False),
    sa.Column("series_key", sa.Text, nullable=False),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("first_run_id", sa.Text, nullable=False),
    sa.Column("first_created_at", UTCDateTime, nullable=False),
    sa.Column("commit_sha", sa.Text),
    sa.Column("direction", sa.Text, nullable=False),
    sa.Column("size", sa.Double),
    sa.Column("nightlies", sa.Integer, nullable=False),
    sa.Column("accepted_run_id", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("undone_at", UTCDateTime),
    sa.Column("undo_reason", sa.Text),
    sa.CheckConstraint("direction IN ('up', 'down')", name="direction"),
    sa.Index(None, "coordinate"),
    # One active row per shift (revision 0008): nightlies that accept it at once record it once.
    sa.Index(
        "uq_shifts_active",
        "coordinate",
        "first_run_id",
        unique=True,
        sqlite_where=sa.text("undone_at IS NULL"),
        postgresql_where=sa.text("undone_at IS NULL"),
    ),
)

# What people decided about an alert (`gatecfg alerts ack`, docs/alerts.md; revision 0009): who, when and
# why, the cause it named, and its undo. At most one active decision per alert.
alert_decisions = sa.Table(
    "alert_decisions",
    metadata,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("alert", sa.Text, nullable=False),  # the group's id as `gatecfg alerts` prints it
    sa.Column("verdict", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("link", sa.Text),
    sa.Column("decided_by", sa.Text, nullable=False),
    sa.Column("decided_at", UTCDateTime, nullable=False),
    sa.Column("cause", sa.Text, nullable=False),  # JSON: the night, the commit, the environment change
    sa.Column("first_failed_at", UTCDateTime, nullable=False),
    sa.Column("undone_at", UTCDateTime),
    sa.Column("undone_by", sa.Text),
    sa.Column("undo_reason", sa.Text),
    sa.CheckConstraint("verdict IN ('intended', 'environment', 'false-alarm', 'regression')", name="verdict"),
    sa.Index(
        "uq_alert_decisions_active",
        "alert",
        unique=True,
        sqlite_where=sa.text("undone_at IS NULL"),
        postgresql_where=sa.text("undone_at IS NULL"),
    ),
)

# The gates a decision covered: what `alerts --stats` counts. A `regression` gate closes by itself on the
# first nightly it passes again (`closed_run_id`); an `intended`/`environment` gate names the shift the
# decision accepted.
alert_gates = sa.Table(
    "alert_gates",
    metadata,
    sa.Column(
        "decision_pk",
        sa.Integer,
        sa.ForeignKey("alert_decisions.pk", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("coordinate", sa.Text, primary_key=True),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("first_run_id", sa.Text, nullable=False),
    sa.Column("first_failed_at", UTCDateTime, nullable=False),
    sa.Column("shift_pk", sa.Integer),
    sa.Column("closed_run_id", sa.Text),
    sa.Column("closed_at", UTCDateTime),
    sa.Index(None, "coordinate"),
)

# What each (coordinate, run) row held before a decision changed it, so that its undo restores it exactly.
alert_prior = sa.Table(
    "alert_prior",
    metadata,
    sa.Column(
        "decision_pk",
        sa.Integer,
        sa.ForeignKey("alert_decisions.pk", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column(
        "coordinate_pk", sa.Integer, sa.ForeignKey("coordinates.pk", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True),
    sa.Column("trust_override", sa.Boolean),
    sa.Column("trust_reason", sa.Text),
    sa.Column("trust_changed_at", UTCDateTime),
    sa.Column("rejoined", sa.Text),
    sqlite_with_rowid=False,
)
