"""The pytest plugin (entry point `pytest11`): a test logs its metrics into `gate_metrics`, and when the
test's body has passed, the gate file whose `test:` is that test's file (relative to the rootdir) judges
them through `gatecfg.evaluate`.

Off unless asked for: without `--gatecfg-gates DIR` (or `gatecfg_gates` in the ini file) the fixture only
collects, and the terminal summary says which tests went ungated. An enforced failure fails the test with
one line per gate; shadow failures and re-key warnings go to the terminal summary; each gate's status is a
JUnit property. What the summary needs travels in the reports' `user_properties`, so it works under
pytest-xdist. Nothing of gatecfg beyond this module loads in a session that does not gate.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gatecfg.report import RunReport

# user_properties names: one per gate ("gatecfg:<metric>", its status and role) and the summary's lines.
_GATE = "gatecfg:"
_SHADOW = "gatecfg-shadow-failure"
_REKEY = "gatecfg-rekey"
_UNGATED = "gatecfg-ungated"
_NOTICE = "gatecfg-notice"
_MISSING = "gatecfg-missing-steps"
_JUDGED = "gatecfg-judged"  # "<written 0|1>\t<store>\t<gate statuses, space-separated>" per gated test
_REFUSED = "gatecfg-write-refused"  # why the write policy refused --gatecfg-write (the run was judged)

# The CLI's words in gatecfg's messages, as this plugin's options say them.
_OPTION_WORDS = (
    ("the first nightly `gatecfg evaluate ... --write`", "the first nightly `pytest --gatecfg-write`"),
    ("--db / GATECFG_DB_URL", "--gatecfg-db / the ini's gatecfg_db / GATECFG_DB_URL"),
    ("check --gates", "check --gatecfg-gates"),
)


@dataclass
class GateMetrics:
    """What a test logged for gatecfg: points by metric, and record files (any `--record` format)."""

    points: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def log(self, metric: str, step: int, value: float) -> None:
        """One value of a metric at a step, as `gatecfg.evaluate` takes it (numpy numbers are fine)."""
        self.points.setdefault(metric, []).append((step, value))

    def log_row(self, row: Mapping[str, float], *, step: int) -> None:
        """Several metrics at one step, e.g. the dict a training loop hands its logger."""
        for metric, value in row.items():
            self.log(metric, step, value)

    def load(self, path: str | os.PathLike[str]) -> None:
        """A record file (or TensorBoard log folder, or MLflow run folder) the training run wrote."""
        self.files.append(Path(path))

    def __bool__(self) -> bool:
        return bool(self.points or self.files)


_METRICS = pytest.StashKey[GateMetrics]()
_SETTINGS = pytest.StashKey["_Settings"]()
_CLASH = pytest.StashKey[str]()


@dataclass(frozen=True)
class _Settings:
    gates: Path | None  # None: gating is off
    db: str | None
    write: bool
    meta: Mapping[str, str]  # --gatecfg-meta and the ini's gatecfg_meta: stored with each gated run


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gatecfg", "gatecfg history gates")
    group.addoption(
        "--gatecfg-gates",
        metavar="DIR",
        help="gate the metrics tests log into `gate_metrics` with the gate files under DIR "
        "(default: off, or the ini's gatecfg_gates)",
    )
    group.addoption(
        "--gatecfg-db",
        metavar="URL",
        help="history store (default: the ini's gatecfg_db, else $GATECFG_DB_URL, else .gatecfg/history.db)",
    )
    group.addoption(
        "--gatecfg-write",
        action="store_true",
        default=None,
        help="store each gated run into history (nightlies only; default: the ini's gatecfg_write)",
    )
    group.addoption(
        "--gatecfg-meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what each gated run carries beyond its identity, e.g. image=26.04 (repeatable; with the ini's "
        "gatecfg_meta lines), as `gatecfg evaluate --meta`",
    )
    parser.addini("gatecfg_gates", "gates root for gate_metrics, relative to the rootdir (turns gating on)")
    parser.addini("gatecfg_db", "history store URL for gate_metrics")
    parser.addini("gatecfg_write", "store gated runs into history", type="bool", default=False)
    parser.addini("gatecfg_meta", "KEY=VALUE lines stored with each gated run", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    option: str | None = config.getoption("gatecfg_gates")
    ini = str(config.getini("gatecfg_gates") or "")
    if option:
        gates: Path | None = config.invocation_params.dir / option
    else:
        gates = config.rootpath / ini if ini else None
    db: str | None = config.getoption("gatecfg_db") or str(config.getini("gatecfg_db") or "") or None
    write = config.getoption("gatecfg_write")
    from gatecfg.errors import GatecfgError
    from gatecfg.provenance import key_values

    try:  # the ini's lines first: a --gatecfg-meta key given again on the command line is an error too
        meta = key_values(
            [*config.getini("gatecfg_meta"), *config.getoption("gatecfg_meta")],
            flag="--gatecfg-meta",
            example="image=26.04",
            once="give each key once (in gatecfg_meta and --gatecfg-meta together)",
        )
    except GatecfgError as exc:
        raise pytest.UsageError(f"gatecfg: {exc}") from None
    config.stash[_SETTINGS] = _Settings(
        gates=gates, db=db, write=bool(config.getini("gatecfg_write") if write is None else write), meta=meta
    )
    config.pluginmanager.register(_Summary(), "gatecfg-summary")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A gate file gates one test file as one run a night: a second test of that file that logs
    gate_metrics would be a second run of the same series (stored twice a night locally, dropped in CI,
    where the run id is the CI run's). Found at collection, so the same in every process under xdist."""
    if config.stash[_SETTINGS].gates is None:
        return
    first: dict[str, str] = {}
    for item in items:
        if "gate_metrics" not in getattr(item, "fixturenames", ()):
            continue
        test = _test_name(item)
        if test not in first:
            first[test] = item.name
            continue
        item.stash[_CLASH] = (
            f"gatecfg: {item.name} is a second gated test in {test}, which {first[test]} gates already: its "
            "gate file judges one run of the file a night, so this one is not judged (an error, not a "
            "second run in history); log all the file's metrics in one test, or move this test to a file "
            "with a gate file of its own"
        )


