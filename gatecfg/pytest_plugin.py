"""The pytest plugin (entry point `pytest11`): a test logs its metrics into `gate_metrics`, and when the
test's body has passed, the gate file whose `test:` is that test's file (relative to the rootdir) judges
them through `gatecfg.evaluate`.

Off unless asked for: without `--gatecfg-gates DIR` (or `gatecfg_gates` in the ini file) the fixture only
collects, and the terminal summary says which tests went ungated. An enforced failure fails the test with
one line per gate; shadow failures and re-key warnings go to the terminal summary; each gate's status is a
JUnit property. What the summary needs is one typed `_Outcome` per test, kept in the item's stash and sent
to the terminal as one JSON user property (under pytest-xdist the summary is in the controller, and only a
report's user properties travel from a worker). Nothing of gatecfg beyond this module loads in a session
that does not gate.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Generator, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gatecfg.report import RunReport

# user_properties names: one per gate ("gatecfg:<metric>", its status and role, for JUnit) and the
# test's `_Outcome` for the terminal summary.
_GATE = "gatecfg:"
_OUTCOME = "gatecfg-outcome"

# The CLI's words in the store's hints, as this plugin's options say them.
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


@dataclass
class _Outcome:
    """What gating one test leaves for the terminal summary."""

    test: str
    ungated: bool = False  # it logged gate_metrics, and gating is off
    judged: bool = False
    written: bool = False
    store: str = ""
    statuses: list[str] = field(default_factory=list)  # one per gate
    refused: str | None = None  # why the write policy refused --gatecfg-write (the run was judged)
    shadow: list[str] = field(default_factory=list)
    rekeys: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def as_property(self) -> tuple[str, str]:
        return _OUTCOME, json.dumps(asdict(self))

    @classmethod
    def from_property(cls, text: str) -> _Outcome:
        return cls(**json.loads(text))


_METRICS = pytest.StashKey[GateMetrics]()
_OUTCOMES = pytest.StashKey[_Outcome]()
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
        outcome = item.stash[_OUTCOMES] = _Outcome(_test_name(item))
        _gate(item, metrics, outcome)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The outcome, serialised once, rides on the call's report: under xdist only reports reach the
    # controller, where the terminal summary is.
    report = yield
    outcome = item.stash.get(_OUTCOMES, None)
    if call.when == "call" and outcome is not None:
        report.user_properties.append(outcome.as_property())
    return report


def _test_name(item: pytest.Item) -> str:
    """The test's file as gate files write `test:`: relative to the rootdir, with `/`."""
    try:
        return item.path.relative_to(item.config.rootpath).as_posix()
    except ValueError:
        return item.path.as_posix()


def _gate(item: pytest.Item, metrics: GateMetrics, outcome: _Outcome) -> None:
    settings = item.config.stash[_SETTINGS]
    test = outcome.test
    if settings.gates is None:
        outcome.ungated = True
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
            outcome.refused = refused.problems[0].message
            report = evaluate(test, record, gates=settings.gates, db=settings.db, meta=settings.meta)
    except GatecfgError as exc:
        problem = _in_plugin_words(format_problems(exc.problems, "text"))
    if problem is not None:  # outside the `except`: one message, no chained exception under it
        pytest.fail(f"gatecfg: {problem}", pytrace=False)
    outcome.judged, outcome.written, outcome.store = True, report.run.written, report.store
    outcome.statuses = [result.status for result in report.results]
    failed = _record(item, outcome, report)
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


def _record(item: pytest.Item, outcome: _Outcome, report: RunReport) -> list[str]:
    """Properties for JUnit, the outcome's lines for the terminal summary; the lines of the enforced
    failures."""
    test = outcome.test
    from gatecfg.evaluation import missing_note
    from gatecfg.report import role

    failed: list[str] = []
    for result in report.results:
        item.user_properties.append((_GATE + result.gate.metric, f"{result.status} ({role(result)})"))
        if result.missing:
            # Its own line and heading: the run lacks steps (status `missing`), which is neither a failing
            # step nor a series without history.
            fate = "fails the gate" if result.policy.missing == "fail" else "a warning"
            outcome.missing.append(
                f"{test}: {result.gate.metric} ({result.gate.file}:{result.gate.line}): "
                f"{result.missing_text()} ({fate}: policy.missing: {result.policy.missing})"
            )
        if not result.blocks_trust:
            continue
        # The gate's why, as every report gives it: the steps that moved and the statistic that fired.
        line = f"  {result.gate.metric} ({result.gate.file}:{result.gate.line}): {result.why}"
        if result.fails_job:
            failed.append(line)
        else:
            outcome.shadow.append(f"{test}: {line.strip()}")
    outcome.rekeys += [f"{test}: {warning.message}" for warning in report.warnings]
    missing = {missing_note(result) for result in report.results if result.missing}
    for note in report.notes:
        if note not in missing:  # under its own heading, above
            outcome.notices.append(f"{test}: {note}")
    return failed


class _Summary:
    """Collects every test's `_Outcome` from its report, where the terminal is (in the controller under
    xdist, which receives the workers' reports with their user_properties)."""

    def __init__(self) -> None:
        self.outcomes: list[_Outcome] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.outcomes += [
                _Outcome.from_property(str(v)) for k, v in report.user_properties if k == _OUTCOME
            ]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcomes = self.outcomes
        if not any(o.ungated or o.judged or o.refused for o in outcomes):
            return
        terminalreporter.write_sep("=", "gatecfg")
        refused = sorted({o.refused for o in outcomes if o.refused is not None})
        for reason in refused:
            terminalreporter.write_line(
                f"--gatecfg-write refused: {reason}; the runs were judged and not stored "
                "(policy.write in base.yaml says who may write)",
                yellow=True,
                bold=True,
            )
        judged = [o for o in outcomes if o.judged]
        if judged:
            terminalreporter.write_line(_judged_line(judged, refused=bool(refused)))
        titles = (
            ("missing", "steps not logged (status missing)"),
            # Each notice says what it is: no stored history, a shift followed, a stale baseline.
            ("notices", "notices"),
            ("shadow", "shadow gates failed (reported, not fatal)"),
            ("rekeys", "RE-KEY"),
        )
        for kind, title in titles:
            texts = [text for o in outcomes for text in getattr(o, kind)]
            if texts:
                terminalreporter.write_line(f"{title}:", yellow=True, bold=True)
                for text in texts:
                    terminalreporter.write_line(f"  {text}")
        ungated = sorted({o.test for o in outcomes if o.ungated})
        if ungated:
            terminalreporter.write_line(
                f"{len(ungated)} test(s) logged gate_metrics but were not gated: pass --gatecfg-gates DIR "
                "(or set gatecfg_gates in the ini file): " + ", ".join(ungated)
            )


def _judged_line(judged: list[_Outcome], *, refused: bool) -> str:
    statuses = Counter(status for o in judged for status in o.statuses)
    written = sum(o.written for o in judged)
    stores = sorted({o.store for o in judged})
    return (
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
