"""`gatecfg trust` / `untrust`: repair a run's trust after the fact, idempotently, deleting nothing."""

from __future__ import annotations

from gatecfg.errors import EXIT_OK
from gatecfg.escape import terminal
from gatecfg.provenance import check_name
from gatecfg.store import Store


def set_trust(
    *,
    db: str,
    trusted: bool,
    run_id: str | None,
    commit: str | None,
    ci_run_id: str | None,
    reason: str | None,
    metric: str | None = None,
) -> int:
    """The CLI guarantees exactly one selector (a mutually exclusive, required group); it may be empty."""
    flag, value = next(
        (flag, v)
        for flag, v in (("--run-id", run_id), ("--commit", commit), ("--ci-run-id", ci_run_id))
        if v is not None
    )
    check_name(value, flag)
    if metric is not None:
        check_name(metric, "--metric")
    with Store.open(db) as store:
        matched, changed = store.set_trust(
            trusted=trusted, run_id=run_id, commit=commit, ci_run_id=ci_run_id, reason=reason, metric=metric
        )
    state = "trusted" if trusted else "untrusted"
    if metric is not None:
        if matched == 0:
            print(
                terminal(
                    f"no stored run with {flag} {value} holds {metric}: nothing changed (store {store.url})"
                )
            )
        else:
            counts = f"{changed} now {state}, {matched - changed} already {state}"
            print(
                terminal(
                    f"{metric} in {matched} run(s) with {flag} {value}: {counts}; other metrics unchanged"
                )
            )
        return EXIT_OK
    if matched == 0:
        print(terminal(f"no stored run has {flag} {value}: nothing changed (store {store.url})"))
    else:
        already = matched - changed
        counts = f"{changed} now {state}, {already} already {state}"
        print(terminal(f"{matched} run(s) with {flag} {value}: {counts}"))
    return EXIT_OK