@pytest.fixture
def gate_metrics(request: pytest.FixtureRequest) -> GateMetrics:
    """Log a test's metrics here; its gate file judges them when the test's body has passed."""
    clash = request.node.stash.get(_CLASH, None)
    if clash is not None:
        pytest.fail(clash, pytrace=False)
    metrics = GateMetrics()
    request.node.stash[_METRICS] = metrics
    return metrics


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # After the body: a test that failed by itself is not judged (and never written into history).
    yield
    metrics = item.stash.get(_METRICS, None)
    if metrics:
        _gate(item, metrics)


def _test_name(item: pytest.Item) -> str:
    """The test's file as gate files write `test:`: relative to the rootdir, with `/`."""
    try:
        return item.path.relative_to(item.config.rootpath).as_posix()
    except ValueError:
        return item.path.as_posix()


def _gate(item: pytest.Item, metrics: GateMetrics) -> None:
    settings = item.config.stash[_SETTINGS]
    test = _test_name(item)
    if settings.gates is None:
        item.user_properties.append((_UNGATED, test))
        return
    from gatecfg.api import evaluate
    from gatecfg.errors import GatecfgError, format_problems
    from gatecfg.records import read_records
    from gatecfg.write_policy import WriteRefusedError

    problem: str | None = None
    try:
        record = read_records(metrics.files, metrics.points)
        try:
            report = evaluate(
                test, record, gates=settings.gates, db=settings.db, write=settings.write, meta=settings.meta
            )
        except WriteRefusedError as refused:
            # A pull request's job that passes --gatecfg-write (a shared CI config) is judged as any PR
            # run is: the refusal is said once, and the tests pass or fail on their verdicts alone.
            item.user_properties.append((_REFUSED, refused.problems[0].message))
            report = evaluate(test, record, gates=settings.gates, db=settings.db, meta=settings.meta)
    except GatecfgError as exc:
        problem = _in_plugin_words(format_problems(exc.problems, "text"))
    if problem is not None:  # outside the `except`: one message, no chained exception under it
        pytest.fail(f"gatecfg: {problem}", pytrace=False)
    statuses = " ".join(result.status for result in report.results)
    item.user_properties.append((_JUDGED, f"{int(report.run.written)}\t{report.store}\t{statuses}"))
    failed = _record(item, test, report)
    if report.exit_code and not failed:  # no stored history under require_history: the notice says so
        failed = [f"  {note}" for note in report.notes]
    if failed:
        from gatecfg.report.labels import Noise

        header = f"gatecfg: enforced gate failed ({test}); {Noise.of(report.results).line()}"
        changed = [] if report.changes is None else [f"  changed {report.changes.line()}"]
        pytest.fail("\n".join([header, *failed, *changed]), pytrace=False)


