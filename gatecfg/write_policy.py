"""Who may write a baseline: `policy.write` against what the CI environment says about this job.

A run written with `evaluate --write` forms the baselines that later runs are judged against, so a job
that anyone can trigger with their own code (a pull request) must not write one: six such writes moved a
baseline far enough for a real regression to pass. The policy fails closed: a write is allowed only when
the environment establishes that the job may write. By default that is a job on the CI's default branch
for an event that is not a pull request's; with `policy.write` the branches and events it names. A job
of a CI gatecfg does not know, a default branch the CI does not name, or an event whose payload cannot
say whether a pull request started it is refused, naming what could not be told. Outside CI (no variable
says it is one) a write is allowed: a person at a terminal writes to a store they chose.
`--override-write-policy REASON` writes anyway (a backfill, a rerun by hand) and stores the reason with
the run.

`check_write` is the one check in front of everything that changes a store's history: `evaluate --write`
and the pytest plugin's write, `import`, `trust` / `untrust`, `shifts --undo`, `carry` (and its undo),
`prune --yes` and `db copy`. A command that is not about one test is held to every test's policy.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from gatecfg.ci import PULL_REQUEST_EVENTS, CiJob, ci_job
from gatecfg.errors import InputError
from gatecfg.models import WritePolicy, name_problem
from gatecfg.records.values import shorten

# `::error::`, `::set-output name=x::`, `::add-mask::`: what GitHub (and Azure's `##vso[`) run from a log.
_WORKFLOW_COMMAND = re.compile(r"::[A-Za-z][\w-]*(?:\s[^:]*)?::|##vso\[", re.IGNORECASE)


def write_refusal(policy: WritePolicy | None, job: CiJob) -> str | None:
    """Why this job may not write a baseline under `policy`, or None when it may. Each check runs
    whatever the others found: nothing the job could not tell lets it write."""
    if job.system is None:
        return None  # not in CI: a person at a terminal, writing to a store they chose
    if job.undecided is not None:
        return f"gatecfg cannot tell {job.undecided}"
    if job.tag is not None:
        # A tag named like the default branch is still no branch: what it builds never went through it.
        return f"{job.system} builds the tag `{job.tag}`, not a branch; a tag build never writes"
    events = policy.events if policy is not None else None
    if job.pull_request and not (
        events is not None and job.event in events and job.event in PULL_REQUEST_EVENTS
    ):
        # Only a policy that names a pull request's own event lets one write; an `issue_comment` or a
        # `workflow_run` started by a pull request never does.
        return f"{job.system} runs this job for a pull request (event `{job.event or 'pull_request'}`)"
    if events is not None and (job.event is None or job.event not in events):
        allowed = ", ".join(f"`{e}`" for e in events)
        return f"the CI event is `{job.event or 'unknown'}`; policy.write.events allows {allowed}"
    branches = policy.branches if policy is not None else None
    if branches is None:
        if job.default_branch is None:
            why = f" ({job.no_default})" if job.no_default else ""
            return (
                f"gatecfg cannot tell the default branch on {job.system}{why}, so it cannot tell whether "
                f"`{job.branch or 'this branch'}` may write; name the branches in policy.write.branches"
            )
        if job.branch != job.default_branch:
            return f"the branch is `{job.branch or 'unknown'}`, not the default branch `{job.default_branch}`"
        return None
    if job.branch is None or not any(fnmatch.fnmatchcase(job.branch, pattern) for pattern in branches):
        allowed = ", ".join(f"`{b}`" for b in branches)
        return f"the branch is `{job.branch or 'unknown'}`; policy.write.branches allows {allowed}"
    return None


class WriteRefusedError(InputError):
    """The write policy refuses this job's write (exit 2): an entry point that can judge without writing
    (the pytest plugin) catches this one, and only this one."""


def policies(gates: Path, test: str | None = None) -> list[WritePolicy | None]:
    """The `policy.write` of `test` under the gates root, or of every test there when `test` is None;
    `[None]` (the default policy) where the tree cannot tell: no gates, invalid gates, an unknown test."""
    from gatecfg.resolve import load_tree  # here: the policy of a job outside CI needs no gate tree

    tree = load_tree(gates)
    if tree.problems:
        return [None]
    if test is not None:
        found = tree.tests.get(test)
        return [found.policy.write if found is not None else None]
    return [resolved.policy.write for resolved in tree.tests.values()] or [None]


def check_write(
    found: Sequence[WritePolicy | None] | Callable[[], Sequence[WritePolicy | None]],
    override: str | None,
    *,
    where: str,
    action: str,
    job: CiJob | None = None,
) -> None:
    """Raise `WriteRefusedError` (exit 2, before anything is written) unless this CI `job` (default: this
    process's) may change the history under each of the write policies `found` (a callable is asked only
    in CI), or `override` (the checked `--override-write-policy` reason) says why it is done anyway."""
    job = ci_job() if job is None else job
    if override is not None or job.system is None:
        return
    for policy in found() if callable(found) else found:
        refusal = write_refusal(policy, job)
        if refusal is not None:
            raise WriteRefusedError.about(
                where,
                f"this job may not {action}: {refusal}",
                hint="a pull request's job must not change the history its baselines come from; "
                "nightlies on the default branch may. Allow more with `policy.write` in base.yaml, or "
                "pass --override-write-policy REASON (the API's write_override) for a backfill or a "
                "repair by hand",
            )


def check_override(
    reason: object, *, write: bool, where: str = "--override-write-policy", needs: str = "--write"
) -> str | None:
    """The reason of `--override-write-policy` (the API's `write_override`: each entry point names its own
    `where` and the `needs` that writes) as stored, or an error (exit 2): not text, blank, a control
    character anywhere (a newline before `::error::` forges a log line however it is stripped), a
    workflow command, too long, or given without a write."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        shown = shorten(repr(reason))
        raise InputError.at(
            where, f"{shown} is {type(reason).__name__}, not a string", hint="pass the reason"
        )
    if not reason.strip():
        raise InputError.at(where, "is blank: give the reason the write is allowed anyway")
    if not write:
        raise InputError.at(where, f"only means something with {needs}")
    problem = name_problem(reason)
    if problem is None and _WORKFLOW_COMMAND.search(reason):
        problem = "is a CI workflow command (`::name::`), which a log would run, not show"
    if problem is not None:
        raise InputError.at(
            where,
            f"the reason {problem}",
            hint="one printable line, e.g. 'backfill of March from the cluster logs'",
        )
    return reason.strip()
