"""Sigma bands, tolerated steps and the baseline policy: the arithmetic, the language, and `evaluate`."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import flat, run_cli

from gatecfg.band import band, min_values, reference, spread
from gatecfg.models import Constraint
from gatecfg.resolve import load_tree
from gatecfg.verdicts import allowed_failures

TEST = "tests/e2e/test_x_ci.py"
METRIC = "train/grad_norm"
HISTORY = [1.0, 1.2, 0.9, 1.1, 1.3, 0.8, 1.05]


# --- the band ---------------------------------------------------------------------------------------


def test_sigma_widens_a_side_to_sigma_times_the_sample_standard_deviation() -> None:
    current = band(Constraint(sigma_down=2.0, abs_floor_down=0.01, sigma_up=3.0), HISTORY)
    ref, sd = statistics.fmean(HISTORY), statistics.stdev(HISTORY)
    assert current.sd == pytest.approx(sd, rel=1e-11)
    assert current.lo == pytest.approx(ref - 2.0 * sd, rel=1e-11)
    assert current.hi == pytest.approx(ref + 3.0 * sd, rel=1e-11)


@pytest.mark.parametrize(
    ("constraint", "wins"),
    [
        (Constraint(rel_down=0.5, sigma_down=1.0), "rel"),
        (Constraint(abs_floor_down=0.9, sigma_down=1.0), "floor"),
        (Constraint(rel_down=0.01, abs_floor_down=0.01, sigma_down=1.0), "sigma"),
    ],
    ids=["rel-wider", "floor-wider", "sigma-wider"],
)
def test_a_side_takes_the_widest_of_rel_floor_and_sigma(constraint: Constraint, wins: str) -> None:
    ref, sd = statistics.fmean(HISTORY), statistics.stdev(HISTORY)
    width = {"rel": 0.5 * abs(ref), "floor": 0.9, "sigma": sd}[wins]
    assert band(constraint, HISTORY).lo == pytest.approx(ref - width, rel=1e-11)


def test_no_sigma_term_below_two_values() -> None:
    one = band(Constraint(sigma_down=5.0, abs_floor_down=0.1), [2.0])
    assert (one.sd, one.lo, one.hi) == (None, 1.9, None)


def test_a_sigma_only_side_needs_two_values_and_other_sides_one() -> None:
    assert min_values(Constraint(sigma_down=2.0)) == 2
    assert min_values(Constraint(sigma_down=2.0, rel_down=0.1)) == 1
    assert min_values(Constraint(sigma_up=2.0, rel_down=0.1)) == 2
    assert min_values(None) == 1


def test_median_reference_ignores_one_outlier_and_spread_stays_around_the_mean() -> None:
    values = [1.0, 1.0, 1.0, 1.0, 100.0]
    assert reference(values, "median") == 1.0
    assert reference(values) == 20.8
    assert band(Constraint(rel_up=0.1), values, "median").hi == 1.1
    assert spread(values) == pytest.approx(statistics.stdev(values), rel=1e-11)


@pytest.mark.parametrize(
    ("tolerate", "judged", "allowed"),
    [(0, 10, 0), (2, 10, 2), (0.2, 10, 2), (0.29, 100, 29), (0.1, 9, 0), (0.5, 7, 3)],
    ids=["zero", "count", "fraction", "fraction-decimal-exact", "fraction-rounds-down", "half-of-odd"],
)
def test_allowed_failures(tolerate: float, judged: int, allowed: int) -> None:
    assert allowed_failures(tolerate, judged) == allowed


# --- the language -------------------------------------------------------------------------------------

BASE = """\
version: 1
defaults:
  train/grad_norm:
    steps: all
    constraint: {rel_up: 0.5, abs_floor_up: 0.1}
policy:
  window: 20
  min_history: 1