def _in_plugin_words(text: str) -> str:
    for cli, plugin in _OPTION_WORDS:
        text = text.replace(cli, plugin)
    return text


def _record(item: pytest.Item, test: str, report: RunReport) -> list[str]:
    """Properties for JUnit and the terminal summary; the lines of the enforced failures."""
    from gatecfg.evaluation import missing_note
    from gatecfg.report import role

    failed: list[str] = []
    for result in report.results:
        item.user_properties.append((_GATE + result.gate.metric, f"{result.status} ({role(result)})"))
        if result.missing:
            # Its own line and heading: the run lacks steps (status `missing`), which is neither a failing
            # step nor a series without history.
            fate = "fails the gate" if result.policy.missing == "fail" else "a warning"
            item.user_properties.append(
                (
                    _MISSING,
                    f"{test}: {result.gate.metric} ({result.gate.file}:{result.gate.line}): "
                    f"{result.missing_text()} ({fate}: policy.missing: {result.policy.missing})",
                )
            )
        if not result.blocks_trust:
            continue
        # The gate's why, as every report gives it: the steps that moved and the statistic that fired.
        line = f"  {result.gate.metric} ({result.gate.file}:{result.gate.line}): {result.why}"
        if result.fails_job:
            failed.append(line)
        else:
            item.user_properties.append((_SHADOW, f"{test}: {line.strip()}"))
    for warning in report.warnings:
        item.user_properties.append((_REKEY, f"{test}: {warning.message}"))
    missing = {missing_note(result) for result in report.results if result.missing}
    for note in report.notes:
        if note not in missing:  # under its own heading, above
            item.user_properties.append((_NOTICE, f"{test}: {note}"))
    return failed


class _Summary:
    """Collects the summary's lines from every test's report, where the terminal is (in the controller
    under xdist, which receives the workers' reports with their user_properties)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            kinds = (_SHADOW, _REKEY, _NOTICE, _MISSING, _UNGATED, _JUDGED, _REFUSED)
            self.lines.extend((name, str(text)) for name, text in report.user_properties if name in kinds)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.lines:
            return
        terminalreporter.write_sep("=", "gatecfg")
        refused = sorted({text for name, text in self.lines if name == _REFUSED})
        for reason in refused:
            terminalreporter.write_line(
                f"--gatecfg-write refused: {reason}; the runs were judged and not stored "
                "(policy.write in base.yaml says who may write)",
                yellow=True,
                bold=True,
            )
        judged = [text.split("\t") for name, text in self.lines if name == _JUDGED]
        if judged:
            statuses = Counter(status for _, _, gates in judged for status in gates.split())
            written = sum(int(flag) for flag, _, _ in judged)
            stores = sorted({store for _, store, _ in judged})
            terminalreporter.write_line(
                f"judged {len(judged)} test(s), {sum(statuses.values())} gate(s): "
                + ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
                + f"; wrote {written} run(s) into history"
                + (
                    f" ({', '.join(stores)})"
                    if written
                    else " (the write was refused, above)"
                    if refused
                    else " (nightlies pass --gatecfg-write)"
                )
            )
        titles = (
            (_MISSING, "steps not logged (status missing)"),
            # Each notice says what it is: no stored history, a shift followed, a stale baseline.
            (_NOTICE, "notices"),
            (_SHADOW, "shadow gates failed (reported, not fatal)"),
            (_REKEY, "RE-KEY"),
        )
        for kind, title in titles:
            texts = [text for name, text in self.lines if name == kind]
            if texts:
                terminalreporter.write_line(f"{title}:", yellow=True, bold=True)
                for text in texts:
                    terminalreporter.write_line(f"  {text}")
        ungated = sorted({text for name, text in self.lines if name == _UNGATED})
        if ungated:
            terminalreporter.write_line(
                f"{len(ungated)} test(s) logged gate_metrics but were not gated: pass --gatecfg-gates DIR "
                "(or set gatecfg_gates in the ini file): " + ", ".join(ungated)
            )
