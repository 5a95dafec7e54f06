"""One active row per accepted shift: a partial unique index on `shifts (coordinate, first_run_id)` where
`undone_at IS NULL`, so that nightlies accepting the same shift at once (or one after another before
either saw the other's row) record it once. Where a store recorded one shift twice before this revision,
the oldest active row is kept, the others are marked undone as its duplicates, and the values they took
into the baseline are taken by the kept row instead (so that undoing it undoes them all).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ACTIVE = "undone_at IS NULL"


def upgrade() -> None:
    conn = op.get_bind()
    active = conn.execute(
        sa.text(f"SELECT pk, coordinate, first_run_id, created_at FROM shifts WHERE {ACTIVE} ORDER BY pk")
    ).all()
    kept: dict[tuple[str, str], int] = {}
    for pk, coordinate, first_run_id, created_at in active:
        first = kept.setdefault((coordinate, first_run_id), pk)
        if first == pk:
            continue
        conn.execute(
            sa.text("UPDATE shifts SET undone_at = :at, undo_reason = :why WHERE pk = :pk"),
            {"at": created_at, "why": f"a duplicate of shift {first}", "pk": pk},
        )
        conn.execute(
            sa.text("UPDATE run_coordinates SET rejoined = :kept WHERE rejoined = :duplicate"),
            {"kept": f"shift {first}", "duplicate": f"shift {pk}"},
        )
    op.create_index(
        "uq_shifts_active",
        "shifts",
        ["coordinate", "first_run_id"],
        unique=True,
        sqlite_where=sa.text(ACTIVE),
        postgresql_where=sa.text(ACTIVE),
    )


def downgrade() -> None:
    op.drop_index("uq_shifts_active", table_name="shifts")
