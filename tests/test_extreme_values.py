"""Values near the float maximum (a diverged run at 1.8e308) and absurd nights: every statistic of a window
stays finite where it is, an absurd night in the window neither blinds the budget rule nor crashes it (a
window whose arithmetic overflows is unusable, never a pass), and every command that reads such a history
judges or reports it (never exit 70)."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli
from test_budget import TEST as BUDGET_TEST
from test_budget import record, write_gates
from test_lone_step import quiet_window

from gatecfg import moments
from gatecfg.band import band, bulk_bands
from gatecfg.budget import Null, UnusableWindowError, decide
from gatecfg.models import Constraint

BIG = 1.7976931348623157e308
TEST = "t.py"


def _scaled(values: list[float]) -> list[float]:
    """The values times 2**-600 (exact): within the range where the statistics module's arithmetic holds."""
    return [math.ldexp(v, -600) for v in values]


@pytest.mark.parametrize(
    "values",
    [[BIG, BIG, BIG * 0.99], [BIG, -BIG * 0.5, BIG], [1e308] * 20, [-BIG, -BIG]],
    ids=["near-max", "mixed-signs", "identical-1e308", "negative-max"],
)
def test_mean_median_and_spread_stay_finite_at_the_float_maximum(values: list[float]) -> None:
    small = _scaled(values)
    assert moments.mean(values) == pytest.approx(math.ldexp(statistics.fmean(small), 600), rel=1e-15)
    assert moments.median(values) == math.ldexp(statistics.median(small), 600)
    assert moments.stdev(values) == pytest.approx(math.ldexp(statistics.stdev(small), 600), rel=1e-12)


def test_a_spread_beyond_the_float_range_is_infinite() -> None:
    assert moments.stdev([BIG, -BIG]) == math.inf


def test_moments_agree_with_statistics_in_the_usual_range() -> None:
    rng = random.Random(4)
    values = [rng.gauss(3.0, 0.5) for _ in range(30)]
    assert moments.mean(values) == statistics.fmean(values)
    assert moments.median(values) == statistics.median(values)
    assert moments.stdev(values) == pytest.approx(statistics.stdev(values), rel=1e-14)


def test_a_band_over_nights_at_the_maximum_is_finite_or_open() -> None:
    history = [BIG * (1 - k * 1e-3) for k in range(10)]
    current = band(Constraint(sigma_up=3.0, sigma_down=3.0), history)
    assert current.lo == pytest.approx(moments.mean(history) - 3 * moments.stdev(history), rel=1e-11)
    assert current.hi is None  # beyond the float maximum: nothing finite lies above it
    assert current.contains(history[3])
    assert not current.contains(BIG * 0.9)


def test_the_budget_rule_judges_a_window_at_1e308_as_it_judges_the_same_window_at_1() -> None:
    rng = np.random.default_rng(7)
    history = 1.0 + 0.01 * rng.standard_normal((5, 20))
    tonight = 1.0 + 0.01 * rng.standard_normal(5)
    tonight[2] += 0.2  # one step regressed
    usual = decide(tonight, history, direction="both", alpha=0.01)
    scale = 2.0**1020  # 1e307: squares far beyond the float range
    huge = decide(tonight * scale, history * scale, direction="both", alpha=0.01)
    assert huge.failing.tolist() == usual.failing.tolist() == [False, False, True, False, False]
    assert huge.distance == usual.distance
    assert huge.lo is not None
    assert usual.lo is not None
    assert (huge.lo / scale).tolist() == usual.lo.tolist()
    assert (huge.loc / scale).tolist() == usual.loc.tolist()


BASE = """\
version: 1
defaults:
  m/band:
    steps: last
    constraint: {rel_up: 0.5, rel_down: 0.5}
  m/sigma:
    steps: last
    constraint: {sigma_up: 3, sigma_down: 3}
  m/budget:
    steps: last
    constraint: {budget: both}
policy:
  window: 20
  min_history: 1
"""


