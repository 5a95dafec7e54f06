"""Fleet-scale figures for gatecfg on SQLite and PostgreSQL (issues 7 and 15; results in
benchmarks/results/performance.md).

    python benchmarks/bench.py           # 200 runs x 40 gates x 1,000 steps: 8M stored values, both stores
    python benchmarks/bench.py --quick   # 1/50 of that: a smoke run in a minute
    python benchmarks/bench.py --stores sqlite --runs 200 --gates 40 --steps 1000 --files 1000 \\
        --regime-runs 10000 --pg postgresql+psycopg://postgres@127.0.0.1:5432/test
    # the fleet store at 10x: seeded once by import into a kept database, then measured again and again
    python benchmarks/bench.py --stores postgresql --runs 2000 --pg-database wt15_bench80m --no-per-coordinate

Every figure is printed beside its reference, ratio first. For each store:

* import: the history (`--runs` nightlies of one test, every 10th untrusted) is seeded by `gatecfg import`
  of a JSON Lines export, measured as a process (wall, CPU, peak RSS), as a ratio to the bare write of as
  many points (the driver alone, into an empty store: multi-row INSERTs on SQLite, binary COPY on
  PostgreSQL), beside the same import of a tenth of the runs (how peak RSS grows with the export);
* evaluate, in this process: gate files, record, step selection, baselines, verdicts, the re-key check and
  the text report, for one run of `--gates` x `--steps` values, beside the bare fetch (one SQL statement
  through the raw DBAPI cursor returning exactly the baseline rows) and, unless --no-per-coordinate, one
  baseline query per (coordinate, step); and evaluate at a hundredth of the values (its fixed costs);
* `gatecfg evaluate` as a process beside a plain Python process making the bare fetch;
* write: `Store.write_run` of one run; regimes over `--regime-runs` nightlies, in this process and as a
  `gatecfg regimes` process; `gatecfg backtest --metric` as a process beside the bare read of the test's
  values; lint and resolve of `--files` gate files, `gatecfg lint` and `gatecfg --help` as processes.

On SQLite everything runs in this process, so CPU seconds are the fair comparison on a busy machine;
PostgreSQL works in its own processes, so its figures are wall seconds. PostgreSQL runs in a fresh
database that this script creates on the server `--pg` names (default $GATECFG_TEST_PG_URL) and drops, or
in the kept `--pg-database`. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import dataclasses
import io
import itertools
import json
import os
import platform
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

# This checkout's gatecfg, whatever else is installed: a script's own folder (benchmarks/) heads sys.path,
# the repository does not.
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gatecfg.commands.lint import lint  # noqa: E402 (after the path is set)
from gatecfg.commands.regimes import regimes  # noqa: E402
from gatecfg.commands.resolve import resolve  # noqa: E402
from gatecfg.evaluation import Request, run_evaluation  # noqa: E402
from gatecfg.keys import series_key  # noqa: E402
from gatecfg.report import render  # noqa: E402
from gatecfg.resolve import load_tree  # noqa: E402
from gatecfg.store import CoordinateSpec, RunInfo, Store, StoredPoint, tables  # noqa: E402

TEST = "tests/e2e/bench_fleet_ci.py"
REGIMES_TEST = "tests/e2e/bench_regimes_ci.py"
REGIMES_METRIC = "eval/all/avg_score"
CONSTRAINT = "{rel_up: 0.5, abs_floor_up: 0.1, rel_down: 0.5, abs_floor_down: 0.1}"
FINITE_MAX = sys.float_info.max
START = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Scale:
    runs: int
    gates: int
    steps: int
    window: int
    files: int
    regime_runs: int
    repeat: int


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float

    def __str__(self) -> str:
        return f"{self.wall:.3f} s wall, {self.cpu:.3f} s CPU"


@dataclass
class Figures:
    """One store's rows of the table: figure, value, what it is measured against."""

    store: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, value: object, note: str = "") -> None:
        self.rows.append((name, str(value), note))
        print(f"  {name:<46} {value!s:>32}  {note}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", choices=["both", "sqlite", "postgresql"], default="both")
    parser.add_argument("--pg", default=os.environ.get("GATECFG_TEST_PG_URL"), help="PostgreSQL server URL")
    parser.add_argument("--runs", type=int, default=200, help="stored nightlies (default 200)")
    parser.add_argument("--gates", type=int, default=40, help="gates of the evaluated test (default 40)")
    parser.add_argument("--steps", type=int, default=1000, help="logged steps per gate (default 1,000)")
    parser.add_argument("--window", type=int, default=20, help="policy window (default 20)")
    parser.add_argument("--files", type=int, default=1000, help="gate files to lint (default 1,000)")
    parser.add_argument("--regime-runs", type=int, default=10_000, help="nightlies of the regimes series")
    parser.add_argument("--repeat", type=int, default=3, help="best of N for each timing (default 3)")
    parser.add_argument("--quick", action="store_true", help="1/50 of the default scale: a smoke run")
    parser.add_argument("--workdir", type=Path, help="keep the generated files and SQLite store here")
    parser.add_argument(
        "--pg-database",
        help="measure (and seed, when empty) this database on the --pg server and keep it, e.g. the "
        "80M-value store of --runs 2000 (default: a fresh database, dropped at the end)",
    )
    parser.add_argument(
        "--no-per-coordinate",
        action="store_true",
        help="skip the reference of one query per (coordinate, step) (tens of seconds at 8M values)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --workdir: measure the SQLite store seeded there by an earlier run",
    )
    args = parser.parse_args()
    # A SIGTERM unwinds like Ctrl-C, so that the PostgreSQL database this run created is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.quick:
        scale = Scale(20, 8, 100, args.window, 50, 500, 1)
    else:
        scale = Scale(
            args.runs, args.gates, args.steps, args.window, args.files, args.regime_runs, args.repeat
        )
    stores = ["sqlite", "postgresql"] if args.stores == "both" else [args.stores]
    # The measured processes import this checkout's modules byte-compiled, as an installed wheel's are: an
    # editable install run with PYTHONDONTWRITEBYTECODE compiles every module in every process (0.2 s of
    # CPU for `gatecfg evaluate`), which no user's CI pays.
    compileall.compile_dir(REPO / "gatecfg", quiet=1)
    if "postgresql" in stores and not args.pg:
        parser.error("PostgreSQL needs --pg URL or GATECFG_TEST_PG_URL (or pass --stores sqlite)")
    print(
        f"scale: {scale.runs} runs x {scale.gates} gates x {scale.steps} steps = "
        f"{scale.runs * scale.gates * scale.steps:,} stored values, window {scale.window}; "
        f"{scale.files} gate files; regimes over {scale.regime_runs:,} runs; best of {scale.repeat}"
    )
    print(
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, SQLAlchemy {sa.__version__}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    with contextlib.ExitStack() as stack:
        if args.workdir is not None:
            work = args.workdir.resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gatecfg-bench-")))
        gates, record = _write_inputs(work, scale)
        results = [Figures("gate files")]
        print("\n== gate files (no store)")
        _bench_files(work, scale, results[0])
        for name in stores:
            print(f"\n== {name}")
            figures = Figures(name)
            if name == "sqlite":
                store_url = _sqlite_url(work, reuse=args.reuse)
            elif args.pg_database:
                store_url = contextlib.nullcontext(_pg_url(args.pg, args.pg_database))
            else:
                store_url = _pg_database(args.pg)
            with store_url as url:
                _bench_store(url, gates, record, scale, figures, per_coordinate=not args.no_per_coordinate)
            results.append(figures)
        print(f"\n== summary (load average {os.getloadavg()[0]:.1f})")
        print(_markdown(results))


# ---------------------------------------------------------------------------------------------- inputs


def _metric(gate: int) -> str:
    return f"train/metric_{gate:03d}"


def _write_inputs(work: Path, scale: Scale) -> tuple[Path, Path]:
    """The gates root (the evaluated test and the regimes test) and the evaluated run's record."""
    gates = work / "gates"
    (gates / "fleet").mkdir(parents=True, exist_ok=True)
    (gates / "base.yaml").write_text(
        f"version: 1\ndefaults:\n  {_metric(0)}:\n    steps: all\n    constraint: {CONSTRAINT}\n"
        f"policy:\n  window: {scale.window}\n  min_history: 1\n",
        encoding="utf-8",
    )
    lines = [f"test: {TEST}", "gates:", f"  {_metric(0)}:"]  # the first a one-liner from the base file
    for gate in range(1, scale.gates):
        lines.append(f"  {_metric(gate)}:\n    steps: all\n    constraint: {CONSTRAINT}")
    (gates / "fleet" / "bench.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (gates / "fleet" / "regimes.yaml").write_text(
        f"test: {REGIMES_TEST}\ngates:\n  {REGIMES_METRIC}:\n"
        "    steps: last\n    constraint: {rel_down: 0.1}\n",
        encoding="utf-8",
    )
    # The evaluated nightly: one metric regressed, so that the report has a "needs attention" table; the
    # others are noise around the stored level.
    rng = random.Random(1)
    record = work / "record.jsonl"
    with record.open("w", encoding="utf-8") as out:
        for step in range(scale.steps):
            row = {_metric(g): rng.gauss(3.0 if g == 0 else 1.0, 0.05) for g in range(scale.gates)}
            out.write(json.dumps({"_step": step, **row}) + "\n")
    return gates, record


def _specs(gates: Path, test: str, labels: dict[str, str] | None = None) -> list[CoordinateSpec]:
    """The coordinates the gate files give `test`, exactly as evaluate computes them."""
    resolved = load_tree(gates).test(test)
    series = series_key(test, labels or {})
    return [
        CoordinateSpec(g.coordinate(series), series, test, g.metric, g.steps_key, g.constraint_key)
        for g in resolved.gates
    ]


def _run_info(run_id: str, test: str, n: int, *, trusted: bool) -> RunInfo:
    return RunInfo(
        run_id=run_id,
        test=test,
        series_key=series_key(test, {}),
        labels={},
        commit=f"{n // 3:040x}",  # three nights per commit, as when nothing merges for a couple of days
        branch="main",
        ci_run_id=str(n),
        ci_run_attempt="1",
        url=None,
        created_at=START + timedelta(hours=n),
        gate_trusted=trusted,
        written_by="bench",
    )


def _nightly(
    specs: Sequence[CoordinateSpec], steps: int, rng: random.Random
) -> dict[CoordinateSpec, list[StoredPoint]]:
    return {
        spec: [StoredPoint(step, rng.gauss(1.0, 0.05), "pass", 1.0, 0.5, 1.5) for step in range(steps)]
        for spec in specs
    }


def _write_export(path: Path, scale: Scale, runs: int) -> Path:
    """A JSON Lines export of `runs` nightlies of the evaluated test (every 10th untrusted), the history
    `gatecfg import` loads; written once per work folder and scale."""
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    steps = np.arange(scale.steps)
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as out:
        for n in range(runs):
            info = _run_info(f"seed-{n}", TEST, n, trusted=n % 10 != 9)
            metrics = {
                _metric(g): np.column_stack([steps, rng.normal(1.0, 0.05, scale.steps)]).tolist()
                for g in range(scale.gates)
            }
            for pairs in metrics.values():
                for pair in pairs:
                    pair[0] = int(pair[0])
            line = {
                "run_id": info.run_id,
                "date": info.created_at.isoformat(),
                "commit": info.commit,
                "trusted": info.gate_trusted,
                "metrics": metrics,
            }
            out.write(json.dumps(line) + "\n")
    partial.rename(path)
    return path


def _seed_regimes(store: Store, spec: CoordinateSpec, runs: int) -> None:
    """A nightly series with five levels, one value per run at step -1 (`steps: last`)."""
    rng = random.Random(2)
    levels = (0.60, 0.66, 0.62, 0.70, 0.65)
    began = time.perf_counter()
    for n in range(runs):
        point = StoredPoint(-1, rng.gauss(levels[n * len(levels) // runs], 0.01), "pass", None, None, None)
        store.write_run(_run_info(f"regime-{n}", REGIMES_TEST, n, trusted=True), {spec: [point]})
    print(f"  seeded the regimes series, {runs} runs ({time.perf_counter() - began:.0f} s)", flush=True)


# --------------------------------------------------------------------------------------------- timing


def _best(repeat: int, work: Callable[[], object]) -> Timing:
    """The best wall and the best CPU seconds of `repeat` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Timing(min(walls), min(cpus))


# The real entry point, reporting its own peak RSS on exit: VmHWM, the high-water mark of this program's
# memory. Neither the rusage wait4 returns nor the process's own ru_maxrss will do: Linux carries the RSS
# the child had before exec, a copy of this benchmark's, into both.
MEASURED_CLI = """
import os, resource, sys, time
from gatecfg.cli import main
code = main(sys.argv[1:])
try:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sys.stderr.write(f"\\ncpu-s {time.process_time()}\\npeak-rss-kb {peak}\\n")
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)  # as gatecfg.cli.run ends: without the interpreter's teardown
"""


@dataclass(frozen=True)
class Proc:
    wall: float  # seconds, interpreter start included
    cpu: float  # CPU seconds of the process itself
    rss: float  # peak RSS, MB

    def __str__(self) -> str:
        return f"{self.wall:.3f} s wall, {self.cpu:.2f} s CPU, {self.rss:.0f} MB"


def _process(argv: Sequence[str], cwd: Path) -> Proc:
    """Wall and CPU seconds and peak RSS of one `gatecfg` process of this checkout (exit 0 or 1)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURED_CLI, *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - began
    if done.returncode not in (0, 1):
        raise RuntimeError(f"gatecfg {' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    peak_kb = int(done.stderr.rsplit("peak-rss-kb ", 1)[1])  # kilobytes on Linux
    cpu = float(done.stderr.rsplit("cpu-s ", 1)[1].split()[0])
    return Proc(wall, cpu, peak_kb / 1024)


def _wall(argv: Sequence[str], cwd: Path, repeat: int) -> Timing:
    """Best wall and CPU seconds of a plain process (python and its arguments), whatever its exit code."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, check=False)
        walls.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return Timing(min(walls), min(cpus))


def _quietly(work: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return work()

    return run


# ---------------------------------------------------------------------------------------- gate files


def _bench_files(work: Path, scale: Scale, figures: Figures) -> None:
    root = work / "lint-gates"
    _write_tree(root, scale.files)
    lint_all = _quietly(lambda: lint([], gates=root, fmt="text"))
    if lint_all() != 0:
        raise RuntimeError("the generated gate files do not lint clean")
    figures.add(f"lint of {scale.files:,} gate files", _best(scale.repeat, lint_all), "target < 3 s")
    resolve_all = _quietly(lambda: resolve(gates=root, test=None, labels={}, fmt="json"))
    figures.add(f"resolve --format json of {scale.files:,} files", _best(scale.repeat, resolve_all))
    figures.add(
        "`gatecfg lint` process", _process(["lint", "--gates", str(root)], work), "interpreter start included"
    )
    figures.add("`gatecfg --help` process", _wall(["-m", "gatecfg", "--help"], work, 3), "target <= 0.3 s")


def _write_tree(root: Path, files: int) -> None:
    """`files` gate files in folders of 20, each folder with a base file that extends the root's."""
    metrics = [f"train/m{i}" for i in range(8)]
    lines = ["version: 1", "defaults:"]
    for i, metric in enumerate(metrics):
        lines += [
            f"  {metric}:",
            "    steps: all",
            f"    constraint: {{rel_up: 0.{i + 1}, abs_floor_up: 0.01}}",
        ]
    lines += ["policy:", "  window: 20", "  enforce: false"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "base.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for n in range(files):
        folder = root / f"team{n // 20:03d}"
        if not folder.exists():
            folder.mkdir()
            (folder / "base.yaml").write_text(
                "version: 1\nextends: ../base.yaml\ndefaults:\n  eval/score:\n    steps: last\n"
                "    constraint: {rel_down: 0.1}\npolicy:\n  window: 10\n",
                encoding="utf-8",
            )
        body = [
            f"test: tests/e2e/{folder.name}/test_model_{n:04d}_ci.py",
            "gates:",
            *(f"  {m}:" for m in metrics[: 3 + n % 5]),
            "  eval/score:",
            "    limits: {min: 0.5}",
            "    enforce: true",
            "  perf/mfu:",
            "    steps: last",
            "    constraint: null",
            "  rollout/raw_reward:",
            "    steps: [0, 10, 20]",
            "    constraint: {rel_down: 0.2, abs_floor_down: 0.05}",
        ]
        (folder / f"test_model_{n:04d}.yaml").write_text("\n".join(body) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------- stores


@contextlib.contextmanager
def _sqlite_url(work: Path, *, reuse: bool) -> Iterator[str]:
    path = work / "history.db"
    if not reuse:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    yield f"sqlite:///{path}"


def _pg_url(server_url: str, database: str) -> str:
    return sa.make_url(server_url).set(database=database).render_as_string(hide_password=False)


# Names of the scratch databases this script creates (and drops) on the --pg server.
PG_PREFIX = "gatecfg_bench"


@contextlib.contextmanager
def _pg_database(server_url: str) -> Iterator[str]:
    name = f"{PG_PREFIX}_{uuid.uuid4().hex[:12]}"
    server = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')  # a generated name, not user input
        try:
            yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with server.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        server.dispose()


def _analyze(url: str) -> None:
    """PostgreSQL's planner statistics, as autovacuum leaves them a minute after a bulk load. SQLite is
    left as gatecfg leaves it: nothing runs ANALYZE there."""
    if sa.make_url(url).get_backend_name() != "postgresql":
        return
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    finally:
        engine.dispose()


def _bench_store(
    url: str, gates: Path, record: Path, scale: Scale, figures: Figures, *, per_coordinate: bool
) -> None:
    specs = _specs(gates, TEST)
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
        seeded = (
            sum(row.run.run_id.startswith("seed-") for row in store.runs(test=TEST)),
            len(store.runs(test=REGIMES_TEST)),
        )
    if seeded[0] not in (0, scale.runs) or seeded[1] not in (0, scale.regime_runs):
        raise RuntimeError(
            f"the store holds {seeded} runs, not {(scale.runs, scale.regime_runs)}: drop --reuse"
        )
    if seeded[0] == 0:
        _bench_import(url, gates, scale, figures)
    if seeded[1] == 0:
        with Store.open(url) as store:
            _seed_regimes(store, _specs(gates, REGIMES_TEST)[0], scale.regime_runs)
    if seeded[0]:
        print(f"  reusing {url}: {seeded[0]} runs and a {seeded[1]}-run regimes series", flush=True)
    _analyze(url)
    values = scale.gates * scale.steps
    stored = scale.runs * values
    needed = scale.gates * scale.steps * min(scale.window, sum(n % 10 != 9 for n in range(scale.runs)))
    figures.add("stored values", f"{stored:,}", f"{scale.runs} runs, every 10th untrusted")

    evaluate = _evaluation(
        Request(gates=gates, test=TEST, records=[record], db=url, run_id="bench-evaluate"), values
    )
    evaluate()  # warm: imports, caches, the OS page cache
    timing = _best(scale.repeat, evaluate)
    hashes = [spec.coordinate for spec in specs]
    with Store.open(url) as store:
        found = store.baselines(hashes, window=scale.window, exclude_run_id="bench-evaluate")
        got = sum(len(v) for v in found.values())
        baselines = _best(
            scale.repeat,
            lambda: store.baselines(hashes, window=scale.window, exclude_run_id="bench-evaluate"),
        )
    bare, bare_rows = _bare_fetch(url, hashes, scale)
    if not bare_rows == got == needed:
        raise RuntimeError(f"baseline rows differ: store {got}, bare fetch {bare_rows}, expected {needed}")
    per_query = _per_coordinate(url, specs, scale) if per_coordinate else None
    sqlite = url.startswith("sqlite")
    ratio = (timing.cpu / bare.cpu) if sqlite else (timing.wall / bare.wall)
    figures.add(
        f"evaluate {scale.gates} x {scale.steps:,} against {stored:,} values",
        timing,
        f"{ratio:.2f}x bare fetch ({'CPU' if sqlite else 'wall'}); target <= 1.5x and < 2 s",
    )
    figures.add("  reference: bare fetch", bare, f"{bare_rows:,} rows through the DBAPI cursor")
    if per_query is not None:
        figures.add(
            "  reference: one query per (coordinate, step)",
            f"{per_query:.3f} s wall",
            f"{values:,} queries; {per_query / timing.wall:.1f}x evaluate",
        )
    figures.add("  of which Store.baselines", baselines, f"{got:,} values")
    rest = Timing(timing.wall - baselines.wall, timing.cpu - baselines.cpu)
    figures.add("  the rest: files, record, verdicts, report", rest, "evaluate minus Store.baselines")
    report = run_evaluation(
        Request(gates=gates, test=TEST, records=[record], db=url, run_id="bench-evaluate")
    )
    figures.add(f"JSON report of {values:,} verdicts", _best(scale.repeat, lambda: render(report, "json")))
    argv = ["evaluate", "--gates", str(gates), "--test", TEST, "--record", str(record), "--db", url]
    process = min(
        (_process([*argv, "--run-id", "bench-cli"], gates.parent) for _ in range(scale.repeat)),
        key=lambda p: p.wall,
    )
    bare_process = _bare_process(url, hashes, scale, gates.parent)
    figures.add(
        "`gatecfg evaluate` process",
        process,
        f"{process.wall / bare_process.wall:.2f}x wall, {process.cpu / bare_process.cpu:.2f}x CPU of a plain "
        "Python process doing the bare fetch; target <= 1.5x",
    )
    figures.add("  reference: plain Python process, bare fetch", bare_process, "sqlite3 / psycopg only")
    write_process = _process(
        [*argv, "--run-id", "bench-cli-write", "--write", "--format", "json"], gates.parent
    )
    figures.add("`gatecfg evaluate --write --format json`", write_process)

    rng = random.Random(3)
    writes: list[Timing] = []
    with Store.open(url) as store:
        for n in range(scale.repeat):
            points = _nightly(specs, scale.steps, rng)
            run = _run_info(f"bench-write-{uuid.uuid4().hex[:8]}", TEST, 10**5 + n, trusted=True)
            writes.append(_best(1, lambda run=run, points=points: store.write_run(run, points)))
    figures.add(
        f"write one run ({values:,} values)",
        Timing(min(t.wall for t in writes), min(t.cpu for t in writes)),
        "Store.write_run; target < 1 s",
    )

    regimes_run = _quietly(
        lambda: regimes(
            gates=gates,
            db=url,
            test=REGIMES_TEST,
            metric=REGIMES_METRIC,
            step=None,
            scan_all=False,
            labels={},
            fmt_="json",
        )
    )
    regimes_run()
    figures.add(f"regimes over {scale.regime_runs:,} runs", _best(scale.repeat, regimes_run), "target < 1 s")
    regimes_argv = [
        "regimes",
        "--gates",
        str(gates),
        "--db",
        url,
        "--test",
        REGIMES_TEST,
        "--metric",
        REGIMES_METRIC,
    ]
    regimes_process = min(
        (_process(regimes_argv, gates.parent) for _ in range(scale.repeat)), key=lambda p: p.wall
    )
    figures.add(
        "`gatecfg regimes` process, one gate", regimes_process, f"{scale.regime_runs:,} runs; target <= 1 s"
    )
    _bench_backtest(url, gates, scale, figures)
    _bench_small(url, gates, record, scale, figures)


def _bench_import(url: str, gates: Path, scale: Scale, figures: Figures) -> None:
    """Seed the store with `gatecfg import` of the history's export, as a measured process; before it, the
    same import of a tenth of the runs into a scratch store, for how peak RSS grows with the export."""
    work = gates.parent
    tenth = dataclasses.replace(scale, runs=max(1, scale.runs // 10))
    argv = ["import", "--test", TEST, "--gates", str(gates)]
    with _scratch(url, work, "tenth") as scratch:
        export = _write_export(
            work / f"export-{tenth.runs}x{scale.gates}x{scale.steps}.jsonl", tenth, tenth.runs
        )
        small = _process([*argv, "--db", scratch, str(export)], work)
    export = _write_export(work / f"export-{scale.runs}x{scale.gates}x{scale.steps}.jsonl", scale, scale.runs)
    full = _process([*argv, "--db", url, str(export)], work)
    with _scratch(url, work, "bare") as scratch:
        bare = _bare_write(scratch, scale)
    values = scale.runs * scale.gates * scale.steps
    figures.add(
        f"`gatecfg import` of {values:,} values",
        full,
        f"{full.wall / bare.wall:.1f}x the bare write's wall, {full.cpu / bare.cpu:.1f}x its CPU; "
        f"{full.rss / small.rss:.2f}x the peak RSS of a tenth of it; "
        "targets <= 30 s, <= 500 MB, flat +-20%",
    )
    figures.add(f"  `gatecfg import` of {values // 10:,} values", small, "into a scratch store")
    postgres = sa.make_url(url).get_backend_name() == "postgresql"
    figures.add(
        "  reference: bare write of as many points",
        bare,
        f"{'binary COPY' if postgres else f'{BARE_ROWS_PER_INSERT}-row INSERTs'}, one transaction, "
        "into an empty store's metric_points; CPU of this process only",
    )


# Rows per INSERT statement of the bare write on SQLite: the fastest plain sqlite3 path measured (one
# statement of 100 rows beat 500-row ones and executemany of one row each).
BARE_ROWS_PER_INSERT = 100


def _bare_write(url: str, scale: Scale) -> Timing:
    """The floor of an import's writing: as many metric_points rows as the import stores, in its order (run
    by run, each run's gates in turn), into an empty store of the same schema in one transaction, through
    the driver alone: on SQLite multi-row INSERTs with the pragmas and page cache of an import, on
    PostgreSQL one binary COPY whose rows numpy encodes whole. Nothing but the points: no runs, no
    judging, no export to read."""
    with Store.open(url, check_schema=False) as store:
        store.upgrade()
    rng = np.random.default_rng(0)
    coordinates = np.repeat(np.arange(1, scale.gates + 1, dtype=np.int64), scale.steps)
    steps = np.tile(np.arange(scale.steps, dtype=np.int64), scale.gates)
    values = rng.normal(size=len(steps))
    if sa.make_url(url).get_backend_name() == "postgresql":
        return _bare_copy(url, scale.runs, coordinates, steps, values)
    path = sa.make_url(url).database
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "cache_size = -32768"):
            conn.execute(f"PRAGMA {pragma}")
        per_row = len(tables.metric_points.c)  # every column, as the bulk path writes them
        row = "(" + ", ".join(["?"] * per_row) + ")"
        many = "INSERT INTO metric_points VALUES " + ", ".join([row] * BARE_ROWS_PER_INSERT)
        width = per_row * BARE_ROWS_PER_INSERT
        columns = (coordinates.tolist(), steps.tolist(), values.tolist())

        def write() -> None:
            conn.execute("BEGIN")
            for run in range(1, scale.runs + 1):
                coordinate, step, value = columns
                runs = [run] * len(step)
                statuses = ["pass"] * len(step)
                flat = list(
                    itertools.chain.from_iterable(
                        zip(coordinate, runs, step, value, statuses, value, value, value, value, strict=True)
                    )
                )
                whole = len(flat) // width * width
                conn.executemany(many, [flat[at : at + width] for at in range(0, whole, width)])
                one = "INSERT INTO metric_points VALUES " + row
                conn.executemany(one, [flat[at : at + per_row] for at in range(whole, len(flat), per_row)])
            conn.execute("COMMIT")

        return _best(1, write)
    finally:
        conn.close()


def _bare_copy(url: str, runs: int, coordinates: np.ndarray, steps: np.ndarray, values: np.ndarray) -> Timing:
    import psycopg

    status = b"pass"
    layout = np.dtype(
        [("count", ">i2")]
        + [(f"{name}{part}", ">i4") for name in ("c", "r", "s") for part in ("_size", "")]
        + [("v_size", ">i4"), ("v", ">f8"), ("st_size", ">i4"), ("st", f"S{len(status)}")]
        + [
            (f"{name}{part}", t)
            for name in ("ref", "lo", "hi")
            for part, t in (("_size", ">i4"), ("", ">f8"))
        ]
    )
    encoded = np.empty(len(steps), layout)
    encoded["count"] = 8
    for name in ("c", "r", "s"):
        encoded[f"{name}_size"] = 4
    for name in ("v", "ref", "lo", "hi"):
        encoded[f"{name}_size"] = 8
        encoded[name] = values
    encoded["c"], encoded["s"] = coordinates, steps
    encoded["st_size"], encoded["st"] = len(status), status
    names = "coordinate_pk, run_pk, step, value, status, ref, lo, hi"
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:

        def write() -> None:
            with (
                conn.cursor() as cursor,
                cursor.copy(f"COPY metric_points ({names}) FROM STDIN (FORMAT BINARY)") as copy,
            ):
                copy.write(b"PGCOPY\n\xff\r\n\0" + bytes(8))
                for run in range(1, runs + 1):
                    encoded["r"] = run
                    copy.write(encoded.tobytes())
                copy.write(b"\xff\xff")
            conn.commit()

        return _best(1, write)


def _bench_backtest(url: str, gates: Path, scale: Scale, figures: Figures) -> None:
    """`gatecfg backtest --metric` of one gate (which replays every gate of the test: trust rests on all),
    beside the bare read of every stored value it replays."""
    argv = ["backtest", "--gates", str(gates), "--db", url, "--test", TEST, "--metric", _metric(1)]
    process = min((_process(argv, gates.parent) for _ in range(scale.repeat)), key=lambda p: p.wall)
    sql = _driver_sql(
        url,
        "SELECT mp.run_pk, mp.step, mp.value FROM metric_points mp "
        "JOIN coordinates c ON c.pk = mp.coordinate_pk WHERE c.test = ?",
    )
    with _dbapi(url) as raw:

        def read() -> int:
            # Streamed (a server-side cursor on PostgreSQL): 80M rows of tuples would not fit in memory.
            postgres = sa.make_url(url).get_backend_name() == "postgresql"
            cursor = raw.driver_connection.cursor(name="bare_read") if postgres else raw.cursor()
            cursor.execute(sql, [TEST])
            rows = 0
            while batch := cursor.fetchmany(100_000):
                rows += len(batch)
            cursor.close()
            raw.rollback()
            return rows

        rows = read()
        bare = _best(scale.repeat, read)
    figures.add(
        "`gatecfg backtest --metric` process",
        process,
        f"{process.wall / bare.wall:.1f}x the bare read; targets <= 5 s, <= 500 MB",
    )
    figures.add(
        "  reference: bare read of the test's values", bare, f"{rows:,} rows through the DBAPI cursor"
    )


def _bench_small(url: str, gates: Path, record: Path, scale: Scale, figures: Figures) -> None:
    """Evaluate's fixed costs: the same test at a hundredth of the values (`--steps` / 100 steps per gate),
    in this process, beside the bare fetch of its baseline rows, in a scratch store seeded by import."""
    small = dataclasses.replace(scale, steps=max(1, scale.steps // 100))
    work = gates.parent / "small"
    small_gates, small_record = _write_inputs(work, small)
    with _scratch(url, work, "small") as scratch:
        with Store.open(scratch, create=True):
            pass  # creates a SQLite store; a PostgreSQL scratch database was created at head
        export = _write_export(
            work / f"export-{small.runs}x{small.gates}x{small.steps}.jsonl", small, small.runs
        )
        _process(["import", "--test", TEST, "--gates", str(small_gates), "--db", scratch, str(export)], work)
        _analyze(scratch)
        values = small.gates * small.steps
        request = Request(
            gates=small_gates, test=TEST, records=[small_record], db=scratch, run_id="bench-evaluate"
        )
        evaluate = _evaluation(request, values)
        evaluate()
        timing = _best(max(scale.repeat, 5), evaluate)
        hashes = [spec.coordinate for spec in _specs(small_gates, TEST)]
        bare, _ = _bare_fetch(scratch, hashes, dataclasses.replace(small, repeat=max(scale.repeat, 5)))
        argv = ["evaluate", "--gates", str(small_gates), "--test", TEST, "--record", str(small_record)]
        process = min(
            (_process([*argv, "--db", scratch, "--run-id", "bench-cli"], work) for _ in range(scale.repeat)),
            key=lambda p: p.cpu,
        )
        bare_process = _bare_process(scratch, hashes, small, work)
    sqlite = url.startswith("sqlite")
    ratio = (timing.cpu / bare.cpu) if sqlite else (timing.wall / bare.wall)
    stored = small.runs * values
    figures.add(
        f"evaluate {small.gates} x {small.steps} against {stored:,} values",
        timing,
        f"{ratio:.2f}x bare fetch ({'CPU' if sqlite else 'wall'}); target <= 3x",
    )
    figures.add("  reference: bare fetch", bare)
    figures.add(
        f"`gatecfg evaluate` process at {stored:,} values",
        process,
        f"{process.cpu / bare_process.cpu:.1f}x CPU of a plain Python process doing the bare fetch: a CI "
        "process's fixed costs",
    )
    figures.add("  reference: plain Python process, bare fetch", bare_process, "sqlite3 / psycopg only")


@contextlib.contextmanager
def _scratch(url: str, work: Path, name: str) -> Iterator[str]:
    """A second, empty store beside `url`: a SQLite file in `work`, or a database on the same server."""
    if sa.make_url(url).get_backend_name() != "postgresql":
        path = work / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        yield f"sqlite:///{path}"
        return
    with _pg_database(url) as scratch, Store.open(scratch, check_schema=False) as store:
        store.upgrade()
        yield scratch


# A plain Python process that makes the bare fetch: the driver, one statement, every row.
BARE_PROCESS = """
import json, sys
url, sql, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if url.startswith("sqlite"):
    import sqlite3
    conn = sqlite3.connect(url.split(":///", 1)[1])
else:
    import psycopg
    conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))
cursor = conn.cursor()
cursor.execute(sql, params)
print(len(cursor.fetchall()))
"""


def _bare_process(url: str, hashes: Sequence[str], scale: Scale, cwd: Path) -> Timing:
    sql = _driver_sql(url, BARE_FETCH, hashes=", ".join("?" * len(hashes)))
    params = [*hashes, "bench-evaluate", scale.window, -FINITE_MAX, FINITE_MAX]
    return _wall(["-c", BARE_PROCESS, url, sql, json.dumps(params)], cwd, scale.repeat)


def _evaluation(request: Request, values: int) -> Callable[[], object]:
    def evaluate() -> object:
        report = run_evaluation(request)
        judged = sum(len(result) for result in report.results)
        if judged != values:
            raise RuntimeError(f"{judged} verdicts, expected {values}")
        return render(report, "text")

    return evaluate


# ----------------------------------------------------------------------------------------- references

# The baseline rows through the project's indexes: the newest `window` qualifying runs of each coordinate
# ranked on run_coordinates (primary key coordinate_pk, run_pk), their points read by metric_points'
# primary key (coordinate_pk, run_pk, step). `?` placeholders; PostgreSQL's driver gets `%s`.
BARE_FETCH = """
WITH ranked AS (
  SELECT rc.coordinate_pk, rc.run_pk,
         row_number() OVER (PARTITION BY rc.coordinate_pk ORDER BY r.created_at DESC, r.pk DESC) AS rn
  FROM run_coordinates rc
  JOIN coordinates c ON c.pk = rc.coordinate_pk
  JOIN runs r ON r.pk = rc.run_pk
  WHERE c.coordinate IN ({hashes}) AND COALESCE(r.trust_override, r.gate_trusted) {true} AND r.run_id <> ?
)
SELECT ranked.coordinate_pk, mp.step, mp.value
FROM ranked JOIN metric_points mp ON mp.coordinate_pk = ranked.coordinate_pk AND mp.run_pk = ranked.run_pk
WHERE ranked.rn <= ? AND mp.value BETWEEN ? AND ?
"""

# The newest `window` qualifying finite values of one (coordinate, step), through the same primary keys:
# CROSS JOIN fixes SQLite's join order (left to right), which otherwise scans all of the coordinate's
# points for the step; PostgreSQL plans it as the inner join it is.
PER_COORDINATE = """
SELECT mp.value
FROM coordinates c
CROSS JOIN run_coordinates rc
CROSS JOIN runs r
CROSS JOIN metric_points mp
WHERE c.coordinate = ? AND rc.coordinate_pk = c.pk AND r.pk = rc.run_pk
  AND COALESCE(r.trust_override, r.gate_trusted) {true} AND r.run_id <> ?
  AND mp.coordinate_pk = rc.coordinate_pk AND mp.run_pk = rc.run_pk AND mp.step = ?
  AND mp.value BETWEEN ? AND ?
ORDER BY r.created_at DESC, r.pk DESC
LIMIT ?
"""


def _driver_sql(url: str, sql: str, **fields: str) -> str:
    postgres = sa.make_url(url).get_backend_name() == "postgresql"
    text = sql.format(true="IS TRUE" if postgres else "= 1", **fields)
    return text.replace("?", "%s") if postgres else text


@contextlib.contextmanager
def _dbapi(url: str) -> Iterator[Any]:
    engine = sa.create_engine(url)
    try:
        raw = engine.raw_connection()
        try:
            yield raw
        finally:
            raw.close()
    finally:
        engine.dispose()


def _bare_fetch(url: str, hashes: Sequence[str], scale: Scale) -> tuple[Timing, int]:
    sql = _driver_sql(url, BARE_FETCH, hashes=", ".join("?" * len(hashes)))
    params = [*hashes, "bench-evaluate", scale.window, -FINITE_MAX, FINITE_MAX]
    rows: list[Any] = []
    with _dbapi(url) as raw:

        def fetch() -> None:
            cursor = raw.cursor()
            cursor.execute(sql, params)
            rows[:] = cursor.fetchall()
            cursor.close()
            raw.rollback()

        fetch()
        return _best(scale.repeat, fetch), len(rows)


def _per_coordinate(url: str, specs: Sequence[CoordinateSpec], scale: Scale) -> float:
    sql = _driver_sql(url, PER_COORDINATE)
    with _dbapi(url) as raw:
        cursor = raw.cursor()
        began = time.perf_counter()
        for spec in specs:
            for step in range(scale.steps):
                cursor.execute(
                    sql, [spec.coordinate, "bench-evaluate", step, -FINITE_MAX, FINITE_MAX, scale.window]
                )
                cursor.fetchall()
        elapsed = time.perf_counter() - began
        cursor.close()
        raw.rollback()
    return elapsed


def _markdown(results: Sequence[Figures]) -> str:
    lines = ["| store | figure | value | note |", "|---|---|---|---|"]
    for figures in results:
        for name, value, note in figures.rows:
            lines.append(f"| {figures.store} | {name.strip()} | {value} | {note} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
