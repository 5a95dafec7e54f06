"""`gatecfg trust` / `untrust`: repair a run's trust after the fact, idempotently, deleting nothing."""

from __future__ import annotations

from gatecfg.errors import EXIT_OK, InputError
from gatecfg.escape import terminal
from gatecfg.provenance import check_name
from gatecfg.store import Store
from gatecfg.wording import did_you_mean, plural


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
        if matched == 0:
            # A typo or a short commit must not read as done: nothing changed, and the job would go on.
            _no_match(store, flag, value, metric)
    state = "trusted" if trusted else "untrusted"
    if metric is not None:
        counts = f"{changed} now {state}, {matched - changed} already {state}"
        runs = plural(matched, "run")
        print(terminal(f"{metric} in {runs} with {flag} {value}: {counts}; other metrics unchanged"))
        return EXIT_OK
    already = matched - changed
    counts = f"{changed} now {state}, {already} already {state}"
    print(terminal(f"{plural(matched, 'run')} with {flag} {value}: {counts}"))
    return EXIT_OK


def _no_match(store: Store, flag: str, value: str, metric: str | None) -> None:
    """Exit 2 naming the stored values near `value` (a commit by its prefix first): nothing changed."""
    runs = [row.run for row in store.runs()]
    held = {
        "--run-id": [r.run_id for r in runs],
        "--commit": [r.commit for r in runs if r.commit],
        "--ci-run-id": [r.ci_run_id for r in runs if r.ci_run_id],
    }[flag]
    if value in held and metric is not None:
        metrics = {s.spec.metric for s in store.summaries()}
        near = did_you_mean(metric, metrics, n=3)
        raise InputError.at(
            "--metric",
            terminal(
                f"no stored run with {flag} {value} holds {metric}: nothing changed (store {store.url})"
            ),
            hint=near or "`gatecfg history --test T --metric M` lists a metric's stored runs",
        )
    prefixed = sorted({h for h in held if h.startswith(value)}) if flag == "--commit" else []
    near = did_you_mean(value, held, n=3)
    if prefixed:
        near = "did you mean " + " or ".join(f"`{h}`" for h in prefixed[:3]) + "? (give the full commit)"
    raise InputError.at(
        flag,
        terminal(f"no stored run has {flag} {value}: nothing changed ({store.url})"),
        hint=near or f"{plural(len(runs), 'stored run')}; `gatecfg history` lists them",
    )