@pytest.fixture
def huge_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store of 30 trusted nights at the float maximum, imported; the working directory holds the gates."""
    monkeypatch.chdir(tmp_path)
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text(BASE, encoding="utf-8")
    body = "".join(f"  m/{name}:\n    enforce: true\n" for name in ("band", "sigma", "budget"))
    (gates / "t.yaml").write_text(f"test: {TEST}\ngates:\n{body}", encoding="utf-8")
    rng = random.Random(2)
    rows = ["run_id,date,commit,trusted,m/band,m/sigma,m/budget"]
    for i in range(30):
        v = BIG if i % 3 == 0 else BIG * (1 - rng.random() * 0.01)
        rows.append(f"r{i},2024-01-{i // 2 + 1:02d}T{i % 2:02d}:00:00,c{i},true,{v!r},{v!r},{v!r}")
    (tmp_path / "nights.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = run_cli("import", "--test", TEST, "--db", db, "nights.csv")
    assert result.code == 0, result.err
    return db


def test_evaluate_judges_a_usual_night_at_the_maximum(huge_history: str, tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    metrics = {f"m/{name}": [[0, BIG * 0.995]] for name in ("band", "sigma", "budget")}
    record.write_text(json.dumps(metrics) + "\n", encoding="utf-8")
    args = ("evaluate", "--test", TEST, "--record", record, "--db", huge_history, "--format", "json")
    for written in ((), ("--write", "--run-id", "tonight")):
        result = run_cli(*args, *written)
        report = json.loads(result.out)
        statuses = {v["metric"]: v["status"] for v in report["verdicts"]}
        assert statuses == {"m/band": "pass", "m/sigma": "pass", "m/budget": "pass"}, report
        assert result.code == 0


@pytest.mark.parametrize(
    "command",
    [
        ("regimes", "--test", TEST, "--all"),
        ("regimes", "--test", TEST, "--metric", "m/sigma", "--format", "json"),
        ("rebaseline", "--test", TEST, "--metric", "m/band"),
        ("backtest", "--test", TEST),
        ("report", "--html", "out"),
        ("history", "--test", TEST, "--metric", "m/budget"),
    ],
    ids=lambda c: "-".join(c[:1] + c[-1:]),
)
def test_every_reader_of_the_history_handles_the_maximum(huge_history: str, command: tuple[str, ...]) -> None:
    result = run_cli(*command, "--db", huge_history)
    assert result.code == 0, result.err


def _brute_absurd(values: list[float]) -> list[float]:
    """moments.without_absurd's definition, written out: beyond ABSURD_SPREADS times the larger of the
    median absolute deviation (as a standard deviation) and the median's size."""
    centre = statistics.median(values)
    mad = statistics.median([abs(v - centre) for v in values]) * moments.MAD_TO_SD
    reach = moments.ABSURD_SPREADS * max(mad, abs(centre))
    return [v for v in values if reach == 0 or abs(v - centre) <= reach]


@pytest.mark.parametrize(
    ("values", "absurd"),
    [
        ([1.0 + 0.01 * k for k in range(19)] + [1e300], [1e300]),
        ([1.0] * 19 + [1e300], [1e300]),  # a window holding still has its median's size as a scale
        ([-2.0, -2.1, -1.9, -2.0, 1e20], [1e20]),
        ([1.0, 1.1, 0.9, -1e300, 1.0], [-1e300]),
        ([3.0] * 19 + [4.0], []),  # a count that moves once is not absurd
        ([0.0] * 19 + [5.0], []),  # against 0, nothing has a size
        ([0.0, -1.0, 1.0, 0.5, -0.5, 20.0], []),
        ([1.0, 2.0, 1.5, 40.0], []),  # 40 times the level of its neighbours is a spike, not absurd
        ([BIG, -BIG * 0.5, BIG], []),
    ],
    ids=["1e300-among-1", "1e300-among-identical", "1e20-among-negatives", "minus-1e300", "count", "zeros",
         "around-zero", "spike", "near-max-mixed"],
)  # fmt: skip
def test_an_absurd_value_is_one_beyond_50_robust_spreads_of_the_median(
    values: list[float], absurd: list[float]
) -> None:
    kept = list(moments.without_absurd(values))
    assert kept == _brute_absurd(values)
    assert sorted(set(values) - set(kept)) == absurd


def test_clean_windows_almost_never_hold_an_absurd_value() -> None:
    rng = np.random.default_rng(11)
    for draw in (rng.standard_normal, lambda size: np.exp(0.5 * rng.standard_normal(size))):
        windows = draw((2000, 20))
        dropped = sum(len(moments.without_absurd(row.tolist())) < 20 for row in windows)
        assert dropped <= 2


@pytest.mark.parametrize(
    "constraint",
    [{"rel_down": 0.5}, {"rel_up": 0.5, "rel_down": 0.5}, {"sigma_up": 3.0, "sigma_down": 3.0}],
    ids=["open-up", "two-sided", "sigma"],
)
def test_one_night_at_1e300_in_the_window_neither_fails_the_usual_level_nor_passes_a_shift(
    constraint: dict[str, float],
) -> None:
    # Before: the window's mean was 5e298, so a night at the usual level failed every band (and a sigma
    # band, 2e299 wide, passed anything) until the absurd night left the window, which, its gate failing
    # every night, it never did.
    rng = random.Random(5)
    history = [1.0 + 0.01 * rng.gauss(0.0, 1.0) for _ in range(19)]
    history.insert(7, 1e300)
    current = band(Constraint.model_validate(constraint), history)
    assert current.ref == pytest.approx(1.0, abs=0.01)
    assert (current.n, current.absurd) == (20, 1)
    assert current.contains(1.0)
    assert not current.contains(0.3)
    assert "of 20 nights (1 absurd left out)" in current.versus(1.0, "mean")


