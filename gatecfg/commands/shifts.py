"""`gatecfg shifts`: the sustained shifts evaluate followed (`policy.accept_shift_after`), and their undo."""

from __future__ import annotations

import json
from typing import Any

from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import terminal
from gatecfg.store import Store
from gatecfg.store.follow import ShiftRow
from gatecfg.wording import did_you_mean, plural


def shifts(
    *, db: str, test: str | None, everything: bool, undo: int | None, reason: str | None, fmt: str
) -> int:
    with Store.open(db) as store:
        if undo is not None:
            if not store.undo_shift(undo, reason=reason):
                _no_shift(store, undo)
            print(
                terminal(
                    f"shift {undo} undone: its gate's baseline reads the runs before the shift again, "
                    "and the shift's failing runs are kept out of it"
                )
            )
            return EXIT_OK
        rows = store.shifts(test=test, active=not everything)
        if test is not None and not rows:
            _check_test(store, test)
    if fmt == "json":
        print(json.dumps([as_json(r) for r in rows], indent=2))
        return EXIT_OK
    if not rows:
        of = "" if test is None else f" of {test}"
        print(terminal(f"no {'' if everything else 'active '}accepted shifts{of}"))
    for r in rows:
        print(terminal(describe(r)))
    return EXIT_OK


def _no_shift(store: Store, pk: int) -> None:
    """Exit 2 for an undo that names no active shift: why (undone already, or no such number), and the
    numbers that are active."""
    listed = store.shifts()
    active = [r for r in listed if r.undone_at is None]
    undone = next((r for r in listed if r.pk == pk and r.undone_at is not None), None)
    why = (
        f"accepted shift {pk} was undone {undone.undone_at:%Y-%m-%d %H:%M} UTC already"
        if undone is not None and undone.undone_at is not None
        else f"no accepted shift {pk}"
    )
    numbers = ", ".join(f"{r.pk} ({r.metric})" for r in reversed(active))
    raise InputError.at(
        "--undo",
        terminal(f"{why}: nothing undone ({store.url})"),
        hint=f"active shifts: {numbers}"
        if active
        else "no shift is active; `gatecfg shifts --all` lists all",
    )


def _check_test(store: Store, test: str) -> None:
    """Exit 2 when `--test` names no stored test, naming the near ones (a test with no shift is an
    answer, a typo is not)."""
    tests = store.tests()
    if test in tests:
        return
    shifted = sorted({r.test for r in store.shifts()})
    raise InputError.at(
        "--test",
        terminal(f"no stored run of test {test} in {store.url}"),
        hint=did_you_mean(test, tests, n=3)
        or (
            f"{plural(len(shifted), 'test')} with shifts: {', '.join(shifted)}"
            if shifted
            else "no test has an accepted shift"
        ),
    )


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
        f"{plural(r.nightlies, 'nightly', 'nightlies')} (run {r.accepted_run_id}) · {state}"
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
