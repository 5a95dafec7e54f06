"""Gate quality: false alarms per night and detection power of every rule, side by side.

    python benchmarks/gate_quality.py [--nights 2000] [--nights-1000 600] [--seed 0] [--jobs 2] [--json]
        [--families gaussian,ar1] [--steps 20,100] [--rules "budget (gatecfg),bencher-t,shipped"]
        [--window 60]

For each noise family (below) and each step count (20, 100, 1,000 steps per run), a stream of clean
nightlies is simulated; every night after the first `--window` (by default WINDOW, base.yaml's
`policy.window`) is judged against that many nights before it (the baseline, newest first) by every
rule. The same night is then judged again with a regression injected (never entering any baseline):

* `k sigma all`: every step shifted by k sigma in the harmful direction (k = 1, 2, 3), sigma the metric's
  clean night-to-night standard deviation at that step (measured on SIGMA_NIGHTS clean nights);
* `k sigma 10%`: the same on a contiguous block of 10% of the steps at a random position;
* `drift`: a shift growing linearly from 0 at the first step to 3 sigma at the last;
* `xK step`: one step at a random position multiplied by K (K = 10, 100, 1e6; divided by K where the
  harmful direction is down), a step that explodes;
* `k sigma step`: one step at a random position shifted by k sigma (k = 10, 100);
* `3sd all, absurd night`: the `3 sigma all` night judged against the same window with one of its nights
  (at random) replaced by 1e300 at every step, the absurd night a broken logger or a unit change writes.
  The clean night is judged against that window too: `false alarms, absurd night`.

Every rule gives each night a score, and fails it when the score exceeds 1 (its documented default). The
matched comparison replaces 1 by the score the clean nights exceed 1% of the time, so each rule runs at
1% false alarms per night, and reports detection there: the fair comparison. A line under the table
counts, per cell, whether the budget rule detects more than the best other rule there (won, tied, lost).

Rules: gatecfg's `band` (the rel/abs band of SPEC §4 with the literal the old base.yaml shipped for that
metric), gatecfg's `budget` (gatecfg/budget.py, false_alarm 0.01, the family's harmful direction and
`trials` where known), and peers' published rules, re-implemented here for comparison only:

* `bencher-t`: per step, Student t boundary at 0.99 over the window (Bencher's statistical threshold);
* `conbench-z5`: per step, z > 5 against the window (conbench);
* `megatron-golden`: per step, |value - golden| > 5% of golden, golden the window mean; the run fails when
  more than min(max(N/100, 1), 50) of its N steps do (Megatron-LM's functional tests; the tolerance
  is an assumption, the forgiveness is theirs);
* `skyrl-minmax`: per step, 5% allowance beyond the min/max of the last 20 runs (SkyRL's CI scripts);
* `elementary-z+pct`: per step, z > 3 and a change of more than 10% of the mean (Elementary's anomaly
  sensitivity plus a percent threshold).

A peer rule that judges one value is applied at every step; the run fails when any step does (except
Megatron's, which forgives). `ms/window` is the time a rule takes per window: whatever it computes from the
window once, and the night judged with each of its variants (clean and every regression), and again
against the window with an absurd night.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

import numpy as np
from scipy.special import stdtrit

from gatecfg.budget import MIN_NIGHTS, Direction, Null, UnusableWindowError
from gatecfg.resolve import Policy, ResolvedGate, load_tree
from gatecfg.select import Selection
from gatecfg.verdicts import evaluate
from gatecfg.windows import Baselines, Window

REPO = Path(__file__).resolve().parent.parent
CHECKED_NIGHTS = 20  # nights on which a shipped default's score is checked against evaluate's own verdict

# Nights in the baseline by default: base.yaml's policy.window (60 since wave 3; `--window 20` gives the
# earlier rounds' windows, benchmarks/results/gate-quality.md).
WINDOW = 60
SKYRL_RUNS = 20  # SkyRL's rule looks at the last 20 runs whatever the window
STEP_COUNTS = (20, 100, 1000)
SIGMA_NIGHTS = 4000
MATCHED = 0.01
REGRESSIONS = (
    "1sd all",
    "2sd all",
    "3sd all",
    "1sd 10%",
    "2sd 10%",
    "3sd 10%",
    "drift 0-3sd",
    "x10 step",
    "x100 step",
    "x1e6 step",
    "10sd step",
    "100sd step",
    "3sd all, absurd night",
)
STEP_FACTORS = (10.0, 100.0, 1e6)
STEP_SIGMAS = (10.0, 100.0)
ABSURD = 1e300  # the value of every step of the absurd night in a window
# The variants judged against a window with an absurd night: the clean night and `3sd all`.
ABSURD_ROWS = (0, 3)
Array = np.ndarray


# ------------------------------------------------------------------------------------------ families


@dataclass(frozen=True)
class Family:
    name: str
    noise: str  # in words, for the table
    sample: Callable[[np.random.Generator, int, int], Array]  # (rng, nights, steps) -> nights x steps
    harmful: Direction
    band: dict[str, float]  # the rel/abs literal the old base.yaml shipped for this kind of metric
    trials: int | None = None
    metrics: tuple[str, ...] = ()  # the shipped defaults this family stands for
    sigma_from: Callable[[np.random.Generator, int, int], Array] | None = None  # default: `sample`


def _curve(m: int, start: float, end: float) -> Array:
    return start + (end - start) * np.linspace(0.0, 1.0, m)


def gaussian(rng: np.random.Generator, nights: int, m: int) -> Array:
    return _curve(m, 2.0, 1.0) + 0.1 * rng.standard_normal((nights, m))


def heavy(rng: np.random.Generator, nights: int, m: int) -> Array:
    return _curve(m, 2.0, 1.0) + 0.1 * rng.standard_t(3, (nights, m))


def lognormal(rng: np.random.Generator, nights: int, m: int) -> Array:
    """A KL: median 0.002 rising to 0.004, a shared shift per night (10% CV), 50% per-step CV."""
    shift = 0.1 * rng.standard_normal((nights, 1))
    return _curve(m, 0.002, 0.004) * np.exp(shift + 0.5 * rng.standard_normal((nights, m)))


def bernoulli(rng: np.random.Generator, nights: int, m: int) -> Array:
    """A reward: the mean of 16 rollouts, each a fair coin."""
    return rng.binomial(16, 0.5, (nights, m)) / 16.0


def spiky(rng: np.random.Generator, nights: int, m: int, spike: float = 0.005) -> Array:
    """A grad norm: decaying 1.0 -> 0.5, 5% per-night and 15% per-step CV, and a spike of 3-10x at 0.5%
    of the steps."""
    base = 0.5 + 0.5 * np.exp(-5.0 * np.linspace(0.0, 1.0, m))
    shift = 0.05 * rng.standard_normal((nights, 1))
    values = base * np.exp(shift + 0.15 * rng.standard_normal((nights, m)))
    spikes = rng.random((nights, m)) < spike
    return np.where(spikes, values * rng.uniform(3.0, 10.0, (nights, m)), values)


def spike_free(rng: np.random.Generator, nights: int, m: int) -> Array:
    """The spiky family without its spikes: the sigma a regression is measured in (spikes would inflate
    the standard deviation several times and make every shift look large)."""
    return spiky(rng, nights, m, spike=0.0)


def ar1_noise(rng: np.random.Generator, nights: int, m: int, rho: float = 0.9) -> Array:
    """AR(1) noise across neighbouring steps (nights x steps), unit marginal variance."""
    noise = rng.standard_normal((nights, m))
    out = np.empty_like(noise)
    out[:, 0] = noise[:, 0]
    for s in range(1, m):
        out[:, s] = rho * out[:, s - 1] + math.sqrt(1 - rho * rho) * noise[:, s]
    return out


def ar1(rng: np.random.Generator, nights: int, m: int) -> Array:
    """Noise correlated across neighbouring steps, x 0.1, around the falling curve of the other families."""
    return _curve(m, 2.0, 1.0) + 0.1 * ar1_noise(rng, nights, m)


def ar1_flat(rng: np.random.Generator, nights: int, m: int) -> Array:
    """The same noise around a plateau: a rule whose width is a fraction of the reference is then equally
    strict at every step, where around the falling curve it is twice as strict on the last steps (which
    favours it on a drift, largest there)."""
    return 1.5 + 0.1 * ar1_noise(rng, nights, m)


def rare(rng: np.random.Generator, nights: int, m: int) -> Array:
    """A rare-event rate: the share of 200 sessions that mismatch, p = 0.02."""
    return rng.binomial(200, 0.02, (nights, m)) / 200.0


GRAD_BAND = {"rel_up": 0.5, "abs_floor_up": 0.1, "rel_down": 0.8, "abs_floor_down": 0.1}
KL_BAND = {"rel_up": 0.5, "abs_floor_up": 0.02, "rel_down": 0.8, "abs_floor_down": 0.02}
FAMILIES = (
    Family("gaussian", "N(0, 0.1) around a curve 2 -> 1", gaussian, "up", GRAD_BAND),
    Family("t3", "0.1 x t(3) around a curve 2 -> 1", heavy, "up", GRAD_BAND),
    Family(
        "lognormal",
        "KL-like: median 0.002->0.004, 10% per-night shift, 50% per-step CV",
        lognormal,
        "up",
        KL_BAND,
        metrics=("train/ppo_kl", "train/train_rollout_logprob_abs_diff", "train/train_rollout_kl"),
    ),
    Family(
        "bernoulli",
        "mean of 16 fair coins per step",
        bernoulli,
        "down",
        {"rel_down": 0.2, "abs_floor_down": 0.05},
        trials=16,
        metrics=("rollout/raw_reward",),
    ),
    Family(
        "spiky",
        "grad-norm-like lognormal (5%/15% CV), 0.5% of steps spike 3-10x",
        spiky,
        "up",
        GRAD_BAND,
        metrics=("train/grad_norm",),
        sigma_from=spike_free,
    ),
    Family("ar1", "AR(1) rho 0.9 across steps, sd 0.1", ar1, "up", GRAD_BAND),
    Family(
        "rare",
        "rate of 200 sessions, p = 0.02",
        rare,
        "up",
        {"rel_up": 1.0, "abs_floor_up": 0.1, "rel_down": 1.0},
        trials=200,
        metrics=(
            "rollout/tito_session_mismatch_rate/v1/assistant_text",
            "rollout/tito_session_mismatch_rate/v2/assistant_text",
        ),
    ),
    Family(
        "ar1-flat", "AR(1) rho 0.9 across steps, sd 0.1, around a plateau of 1.5", ar1_flat, "up", GRAD_BAND
    ),
)


# --------------------------------------------------------------------------------------------- rules
# Each takes the window (steps x nights, newest first) and the night's variants (variants x steps) and
# returns one score per variant: the variant fails when its score exceeds 1.


def band_rule(family: Family) -> Callable[[Array, Array], Array]:
    c = family.band

    def score(window: Array, values: Array) -> Array:
        ref = window.mean(axis=1)
        out = np.full(len(values), -np.inf)
        for side, sign in (("up", 1.0), ("down", -1.0)):
            rel, floor = c.get(f"rel_{side}"), c.get(f"abs_floor_{side}")
            if rel is None and floor is None:
                continue
            width = np.maximum(np.abs(ref) * (rel or 0.0), floor or 0.0)
            out = np.maximum(out, (sign * (values - ref) / np.maximum(width, 1e-300)).max(axis=1))
        return out

    return score


def budget_rule(family: Family, alpha: float = 0.01) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        try:
            null = Null.of(window, direction=family.harmful, alpha=alpha, trials=family.trials)
        except UnusableWindowError:  # evaluate makes the gate `error`: the CI job goes red, as on a fail
            return np.full(len(values), np.inf)
        return np.array([null.judge(v).severity for v in values])

    return score


def _harmful(family: Family, values: Array, centre: Array) -> Array:
    return values - centre if family.harmful == "up" else centre - values


def _z(window: Array) -> tuple[Array, Array]:
    return window.mean(axis=1), np.maximum(window.std(axis=1, ddof=1), 1e-12)


@cache
def _t_boundary(nights: int) -> float:
    return float(stdtrit(nights - 1, 0.99))


def bencher(family: Family) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        mean, sd = _z(window)
        return (_harmful(family, values, mean) / sd / _t_boundary(window.shape[1])).max(axis=1)

    return score


def conbench(family: Family) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        mean, sd = _z(window)
        return (_harmful(family, values, mean) / sd / 5.0).max(axis=1)

    return score


def megatron(family: Family) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        golden = window.mean(axis=1)
        ratio = np.abs(values - golden) / np.maximum(0.05 * np.abs(golden), 1e-12)
        m = values.shape[1]
        forgiven = min(max(m // 100, 1), 50)
        # The (forgiven + 1)-th largest ratio: above 1 when more than `forgiven` steps are out.
        return -np.sort(-ratio, axis=1)[:, min(forgiven, m - 1)] if m > 1 else ratio[:, 0]

    return score


def skyrl(family: Family) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        window = window[:, :SKYRL_RUNS]  # the last 20 runs, whatever the window
        if family.harmful == "up":
            edge = window.max(axis=1)
            return ((values - edge) / np.maximum(0.05 * np.abs(edge), 1e-12)).max(axis=1)
        edge = window.min(axis=1)
        return ((edge - values) / np.maximum(0.05 * np.abs(edge), 1e-12)).max(axis=1)

    return score


def elementary(family: Family) -> Callable[[Array, Array], Array]:
    def score(window: Array, values: Array) -> Array:
        mean, sd = _z(window)
        moved = _harmful(family, values, mean)
        both = np.minimum(moved / sd / 3.0, moved / np.maximum(0.10 * np.abs(mean), 1e-12))
        return both.max(axis=1)

    return score


def shipped(gate: ResolvedGate, policy: Policy) -> Callable[[Array, Array], Array]:
    """A default of gates/base.yaml as a one-liner inherits it: its rule, direction, `trials` and
    `false_alarm`, on the last step alone for `steps: last`."""
    assert gate.constraint is not None
    direction = gate.constraint.budget
    if direction is None:
        raise SystemExit(f"{gate.metric}: the shipped default is not a budget rule; extend this benchmark")
    checked = [0]

    def score(window: Array, values: Array) -> Array:
        try:
            null = Null.of(window, direction=direction, alpha=gate.false_alarm, trials=gate.trials)
        except UnusableWindowError:  # the gate errs: red, as a failure
            return np.full(len(values), np.inf)
        found = np.array([null.judge(v).severity for v in values])
        if checked[0] < CHECKED_NIGHTS:  # the arithmetic here is evaluate's: check it on the clean night
            checked[0] += 1
            steps = list(range(window.shape[0]))
            selection = Selection(steps, steps, values[0].tolist(), [None] * len(steps), [None] * len(steps))
            [result] = evaluate(
                [(gate, "c", selection)], Baselines({"c": Window.from_runs(steps, window.T.copy())}), policy
            )
            assert (result.status == "fail") == (found[0] > 1.0), (gate.metric, result.status, found[0])
        return found

    return score


def shipped_gates() -> tuple[dict[str, ResolvedGate], Policy]:
    """Every default of the real gates/base.yaml, resolved as a one-liner inherits it."""
    metrics = [f for family in FAMILIES for f in family.metrics]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copy(REPO / "gates" / "base.yaml", root / "base.yaml")
        lines = "".join(f"  {metric}:\n" for metric in metrics)
        lines += "  perf/actor_train_mfu:\n    steps: last\n    constraint: null\n"  # the base file's rule
        (root / "q.yaml").write_text(f"test: gate_quality\ngates:\n{lines}", encoding="utf-8")
        test = load_tree(root).test("gate_quality")
    return {g.metric: g for g in test.gates}, test.policy


RULES: dict[str, Callable[[Family], Callable[[Array, Array], Array]]] = {
    "budget (gatecfg)": budget_rule,
    "band (gatecfg)": band_rule,
    "bencher-t": bencher,
    "conbench-z5": conbench,
    "megatron-golden": megatron,
    "skyrl-minmax": skyrl,
    "elementary-z+pct": elementary,
}


# ---------------------------------------------------------------------------------------- simulation


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def variants(family: Family, clean: Array, sigma: Array, rng: np.random.Generator) -> Array:
    """The clean night, then one copy per regression in REGRESSIONS."""
    m = len(clean)
    sign = 1.0 if family.harmful == "up" else -1.0
    width = max(1, math.ceil(0.1 * m))
    start = int(rng.integers(0, m - width + 1))
    block = np.zeros(m)
    block[start : start + width] = 1.0
    ramp = np.linspace(0.0, 1.0, m) if m > 1 else np.ones(1)
    rows = [clean]
    rows += [clean + sign * k * sigma for k in (1, 2, 3)]
    rows += [clean + sign * k * sigma * block for k in (1, 2, 3)]
    rows.append(clean + sign * 3.0 * sigma * ramp)
    step = int(rng.integers(0, m))
    for factor in STEP_FACTORS:
        row = clean.copy()
        row[step] *= factor if family.harmful == "up" else 1.0 / factor
        rows.append(row)
    for k in STEP_SIGMAS:
        row = clean.copy()
        row[step] += sign * k * sigma[step]
        rows.append(row)
    rows.append(clean + sign * 3.0 * sigma)  # judged against the window with an absurd night
    return np.array(rows)


def absurd(window: Array, rng: np.random.Generator) -> Array:
    """The window (steps x nights) with one of its nights at ABSURD on every step."""
    broken = window.copy()
    broken[:, int(rng.integers(0, window.shape[1]))] = ABSURD
    return broken


def simulate(
    family_name: str,
    m: int,
    nights: int,
    seed: int,
    only: tuple[str, ...] = (),
    *,
    window_nights: int = WINDOW,
) -> dict[str, object]:
    family = next(f for f in FAMILIES if f.name == family_name)
    rng = np.random.default_rng([seed, m, FAMILIES.index(family)])
    sigma = (family.sigma_from or family.sample)(rng, SIGMA_NIGHTS, m).std(axis=0, ddof=1)
    stream = family.sample(rng, nights + window_nights, m)
    rules = {name: make(family) for name, make in RULES.items() if not only or name in only}
    gates, policy = shipped_gates()
    # A `steps: last` default judges one value, the run's last: it is simulated once, in the first cell.
    last = {f"shipped {g}" for g in family.metrics if gates[g].steps == "last"}
    # The shipped defaults judge against base.yaml's own window: only with the benchmark's default one.
    for metric in family.metrics if window_nights == policy.window else ():
        if (gates[metric].steps != "last" or m == STEP_COUNTS[0]) and (not only or "shipped" in only):
            rules[f"shipped {metric}"] = shipped(gates[metric], policy)
    scores = {name: np.empty((nights, len(REGRESSIONS) + 1)) for name in rules}
    absurd_clean = {name: np.empty(nights) for name in rules}  # the clean night against the absurd window
    last_row = len(REGRESSIONS)  # `3sd all, absurd night`: judged against the absurd window
    seconds = dict.fromkeys(rules, 0.0)
    for i in range(nights):
        window = np.ascontiguousarray(stream[i : i + window_nights][::-1].T)
        night = variants(family, stream[i + window_nights], sigma, rng)
        one = variants(family, stream[i + window_nights, -1:], sigma[-1:], rng)
        broken = absurd(window, rng)
        for name, rule in rules.items():
            started = time.perf_counter()
            with np.errstate(all="ignore"):  # the peers' means and deviations of an absurd night overflow
                if name in last:
                    found = rule(window[-1:], one[:last_row])
                    clean_absurd, absurd_shift = rule(broken[-1:], one[list(ABSURD_ROWS)])
                else:
                    found = rule(window, night[:last_row])
                    clean_absurd, absurd_shift = rule(broken, night[list(ABSURD_ROWS)])
            scores[name][i] = np.append(found, absurd_shift)
            absurd_clean[name][i] = clean_absurd
            seconds[name] += time.perf_counter() - started
    result: dict[str, object] = {"family": family.name, "steps": m, "nights": nights}
    rows = {}
    for name, found in scores.items():
        label = f"{name} (steps: last, 1 step)" if name in last else name
        clean = found[:, 0]
        matched = float(np.quantile(clean, 1.0 - MATCHED, method="higher"))
        fa = int((clean > 1.0).sum())
        fa_absurd = int((absurd_clean[name] > 1.0).sum())
        rows[label] = {
            "false_alarm": fa / nights,
            "false_alarm_ci": wilson(fa, nights),
            "false_alarm_absurd": fa_absurd / nights,
            "detect": {r: float((found[:, k + 1] > 1.0).mean()) for k, r in enumerate(REGRESSIONS)},
            "detect_ci": {
                r: wilson(int((found[:, k + 1] > 1.0).sum()), nights) for k, r in enumerate(REGRESSIONS)
            },
            "matched_false_alarm": float((clean > matched).mean()),
            "matched_detect": {
                r: float((found[:, k + 1] > matched).mean()) for k, r in enumerate(REGRESSIONS)
            },
            # per window: the rule's setup from the window and the night's variants judged against it, twice
            # (the window as it is, and with an absurd night)
            "ms_per_window": seconds[name] / nights * 1000.0,
        }
    result["rules"] = rows
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=2000, help="clean nights per cell at 20 and 100 steps")
    parser.add_argument("--nights-1000", type=int, default=600, help="clean nights per cell at 1,000 steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--families", default=",".join(f.name for f in FAMILIES))
    parser.add_argument(
        "--steps", default=",".join(map(str, STEP_COUNTS)), help="step counts, comma-separated"
    )
    parser.add_argument(
        "--rules",
        default="",
        help="only these rules, comma-separated (names as in the table; `shipped` for the shipped defaults)",
    )
    parser.add_argument(
        "--window", type=int, default=WINDOW, help="nights in every baseline (the shipped policy.window: 60)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.window < MIN_NIGHTS:
        parser.error(f"--window: at least {MIN_NIGHTS} nights (fewer leave the budget rule cold)")
    only = tuple(r for r in args.rules.split(",") if r)
    cells = [
        (name, m, args.nights_1000 if m >= 1000 else args.nights, args.seed, only)
        for name in args.families.split(",")
        for m in map(int, args.steps.split(","))
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(partial(simulate, window_nights=args.window), *zip(*cells, strict=True)))
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps({"window": args.window, "matched": MATCHED, "cells": results}, indent=1))
        return 0
    print(_table(results, args, elapsed))
    return 0


OURS = "budget (gatecfg)"


def _versus_peers(results: list[dict[str, object]]) -> list[str]:
    """The budget rule against the best other rule of each cell (family, steps, regression) at the matched
    1% rate, and against the best of the peers' rules alone (gatecfg's old band aside): a win, a tie
    (equal to the table's 0.1), or a loss; and the losses larger than sampling noise (the two detection
    rates' 95% normal interval of their difference excludes 0)."""
    return [
        _versus(results, "other rule", lambda name: name != OURS),
        _versus(results, "peer rule", lambda name: name not in {OURS, "band (gatecfg)"}),
    ]


def _versus(results: list[dict[str, object]], what: str, counts: Callable[[str], bool]) -> str:
    won = tied = lost = 0
    beyond: list[str] = []
    for cell in results:
        rules = cell["rules"]
        assert isinstance(rules, dict)
        peers = {name: row for name, row in rules.items() if name in RULES and counts(name)}
        if OURS not in rules or not peers:
            continue
        nights = int(str(cell["nights"]))
        for regression in REGRESSIONS:
            ours = round(100 * rules[OURS]["matched_detect"][regression], 1)
            best, row = max(((round(100 * r["matched_detect"][regression], 1), n) for n, r in peers.items()))
            if ours > best:
                won += 1
            elif ours == best:
                tied += 1
            else:
                lost += 1
                a, b = ours / 100, best / 100
                noise = 1.96 * math.sqrt((a * (1 - a) + b * (1 - b)) / nights)
                if b - a > noise:
                    beyond.append(
                        f"{cell['family']} {cell['steps']} steps {regression}: {ours} vs {row} {best}"
                    )
    return (
        f"Budget rule against the best {what} per cell at a matched 1%: {won} won, {tied} tied, "
        f"{lost} lost; lost beyond sampling noise: {len(beyond)}"
        + (f" ({'; '.join(beyond)})" if beyond else "")
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _table(results: list[dict[str, object]], args: argparse.Namespace, elapsed: float) -> str:
    lines = [
        f"gate quality: window {args.window}, {args.nights} clean nights per cell at 20/100 steps, "
        f"{args.nights_1000} at 1,000 steps (each also judged with every regression injected), seed "
        f"{args.seed}; {elapsed:.0f} s",
        "",
        "False alarms per night at each rule's default (95% Wilson interval), detection at the default, "
        "and detection at a matched 1% false-alarm rate (`@1%`). Detection in %.",
        "",
        "| family | steps | rule | false alarms % [CI] | false alarms, absurd night | "
        + " | ".join(REGRESSIONS)
        + " | @1%: "
        + " | ".join(REGRESSIONS)
        + " | ms/window |",
        "|---" * (6 + 2 * len(REGRESSIONS)) + "|",
    ]
    for cell in results:
        rules = cell["rules"]
        assert isinstance(rules, dict)
        for name, row in rules.items():
            lo, hi = row["false_alarm_ci"]
            lines.append(
                f"| {cell['family']} | {cell['steps']} | {name} | {_pct(row['false_alarm'])} "
                f"[{_pct(lo)}, {_pct(hi)}] | {_pct(row['false_alarm_absurd'])} | "
                + " | ".join(_pct(row["detect"][r]) for r in REGRESSIONS)
                + " | "
                + " | ".join(_pct(row["matched_detect"][r]) for r in REGRESSIONS)
                + f" | {row['ms_per_window']:.2f} |"
            )
    for line in _versus_peers(results):
        lines += ["", line]
    lines += ["", "Noise families:", ""]
    lines += [f"* `{f.name}`: {f.noise}; harmful direction {f.harmful}" for f in FAMILIES]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