def test_the_bulk_bands_leave_the_absurd_night_out_as_band_does() -> None:
    rng = np.random.default_rng(3)
    windows = 1.0 + 0.01 * rng.standard_normal((50, 20))
    windows[::7, 4] = 1e300
    found = bulk_bands(Constraint(rel_down=0.5), windows)
    assert found is not None
    exact = [band(Constraint(rel_down=0.5), row.tolist()) for row in windows]
    assert found[0].tolist() == [b.ref for b in exact]
    assert found[1].tolist() == [b.lo for b in exact]


def test_evaluate_passes_the_usual_level_after_a_night_at_1e300_on_an_open_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reward's up side is open: its night at 1e300 passes and is trusted, and stays in the window.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "base.yaml").write_text(
        "version: 1\ndefaults:\n  m/reward:\n    steps: last\n    constraint: {rel_down: 0.2}\n"
        "policy:\n  window: 20\n", encoding="utf-8"
    )  # fmt: skip
    (tmp_path / "gates" / "t.yaml").write_text(f"test: {TEST}\ngates:\n  m/reward:\n    enforce: true\n")
    rng = random.Random(6)
    rows = ["run_id,date,commit,m/reward"]
    for i in range(12):
        value = 1e300 if i == 9 else 0.5 + 0.01 * rng.gauss(0.0, 1.0)
        rows.append(f"r{i},2024-01-{i + 1:02d}T00:00:00,c{i},{value!r}")
    (tmp_path / "nights.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'h.db'}"
    assert run_cli("import", "--test", TEST, "--db", db, "nights.csv").code == 0
    (tmp_path / "run.jsonl").write_text(json.dumps({"m/reward": [[0, 0.5]]}) + "\n", encoding="utf-8")

    result = run_cli("evaluate", "--test", TEST, "--record", "run.jsonl", "--db", db, "--format", "json")

    [verdict] = json.loads(result.out)["verdicts"]
    assert (result.code, verdict["status"]) == (0, "pass"), verdict
    assert verdict["ref"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("absurd", [1e300, 1e-300], ids=["1e300", "1e-300"])
def test_an_absurd_night_in_the_window_neither_passes_a_shift_nor_fails_a_clean_night(absurd: float) -> None:
    # Nine nights near 1.0 and one absurd one: before, the absurd night's clipped statistics widened
    # every threshold past what any night can reach, and a run at 5.0 on every step passed.
    window = quiet_window(20, 10, seed=8, log=False)[:, 1:]
    window[:, 3] = absurd
    clean = quiet_window(20, 0, seed=9, log=False)[:, 0]

    shifted = decide(np.full(20, 5.0), window, direction="up", alpha=0.01)
    null = Null.of(window, direction="up", alpha=0.01, trials=None)
    [(_, side)] = null.sides
    every_step = null.statistics(null.standardise(np.full(20, 5.0)), side)

    assert shifted.fired
    assert every_step.severity[0] > 1.0  # the mean over all steps fires, not only the lone step
    assert not decide(clean, window, direction="up", alpha=0.01).fired


def test_a_window_whose_values_overflow_is_unusable_not_a_pass() -> None:
    window = 1e308 * np.sign(np.random.default_rng(1).standard_normal((20, 10)))

    with pytest.raises(UnusableWindowError, match=r"cannot be computed|too large"):
        Null.of(window, direction="up", alpha=0.01, trials=None)


def test_evaluate_judges_a_gate_over_a_history_at_1e308(tmp_path: Path) -> None:
    # Before: numpy's LinAlgError out of the budget rule, exit 70 on the sixth `evaluate --write`; then
    # an error verdict. The rule judges the window scaled by a power of two (`budget.decide`).
    gates = write_gates(tmp_path, enforce=True)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    signs = np.sign(np.random.default_rng(2).standard_normal((8, 20)))
    args = ("evaluate", "--gates", gates, "--test", BUDGET_TEST, "--db", db)
    for night, values in enumerate(1e308 * signs[:-1]):
        written = run_cli(
            *args, "--record", record(tmp_path / "r.jsonl", values), "--write", "--run-id", f"n{night}"
        )
        assert written.code == 0, written.err

    result = run_cli(*args, "--record", record(tmp_path / "r.jsonl", 1e308 * signs[-1]), "--format", "json")

    report = json.loads(result.out)
    [gate] = report["gates"]
    assert (result.code, gate["status"]) == (0, "pass")
    assert {v["status"] for v in report["verdicts"]} == {"pass"}


def test_an_absurd_night_in_a_single_steps_window_does_not_pass_a_fivefold_value() -> None:
    # A single step keeps the metric's own tails in its past spread (clipped only at ABSURD_MADS): real
    # nights 5-10 robust spreads out stay in it, a night at 1e300 does not widen it out of reach.
    window = quiet_window(1, 10, seed=13, log=False)[:, 1:]
    window[0, 4] = 1e300

    assert decide(np.array([5.0]), window, direction="up", alpha=0.01).fired
    assert not decide(np.array([1.0]), window, direction="up", alpha=0.01).fired