"""
TOLERANT_BASE = BASE.replace("abs_floor_up: 0.1}\n", "abs_floor_up: 0.1}\n    tolerate: 3\n")


def gates_with(root: Path, body: str, base: str = BASE) -> Path:
    gates = root / "gates"
    gates.mkdir(parents=True, exist_ok=True)
    (gates / "base.yaml").write_text(base, encoding="utf-8")
    (gates / "test_x.yaml").write_text(f"test: {TEST}\ngates:\n{body}", encoding="utf-8")
    return gates


def resolved(gates: Path) -> dict[str, Any]:
    result = run_cli("resolve", "--gates", gates, "--format", "json")
    assert result.code == 0, result.err
    rows: list[dict[str, Any]] = json.loads(result.out)
    return rows[0]


def test_tolerate_is_inherited_with_its_source_and_is_not_identity(tmp_path: Path) -> None:
    inherited = resolved(gates_with(tmp_path / "a", "  train/grad_norm:\n", TOLERANT_BASE))
    assert inherited["tolerate"] == 3
    assert inherited["sources"]["tolerate"].endswith("gates/base.yaml:6")
    body = "  train/grad_norm:\n    tolerate: 0.25\n    trials: 16\n"
    written = resolved(gates_with(tmp_path / "b", body, TOLERANT_BASE))
    assert (written["tolerate"], written["trials"]) == (0.25, 16)
    assert written["sources"]["tolerate"].endswith("gates/test_x.yaml:4")
    assert written["coordinate"] == inherited["coordinate"]  # verdict-only fields keep the baseline


def test_sigma_is_identity(tmp_path: Path) -> None:
    plain = resolved(gates_with(tmp_path / "a", "  train/grad_norm:\n"))
    sigma = resolved(
        gates_with(tmp_path / "b", "  train/grad_norm:\n    constraint: {rel_up: 0.5, abs_floor_up: 0.1, "
                   "sigma_up: 3}\n")
    )  # fmt: skip
    assert sigma["constraint_key"] == '{"abs_floor_up":0.1,"rel_up":0.5,"sigma_up":3}'
    assert sigma["coordinate"] != plain["coordinate"]


def test_policy_reference_and_baseline_resolve_with_sources(tmp_path: Path) -> None:
    policy_lines = "  min_history: 1\n  reference: median\n  baseline: nightly\n"
    base = BASE.replace("  min_history: 1\n", policy_lines)
    tree = load_tree(gates_with(tmp_path, "  train/grad_norm:\n", base))
    policy = tree.test(TEST).policy
    assert (policy.reference, policy.baseline) == ("median", "nightly")
    assert policy.sources["baseline"].endswith("base.yaml:10")
    builtin = load_tree(gates_with(tmp_path / "b", "  train/grad_norm:\n")).test(TEST).policy
    assert (builtin.reference, builtin.baseline) == ("mean", "trusted")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    tolerate: 1.5\n", "4:15: error: gates.train/grad_norm.tolerate: tolerate is a count of steps "
         "(0, 1, 2, ...) or a fraction between 0 and 1, got 1.5"),
        ("    tolerate: -1\n", "got -1"),
        ("    tolerate: true\n", "got true"),
        ("    tolerate: null\n", "`tolerate: null` has no meaning here"),
        ("    trials: 0\n", "4:13: error: gates.train/grad_norm.trials:"),
        ("    constraint: {sigma_down: -1}\n", "gates.train/grad_norm.constraint.sigma_down:"),
        ("    steps: last\n    tolerate: 1\n",
         "5:15: error: gates.train/grad_norm.tolerate: `tolerate: 1` (gates/test_x.yaml:5) lets every "
         "step of `steps: last` fail, so the gate could never fail"),
        ("    steps: [0, 1]\n", "`tolerate: 3` (gates/base.yaml:6) lets every step of `steps: [0, 1]` fail"),
    ],
    ids=["fraction-above-one", "negative", "bool", "null", "trials-zero", "sigma-negative",
         "tolerate-on-last", "inherited-tolerate-on-a-short-list"],
)  # fmt: skip
def test_invalid_new_literals_are_located_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    gates_with(tmp_path, f"  train/grad_norm:\n{body}", TOLERANT_BASE)
    result = run_cli("lint", "--gates", "gates")
    assert result.code == 2
    assert expected in result.out


# --- through evaluate ---------------------------------------------------------------------------------


def record(path: Path, points: Sequence[tuple[int, float]]) -> Path:
    path.write_text(json.dumps({METRIC: [list(p) for p in points]}) + "\n", encoding="utf-8")
    return path


def evaluate(tmp_path: Path, gates: Path, db: str, points: Sequence[tuple[int, float]], *extra: str
             ) -> tuple[int, dict[str, Any]]:  # fmt: skip
    path = record(tmp_path / "run.jsonl", points)
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", path, "--db", db,
                     "--format", "json", *extra)  # fmt: skip
    return result.code, json.loads(result.out)


def seed(tmp_path: Path, gates: Path, db: str, nights: Sequence[Sequence[tuple[int, float]]], first: int = 0
         ) -> None:  # fmt: skip
    for night, points in enumerate(nights, start=first):
        code, report = evaluate(tmp_path, gates, db, points, "--write", "--run-id", f"n{night}")
        assert code == 0, report


def test_sigma_band_through_evaluate(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    steps: last\n    constraint: {sigma_down: 2}\n"
                       "    enforce: true\n")  # fmt: skip
    code, first = evaluate(tmp_path, gates, db, [(0, HISTORY[0])], "--write", "--run-id", "n0")
    assert (code, first["verdicts"][0]["status"]) == (0, "cold")
    code, second = evaluate(tmp_path, gates, db, [(0, -50.0)])
    assert (code, second["verdicts"][0]["status"]) == (0, "cold")  # one value: no spread, still cold
    assert "cold: 1 of 2 (sigma) trusted values" in second["verdicts"][0]["reason"]
    seed(tmp_path, gates, db, [[(0, v)] for v in HISTORY[1:]], first=1)
    lo = statistics.fmean(HISTORY) - 2 * statistics.stdev(HISTORY)
    code, inside = evaluate(tmp_path, gates, db, [(0, lo + 0.001)])
    verdict = inside["verdicts"][0]
    assert (code, verdict["status"]) == (0, "pass")
    assert verdict["lo"] == pytest.approx(lo, rel=1e-11)
    assert verdict["sd"] == pytest.approx(statistics.stdev(HISTORY), rel=1e-11)
    code, outside = evaluate(tmp_path, gates, db, [(0, lo - 0.001)])
    assert (code, outside["verdicts"][0]["status"]) == (1, "fail")


TEN_STEPS = [(s, 1.0) for s in range(10)]


def spiked(steps: Sequence[int], value: float = 5.0) -> list[tuple[int, float]]:
    return [(s, value if s in steps else v) for s, v in TEN_STEPS]


@pytest.mark.parametrize("tolerate", ["2", "0.2"], ids=["count", "fraction"])
def test_tolerate_through_evaluate(tmp_path: Path, db: str, tolerate: str) -> None:
    gates = gates_with(tmp_path, f"  train/grad_norm:\n    tolerate: {tolerate}\n    enforce: true\n")
    seed(tmp_path, gates, db, [TEN_STEPS, TEN_STEPS])
    code, report = evaluate(tmp_path, gates, db, spiked([3, 7]), "--write", "--run-id", "two-spikes")
    failing = [v for v in report["verdicts"] if v["status"] == "fail"]
    assert [(v["step"], v["tolerated"]) for v in failing] == [(3, True), (7, True)]  # listed, tolerated
    assert code == 0
    assert report["run"]["trusted"] is True
    gate = report["gates"][0]
    assert (gate["status"], gate["failing"], gate["allowed"], gate["steps"]) == ("pass", 2, 2, 10)
    assert gate["reason"] == f"2 of 10 steps failing; tolerate: {tolerate} allows 2 (tolerated)"
    code, report = evaluate(tmp_path, gates, db, spiked([1, 3, 7]))
    assert code == 1
    assert report["run"]["trusted"] is False
    assert [v["tolerated"] for v in report["verdicts"] if v["status"] == "fail"] == [False] * 3
    assert report["gates"][0]["status"] == "fail"
    text = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", tmp_path / "run.jsonl",
                   "--db", db)  # fmt: skip
    assert "FAIL" in text.out
    assert "1 enforced gate failing" in flat(text.out)  # gates counted as gates, not their 3 steps


def test_an_error_step_is_never_tolerated(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    tolerate: 5\n    enforce: true\n")
    seed(tmp_path, gates, db, [TEN_STEPS])
    path = tmp_path / "nan.jsonl"
    rows = [{"_step": s, METRIC: "NaN" if s == 4 else 1.0} for s in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = run_cli("evaluate", "--gates", gates, "--test", TEST, "--record", path, "--db", db,
                     "--format", "json")  # fmt: skip
    report = json.loads(result.out)
    assert result.code == 1
    assert report["gates"][0]["status"] == "error"


def test_nightly_baseline_keeps_failing_draws_in_the_reference(tmp_path: Path, db: str) -> None:
    trusted = gates_with(tmp_path, "  train/grad_norm:\n    steps: last\n")
    seed(tmp_path, trusted, db, [[(0, 1.0)], [(0, 1.0)], [(0, 9.0)]])  # the last fails, stored untrusted
    _, by_trusted = evaluate(tmp_path, trusted, db, [(0, 1.0)])
    assert (by_trusted["verdicts"][0]["n"], by_trusted["verdicts"][0]["ref"]) == (2, 1.0)
    base = BASE.replace("  min_history: 1\n", "  min_history: 1\n  baseline: nightly\n")
    nightly = gates_with(tmp_path / "nightly", "  train/grad_norm:\n    steps: last\n", base)
    _, by_nightly = evaluate(tmp_path, nightly, db, [(0, 1.0)])
    assert (by_nightly["verdicts"][0]["n"], by_nightly["verdicts"][0]["ref"]) == (3, pytest.approx(11 / 3))
    assert run_cli("untrust", "--run-id", "n2", "--db", db).code == 0
    _, by_hand = evaluate(tmp_path, nightly, db, [(0, 1.0)])
    assert by_hand["verdicts"][0]["n"] == 2  # untrusted by hand: out of every baseline


def test_median_reference_through_evaluate(tmp_path: Path, db: str) -> None:
    base = BASE.replace("  min_history: 1\n", "  min_history: 1\n  reference: median\n  baseline: nightly\n")
    gates = gates_with(tmp_path, "  train/grad_norm:\n    steps: last\n", base)
    seed(tmp_path, gates, db, [[(0, 1.0)], [(0, 1.0)], [(0, 40.0)], [(0, 1.0)]])
    _, report = evaluate(tmp_path, gates, db, [(0, 1.2)])
    assert (report["verdicts"][0]["ref"], report["verdicts"][0]["status"]) == (1.0, "pass")


def test_every_report_lists_tolerated_steps_without_failing_the_gate(tmp_path: Path, db: str) -> None:
    gates = gates_with(tmp_path, "  train/grad_norm:\n    tolerate: 2\n    enforce: true\n")
    seed(tmp_path, gates, db, [TEN_STEPS])
    path = record(tmp_path / "run.jsonl", spiked([3, 7]))
    base = ("evaluate", "--gates", gates, "--test", TEST, "--record", path, "--db", db)
    junit = run_cli(*base, "--format", "junit")
    assert junit.code == 0
    assert "<failure" not in junit.out
    assert "TOLERATED: 2 failing steps within `tolerate: 2`" in junit.out
    assert "step 3: fail (tolerated)" in junit.out
    github = run_cli(*base, "--format", "github")
    assert github.out.count("::warning ") == 2
    assert "fail (enforced, within tolerate: 2) at step 3" in github.out
    text = run_cli(*base, "--verbose").out
    assert "FAIL (tolerated)" in text
    assert "1 gate within tolerate (2 failing steps)" in flat(text)
    assert "| ✅ | `train/grad_norm`" in run_cli(*base, "--format", "markdown").out
