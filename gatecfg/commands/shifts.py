"""`gatecfg shifts`: the sustained shifts evaluate followed (`policy.accept_shift_after`), and their undo."""

from __future__ import annotations

import json
from typing import Any

from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import terminal
from gatecfg.store import Store
from gatecfg.store.follow import ShiftRow


def shifts(
    *, db: str, test: str | None, everything: bool, undo: int | None, reason: str | None, fmt: str
) -> int:
    with Store.open(db) as store:
        if undo is not None:
            if not store.undo_shift(undo, reason=reason):
                raise InputError.at(
                    "--undo",
                    f"no accepted shift {undo} that is not undone yet in {store.url}",
                    hint="`gatecfg shifts` lists the active ones with their numbers",
                )
            print(
                terminal(
                    f"shift {undo} undone: its gate's baseline reads the runs before the shift again, "
                    "and the shift's failing runs are kept out of it"
                )
            )
            return EXIT_OK
        rows = store.shifts(test=test, active=not everything)
    if fmt == "json":
        print(json.dumps([as_json(r) for r in rows], indent=2))
        return EXIT_OK
    if not rows:
        print(f"no {'' if everything else 'active '}accepted shifts")
    for r in rows:
        print(terminal(describe(r)))
    return EXIT_OK


def describe(r: ShiftRow) -> str:
    size = "" if r.size is None else f" by {100.0 * r.size:+.1f}%"
    state = (
        f"undone {r.undone_at:%Y-%m-%d %H:%M}" + (f" ({r.undo_reason})" if r.undo_reason else "")
        if (r.undone_at)
        else "active"
    )
    return (
        f"{r.pk}  {r.test}  {r.metric}: {r.direction}{size} from run {r.first_run_id}"
        f"{f' (commit {r.commit})' if r.commit else ''}, accepted {r.created_at:%Y-%m-%d %H:%M} UTC after "
        f"{r.nightlies} nightlies (run {r.accepted_run_id}) · {state}"
    )


def as_json(r: ShiftRow) -> dict[str, Any]:
    return {
        "id": r.pk,
        "test": r.test,
        "metric": r.metric,
        "coordinate": r.coordinate,
        "first_run_id": r.first_run_id,
        "commit": r.commit,
        "direction": r.direction,
        "size": r.size,
        "nightlies": r.nightlies,
        "accepted_run_id": r.accepted_run_id,
        "accepted_at": r.created_at.isoformat(),
        "undone_at": None if r.undone_at is None else r.undone_at.isoformat(),
        "undo_reason": r.undo_reason,
    }
