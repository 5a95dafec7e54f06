"""Where a run came from: flags, then the CI environment as `gatecfg.ci` reads it (the same record of the
job that the write policy judges), and what the CI tells of its runner."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gatecfg.ci import CiJob, ci_job
from gatecfg.errors import InputError
from gatecfg.escape import mask_url
from gatecfg.models import name_problem
from gatecfg.records import shorten


@dataclass(frozen=True)
class Provenance:
    run_id: str
    commit: str | None
    branch: str | None
    ci_run_id: str | None
    ci_run_attempt: str | None
    url: str | None
    # The repository's files at this commit on the CI's web UI (`https://github.com/o/r/blob/<sha>`):
    # reports link each gate to its file and line there.
    source: str | None = None
    # What the run carries beyond its identity: what the CI tells of its runner, then `--meta` (which wins).
    meta: Mapping[str, str] = field(default_factory=dict)


# What each CI tells of the machine a job runs on, by its documented variables: (meta key, variables whose
# values joined by a space are its value). GitHub's hosted runners name their image in ImageOS/ImageVersion.
CI_META: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runner", ("RUNNER_NAME",)),
    ("runner.os", ("RUNNER_OS",)),
    ("runner.arch", ("RUNNER_ARCH",)),
    ("runner.image", ("ImageOS", "ImageVersion")),
    ("runner", ("CI_RUNNER_DESCRIPTION",)),  # GitLab
    ("runner.arch", ("CI_RUNNER_EXECUTABLE_ARCH",)),
    ("image", ("CI_JOB_IMAGE",)),
    ("runner", ("BUILDKITE_AGENT_NAME",)),
    ("runner", ("NODE_NAME",)),  # Jenkins
)


def ci_meta(env: Mapping[str, str]) -> dict[str, str]:
    """What the CI's variables tell of the runner (the first CI that names each key wins)."""
    found: dict[str, str] = {}
    for key, names in CI_META:
        parts = [value for name in names if (value := env.get(name, "").strip())]
        if parts and key not in found:
            found[key] = " ".join(parts)
    return found


def provenance(
    *,
    test: str,
    run_id: str | None,
    commit: str | None,
    branch: str | None,
    url: str | None,
    meta: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    job: CiJob | None = None,
) -> Provenance:
    """Flags win over the environment (`ci.ci_job`: the CI's record of this job, the one the write policy
    judges). The default run id names one evaluation of one test: `<ci run id>.<attempt>:<test>` in CI,
    so a CI job that gates several tests stores each once."""
    env = os.environ if env is None else env
    ci = ci_job(env) if job is None else job
    for flag, given in (("--run-id", run_id), ("--commit", commit), ("--branch", branch), ("--url", url)):
        check_name(given, flag)
    if run_id is None:
        if ci.run_id is not None:
            run_id = f"{ci.run_id}.{ci.run_attempt or '1'}:{test}"
        else:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            run_id = f"local-{stamp}-{uuid.uuid4().hex[:8]}:{test}"
    found = Provenance(
        run_id=run_id,
        commit=commit or ci.commit,
        # The branch the write policy judged: a pull request's own, none for a tag build.
        branch=branch or ci.branch,
        ci_run_id=ci.run_id,
        ci_run_attempt=ci.run_attempt,
        # A link to the CI run is shown in reports and kept in the store: never with a credential in it.
        url=_masked(url or ci.url),
        source=_masked(ci.source),
        meta={**ci_meta(env), **(meta or {})},
    )
    for key, value in found.meta.items():
        check_label(key, value, key_at="the run's meta key", value_at=f"the run's meta {shorten(key)}")
    # What the environment gave is checked too, before it reaches the store (exit 2, not a store fault).
    for name, value in vars(found).items():
        if name != "meta":
            check_name(value, "the run's " + name.replace("_", " "))
    return found


def _masked(url: str | None) -> str | None:
    return None if url is None else mask_url(url)


def check_name(value: str | None, where: str) -> None:
    """Refuse (exit 2) an identifier the reports or the store cannot take: empty, a control character,
    too long (`models.name_problem`)."""
    if value is None:
        return
    if not isinstance(value, str):
        # The API's arguments are typed str, but nothing stops a caller passing `commit=5`.
        raise InputError.at(
            where, f"{shorten(repr(value))} is {type(value).__name__}, not a string", hint="pass it as text"
        )
    problem = "is empty" if not value.strip() else name_problem(value)
    if problem is not None:
        raise InputError.at(where, f"{shorten(value)!r} {problem}", hint="give a short printable identifier")


def check_label(key: object, value: object, *, key_at: str, value_at: str) -> None:
    """One label of a series or of a run's meta, however it was given (`--series KEY=VALUE`, the settings,
    the API's `series` and `meta`): a printable name, and a printable text value, which may be empty.
    The name is one that a `KEY=VALUE` flag can spell too (`--series`, `--meta`: split at the first `=`,
    blanks trimmed): a name the settings file or the API gave as `a=b` would be a series no command line
    reaches."""
    name = _text(key, key_at)
    check_name(name, key_at)
    if "=" in name or name != name.strip():
        why = "holds `=`" if "=" in name else "starts or ends with a blank"
        raise InputError.at(
            key_at,
            f"label name {shorten(name)!r} {why}, which `KEY=VALUE` on a command line cannot spell",
            hint="name labels with letters, digits, `_`, `-` or `.`",
        )
    text = _text(value, value_at)
    if text:  # an empty value is a value too
        check_name(text, value_at)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        shown = shorten(repr(value))
        raise InputError.at(where, f"{shown} is {type(value).__name__}, not a string", hint="pass it as text")
    return value


def key_values(
    values: Sequence[str] | None,
    *,
    flag: str,
    example: str,
    once: str,
    reserved: dict[str, str] | None = None,
) -> dict[str, str]:
    """`KEY=VALUE` arguments of a repeatable flag as a dict, each key and value a printable name."""
    found: dict[str, str] = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError.at(flag, f"`{item}` is not KEY=VALUE", hint=f"e.g. {flag} {example}")
        if key in (reserved or {}):
            raise InputError.at(flag, (reserved or {})[key])
        key, value = key.strip(), value.strip()
        if key in found:
            raise InputError.at(
                flag, f"`{key}` is given twice (`{key}={found[key]}` and `{key}={value}`)", hint=once
            )
        check_label(key, value, key_at=flag, value_at=flag)
        found[key] = value
    return found
