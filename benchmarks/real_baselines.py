"""Baselines on real histories: the nightly replay of real CI benchmark timings (issue 24).

    python benchmarks/real_baselines.py [--series /work/shared/real/django-asv/series.csv.gz]
        [--injections 40] [--seed 0] [--limit N] [--window N] [--megatron /work/shared/real/megatron-goldens
        [--megatron-only]] [--json]

Each (benchmark, environment) series of the asv CSV (`benchmark`, `env`, `date_ms`, `commit`, `seconds`;
lower is better, so `up` is harmful) is replayed night by night in commit-date order, as `gatecfg
evaluate --write` would have judged it: one gate, `steps: last`, `constraint: {budget: up}`, under the
policy of the project's own gates/base.yaml (window, min_history, false_alarm, the baseline policy),
resolved by `load_tree` as a one-liner inherits it. Each night is judged by `gatecfg.verdicts.evaluate`
(the function `run_evaluation` calls) on a `Window` holding what the store's baseline query returns
for that night: the newest `window` runs before it that the baseline policy admits. What the policy admits
is decided the way the store decides it (store/reads.qualifies, store/follow.py): the gate's own trust of
each night, a failure rejoining once the gate passes again, and a shift that `gatecfg.shifts.find_shift`
confirms and accepts after `policy.accept_shift_after` nightlies starting the baseline at its first run (a
replay through a real store would give the same windows at some 30 ms a night: 40 minutes for these
files; tests/test_living_baselines.py checks the store's side).

Two replays of the same rule:

* `default`: the shipped policy (`policy.baseline` of base.yaml: only trusted runs form baselines);
* `every night`: the same rule with every night in its window (`baseline: nightly`), no trust filtering.

Alerts per 1,000 nights count every judged night but the first WARM (20) of a series, the warm-up; there
is no ground truth, so some alerts are real regressions, for every rule alike. The nights judged do not
depend on the policy under test: a rule with a longer window judges the first nights on what the store
holds by then, as it would in a store that has just started. (The warm-up was the policy's window while
that was 20; tied to today's `window: 60` it would judge from night 60 and inject from night 120, other
nights: docs/calibration.md gives the figures both ways.)

Detection: from a random night t0 of a series on (at least 2 * WARM nights in, 3 nights before its end),
every value is multiplied by x1.25 (x1.10); a rule catches it when it alerts on t0, t0 + 1 or t0 + 2.
`--injections` nights per series and factor, drawn with `--seed`. Each rule's state (its window, and for
gatecfg what its baseline policy let in) is that of the clean replay up to t0.

The peers' rules, re-implemented here for comparison only, each judging a night against the nights before
it (every night: none of them filters its history by its own alerts):

* `bencher-t`: Bencher's Student's t-test threshold with `--threshold-upper-boundary 0.99`: an alert when
  the value is above mean + t(0.99, n - 1) * sd of the sample (https://bencher.dev/docs/explanation/
  thresholds/: "a Student's t-test ... upper boundary of 0.99"), the sample the window of 20 nights;
* `conbench-z5`: Conbench's lookback z-score, an alert at z > 5 (its default threshold; the "lookback
  z-score method" page of the conbench docs) against the mean and sd of its lookback distribution, the
  last 100 nights (its default number of distribution commits);
* `elementary-z3`: Elementary's anomaly tests, an alert at z > 3 (`anomaly_sensitivity` default 3,
  docs.elementary-data.com/data-tests/anomaly-detection-configuration/anomaly-sensitivity) over its
  `training_period` default of 14 days: the last 14 nights;
* `asv-1.1-prev` / `asv-1.1-best`: airspeed velocity's ratio rule, `asv continuous --factor` default 1.1:
  an alert when the value is more than 1.1 times the previous night (`prev`) or the best (lowest) of the
  last 20 nights (`best`);
* `gab-2.0-prev`: github-action-benchmark's `alert-threshold` default "200%": an alert when the value is
  more than 2.0 times the previous night's (its README and action.yml).

Each rule gives each night a score that exceeds 1 exactly when the rule alerts at its default. At a matched
alert rate, each rule's threshold is the score its clean nights exceed as often as gatecfg's default policy
alerts, and detection is counted against that threshold.

With `--megatron DIR` it also prints what each rule flags on the real Megatron-LM golden values
(`versions.jsonl.gz`; `--megatron-only` skips the asv replay: seconds instead of minutes): every version
of a file judged, per metric, against the versions before it (up to the window, at least MIN_NIGHTS), all
steps (`steps: all`), a version flagged when any step is; once over all versions and once over the
versions whose commit subject bumps the container or the toolchain (BUMP). There is no clean night there:
every version is a deliberate refresh. The rules:

* `gatecfg budget`: `{budget: DIRECTION}` under base.yaml, as the replay above;
* `gatecfg budget + min_change`: `{budget: DIRECTION, min_change: MIN}` in a real gate file under the same
  base.yaml (the YAML spelling parsed by the loader, not a MinChange built here);
* `min_change alone`: a step beyond MIN from its window median in a harmful direction, no noise model:
  what the minimum would flag by itself;
* the six peers above, and the three z / t peers given the same minimum (`+ min_change`: tonight moved
  toward the window mean by MIN x |mean| before its z is taken, as the budget rule moves it toward its
  median); the ratio peers already carry one (asv's 10%, github-action-benchmark's 100%).

The minimum per metric (MEGATRON_METRICS) is chosen as docs/calibration.md tells a user to choose it, by
what change of that kind of metric matters, before looking at what it flags; relative, since the 50 tests'
models differ in size by orders of magnitude and an absolute figure fits one model only:

* memory (`mem-allocated-bytes`, `mem-max-allocated-bytes`, `up`, 1%): deterministic; the recipe
  docs/calibration.md and base.yaml give for a constant metric: less than 1% more memory does not decide
  whether a job fits;
* `lm loss` (`up`, 1%): a loss curve under a fixed seed on a fixed stack is deterministic too (the docs
  name it); 1% of the loss (0.02 nats at a loss of 2, 0.1 at 10) is a fifth of the 5% tolerance that
  Megatron-LM's own golden-value check allows (its tests/functional_tests/python_test_utils/
  test_pretraining_regular_pipeline.py), and a curve that moved less is not a different training run;
* `iteration-time` (`up`, 5%): noisy, and the rule measures its noise; the minimum says that a slowdown
  under 5% is not worth a nightly alarm (the docs' example, and Megatron-LM's own 5% for it);
* `num-zeros` (`both`, 5%): a count of zero gradient elements, deterministic under a fixed seed, that any
  change of numerics moves (more zeros: underflow, dead units; fewer: the numerics changed); 5%, Megatron-LM's
  tolerance for it, since the docs' absolute 200 fits one model's gradient size only.

`num-zeros` and `mem-max-allocated-bytes` are judged where the versions hold them (the development file
has neither). A version where `gatecfg.verdicts.evaluate` raises is counted apart (`err`), not judged.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import stdtrit

from gatecfg.budget import MIN_NIGHTS
from gatecfg.following import change
from gatecfg.resolve import Policy, ResolvedGate, load_tree
from gatecfg.select import LAST_STEP, Selection
from gatecfg.shifts import Recent, find_shift
from gatecfg.verdicts import GateVerdicts, evaluate
from gatecfg.windows import Baselines, Window

REPO = Path(__file__).resolve().parents[1]
SERIES = Path("/work/shared/real/django-asv/series.csv.gz")
METRIC = "asv/seconds"
FACTORS = (1.25, 1.10)
CAUGHT_WITHIN = 3  # nights
T0 = datetime(2020, 1, 1, tzinfo=UTC)
KEPT_NIGHTS = 200
WARM = 20  # nights of a series before alerts count; injections start at twice it (see the docstring)
Array = np.ndarray


@dataclass(frozen=True)
class Series:
    name: str
    commits: tuple[str, ...]
    values: Array  # seconds, oldest first


def load_series(path: Path) -> list[Series]:
    rows: dict[str, list[tuple[int, str, float]]] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            key = f"{row['benchmark']} [{row['env']}]"
            rows.setdefault(key, []).append((int(row["date_ms"]), row["commit"], float(row["seconds"])))
    found = []
    for name, nights in sorted(rows.items()):
        nights.sort()
        found.append(Series(name, tuple(c for _, c, _ in nights), np.array([v for *_, v in nights])))
    return found


def shipped_gate(
    steps: str = "last", direction: str = "up", min_change: str | None = None
) -> tuple[ResolvedGate, Policy]:
    """A one-liner under the real gates/base.yaml: its policy, and the budget rule in `direction` (with
    `min_change: MIN_CHANGE` as a gate file spells it, when given)."""
    constraint = f"budget: {direction}" + ("" if min_change is None else f", min_change: {min_change}")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copy(REPO / "gates" / "base.yaml", root / "base.yaml")
        (root / "t.yaml").write_text(
            f"test: real_baselines\ngates:\n  {METRIC}:\n    steps: {steps}\n"
            f"    constraint: {{{constraint}}}\n"
            # The base file's rule asks every gated test for MFU beside it.
            "  perf/actor_train_mfu:\n    steps: last\n    constraint: null\n",
            encoding="utf-8",
        )
        test = load_tree(root).test("real_baselines")
    [gate] = [g for g in test.gates if g.metric == METRIC]
    assert min_change is None or (gate.constraint is not None and gate.constraint.min_change is not None)
    return gate, test.policy


# ------------------------------------------------------------------------------------- gatecfg replay


@dataclass
class Night:
    """One stored run of the replayed gate, as the store keeps it (store/follow.py)."""

    run_id: str
    created_at: datetime
    value: float
    change: float | None  # mean relative change against the baseline it was judged by
    failed: bool  # the gate's own verdict when written
    rejoined: bool = False  # a failed value that later joined the baseline (recovered, or an accepted shift)
    floor: bool = False  # older than the first run of an accepted shift: out of the baseline

    @property
    def in_baseline(self) -> bool:
        return (not self.failed or self.rejoined) and not self.floor


def judge_night(gate: ResolvedGate, policy: Policy, window: Sequence[float], value: float) -> GateVerdicts:
    """One night judged exactly as `run_evaluation` judges it: `evaluate` on the window the store returns."""
    newest_first = list(reversed(window))
    baselines = Baselines({"c": w} if (w := Window.from_lists({LAST_STEP: newest_first})) else {})
    selection = Selection([LAST_STEP], [0], [value], [None], [None])
    [result] = evaluate([(gate, "c", selection)], baselines, policy)
    return result


class GatecfgReplay:
    """gatecfg's rule, night by night, with the store's baseline policy: `nightly` admits every run;
    `trusted` admits what the gate did not fail, and (policy.accept_shift_after not `never`) follows its
    metric as evaluate does (gatecfg/following.py): a failure rejoins the baseline when the gate passes on a
    later nightly, and a confirmed shift (gatecfg.shifts.find_shift) held `accept_shift_after` nightlies
    becomes the baseline."""

    def __init__(self, gate: ResolvedGate, policy: Policy, baseline: str) -> None:
        self.gate, self.policy, self.baseline = gate, policy, baseline

    def night(self, nights: list[Night], value: float) -> bool:
        """Judge tonight's value against the stored nights, store it; whether the gate failed."""
        admitted = [n.value for n in nights if self.baseline == "nightly" or n.in_baseline]
        result = judge_night(self.gate, self.policy, admitted[-self.policy.window :], value)
        failed = result.status == "fail"
        now = T0 + timedelta(days=len(nights))
        tonight = Night(f"r{len(nights)}", now, value, change(result), failed)
        following = self.baseline == "trusted" and self.policy.accept_shift_after is not None
        if following and not failed:
            for n in reversed(nights):  # the failures since the last night that passed
                if not n.failed or n.rejoined:
                    break
                n.rejoined = True
        if following and failed:
            depth = self.policy.window + max(self.policy.accept_shift_after or 0, self.policy.stale_after)
            recent = [
                Recent(
                    n.run_id, None, n.created_at, n.in_baseline, n.failed and not n.rejoined, None, n.change
                )
                for n in reversed(nights[-depth:])
            ]
            shift = find_shift(
                metric=METRIC,
                coordinate="c",
                tonight=(tonight.run_id, None, now, tonight.change),
                recent=recent,
                accept_after=self.policy.accept_shift_after,
                alpha=self.gate.false_alarm,
            )
            if shift is not None and shift.accepted:
                members = set(shift.runs)
                tonight.rejoined = True
                for n in nights:
                    n.rejoined = n.rejoined or n.run_id in members
                    n.floor = n.floor or n.created_at < shift.first_created_at
        nights.append(tonight)
        # Only the newest nights can reach a window (the store walks them newest first): far more than a
        # window of trusted ones and the longest streak of failures that are followed.
        del nights[: -max(KEPT_NIGHTS, 3 * self.policy.window)]
        return failed

    def replay(self, values: Array, keep: Collection[int]) -> tuple[Array, dict[int, list[Night]]]:
        """Alerts per night, and the stored nights before each night of `keep` (the injections')."""
        nights: list[Night] = []
        alerts = np.zeros(len(values), bool)
        before: dict[int, list[Night]] = {}
        for t, value in enumerate(values.tolist()):
            if t in keep:
                before[t] = [dataclasses.replace(n) for n in nights]
            alerts[t] = self.night(nights, value)
        return alerts, before

    def caught(self, before: list[Night], injected: Sequence[float]) -> bool:
        nights = [dataclasses.replace(n) for n in before]
        return any(self.night(nights, v) for v in injected)  # every night judged: the state moves on


# ---------------------------------------------------------------------------------------- peers' rules


@dataclass(frozen=True)
class Peer:
    """A peer's rule for an `up`-harmful metric. `score(history, value)`: the nights before (oldest first;
    nights x steps for a curve) and tonight's value(s) -> the largest score over the steps (> 1: an alert
    at its default), NaN where the rule cannot judge. `flip` turns a `down`-harmful metric into an
    `up`-harmful one for this rule: negation for a z-score, the reciprocal for a ratio."""

    kind: str  # "z" (z over `limit`), "t" (Bencher's t boundary), "prev" / "best" (ratio over `limit`)
    limit: float
    width: int
    # A z or t rule given a budget gate's relative minimum change: tonight moved toward the window's mean
    # by min_rel x |mean| (no further) before its z is taken, as the budget rule moves it toward its median.
    min_rel: float = 0.0

    def score(self, history: Array, value: Array | float) -> float:
        w = history[-self.width :]
        value = np.asarray(value, np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.kind in ("z", "t"):
                if len(w) < 2:
                    return np.nan
                limit = float(stdtrit(len(w) - 1, self.limit)) if self.kind == "t" else self.limit
                mean = w.mean(axis=0)
                d = value - mean
                if self.min_rel:
                    d = np.sign(d) * np.maximum(np.abs(d) - self.min_rel * np.abs(mean), 0.0)
                z = d / np.maximum(w.std(axis=0, ddof=1), 1e-300)
                return float(np.max(z / limit))
            if len(w) == 0:
                return np.nan
            ref = w[-1] if self.kind == "prev" else w.min(axis=0)
            return float(np.max(value / ref / self.limit))

    def flip(self, values: Array) -> Array:
        with np.errstate(divide="ignore"):
            return -values if self.kind in ("z", "t") else 1.0 / values


PEERS: dict[str, Peer] = {
    "bencher-t": Peer("t", 0.99, 20),
    "conbench-z5": Peer("z", 5.0, 100),
    "elementary-z3": Peer("z", 3.0, 14),
    "asv-1.1-prev": Peer("prev", 1.1, 1),
    "asv-1.1-best": Peer("best", 1.1, 20),
    "gab-2.0-prev": Peer("prev", 2.0, 1),
}


# ----------------------------------------------------------------------------------------- the replay


@dataclass
class Tally:
    nights: int = 0
    alerts: int = 0

    def per_1000(self) -> float:
        return 1000.0 * self.alerts / max(self.nights, 1)


def injection_nights(rng: np.random.Generator, n: int, low: int, count: int) -> Array:
    high = n - CAUGHT_WITHIN
    if high <= low:
        return np.array([], np.int64)
    return rng.integers(low, high, size=count)


def run(series: Sequence[Series], injections: int, seed: int, window: int | None = None) -> dict[str, object]:
    """The replay under base.yaml's policy, or with its window replaced by `window` nights. Alerts are
    counted from night WARM on and injections start from twice it whatever the window is, so that every
    policy is judged on the same nights."""
    gate, policy = shipped_gate()
    warm = WARM
    if window is not None:
        policy = dataclasses.replace(policy, window=window)
    replays = {
        "gatecfg default": GatecfgReplay(gate, policy, policy.baseline),
        "gatecfg every night": GatecfgReplay(gate, policy, "nightly"),
    }
    tallies = {name: Tally() for name in [*replays, *PEERS]}
    caught = {(name, f): 0 for name in replays for f in FACTORS}
    tried = 0
    clean_scores: dict[str, list[Array]] = {name: [] for name in PEERS}
    # Per peer and factor: the minimum over the 3 nights after t0 of... the maximum score (caught at a
    # threshold c when that maximum exceeds c).
    injected_max: dict[tuple[str, float], list[float]] = {(p, f): [] for p in PEERS for f in FACTORS}
    rng = np.random.default_rng(seed)
    for s in series:
        starts = injection_nights(rng, len(s.values), 2 * warm, injections)
        tried += len(starts)
        for name, replay in replays.items():
            alerts, before = replay.replay(s.values, set(starts.tolist()))
            tallies[name].nights += len(s.values) - warm
            tallies[name].alerts += int(alerts[warm:].sum())
            for f in FACTORS:
                for t0 in starts.tolist():
                    injected = (s.values[t0 : t0 + CAUGHT_WITHIN] * f).tolist()
                    caught[(name, f)] += replay.caught(before[t0], injected)
        for name, rule in PEERS.items():
            scores = np.array([rule.score(s.values[:t], v) for t, v in enumerate(s.values.tolist())])
            judged = np.nan_to_num(scores[warm:], nan=-np.inf)
            tallies[name].nights += len(judged)
            tallies[name].alerts += int((judged > 1.0).sum())
            clean_scores[name].append(judged)
            for f in FACTORS:
                for t0 in starts.tolist():
                    moved = s.values.copy()
                    moved[t0:] *= f
                    # The rule's own history is injected too from t0 on: it keeps every night.
                    got = np.array([rule.score(moved[:t], moved[t]) for t in range(t0, t0 + CAUGHT_WITHIN)])
                    injected_max[(name, f)].append(
                        float(np.nanmax(got)) if np.isfinite(got).any() else -np.inf
                    )
    default_rate = tallies["gatecfg default"].alerts / max(tallies["gatecfg default"].nights, 1)
    rows: list[dict[str, object]] = []
    for name in replays:
        rows.append(
            {
                "rule": name,
                "alerts_per_1000": tallies[name].per_1000(),
                **{f"caught_x{f:.2f}": caught[(name, f)] / max(tried, 1) for f in FACTORS},
                **{f"matched_x{f:.2f}": None for f in FACTORS},
            }
        )
    for name in PEERS:
        pooled = np.concatenate(clean_scores[name])
        # The threshold its clean nights exceed as often as gatecfg's default policy alerts.
        matched = float(np.quantile(pooled, 1.0 - default_rate)) if len(pooled) else np.inf
        row: dict[str, object] = {"rule": name, "alerts_per_1000": tallies[name].per_1000()}
        for f in FACTORS:
            got = np.array(injected_max[(name, f)])
            row[f"caught_x{f:.2f}"] = float((got > 1.0).mean()) if len(got) else None
            row[f"matched_x{f:.2f}"] = float((got > matched).mean()) if len(got) else None
        rows.append(row)
    return {
        "series": len(series),
        "nights": int(sum(len(s.values) for s in series)),
        "injections": tried,
        "policy": {"window": policy.window, "baseline": policy.baseline, "false_alarm": gate.false_alarm},
        "default_vs_every_night": tallies["gatecfg default"].per_1000()
        / max(tallies["gatecfg every night"].per_1000(), 1e-12),
        "rows": rows,
    }


def _pct(x: object) -> str:
    return "-" if x is None else f"{100.0 * float(x):5.1f}%"  # type: ignore[arg-type]


def table(result: dict[str, object]) -> str:
    lines = [
        f"{result['series']} series, {result['nights']} nights, {result['injections']} injected nights per "
        f"factor; policy {result['policy']}",
        "",
        f"{'rule':<22} {'alerts/1000':>11} {'x1.25 <=3n':>11} {'x1.10 <=3n':>11} "
        f"{'x1.25 matched':>14} {'x1.10 matched':>14}",
    ]
    for row in result["rows"]:  # type: ignore[attr-defined]
        lines.append(
            f"{row['rule']:<22} {row['alerts_per_1000']:>11.1f} {_pct(row['caught_x1.25']):>11} "
            f"{_pct(row['caught_x1.10']):>11} {_pct(row['matched_x1.25']):>14} "
            f"{_pct(row['matched_x1.10']):>14}"
        )
    lines.append("")
    lines.append(
        f"default / every night alert ratio: {result['default_vs_every_night']:.2f} "
        "(target <= 1.25); default alerts/1000 target <= 15; x1.25 >= 80%, x1.10 >= 55%"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ megatron goldens

# A commit whose subject says it changes the container or the toolchain: a bump or an upgrade, the
# container or its base image, an NGC PyTorch (PyT) version, Transformer Engine by name or as TE<version>,
# and the refreshes "after" one that say so. A library named in a feature's subject (cuda_graph_scope,
# NCCL env vars, NeMo) is no bump.
BUMP = re.compile(
    r"\b(bump|upgrade|container|image|ngc|pyt(orch)?[ :]?\d|te ?\d+\.\d+|transformer[- ]engine)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Golden:
    """How a team would gate one golden metric: its harmful direction and its minimum change (the
    literal of `{budget: DIRECTION, min_change: LITERAL}`, as written in a gate file)."""

    direction: str
    min_change: str

    @property
    def rel(self) -> float:
        assert self.min_change.endswith("%")  # relative: the tests' models differ in size by 100x
        return float(self.min_change[:-1]) / 100.0


MEGATRON_METRICS = {
    "lm loss": Golden("up", "1%"),
    "num-zeros": Golden("both", "5%"),
    "iteration-time": Golden("up", "5%"),
    "mem-allocated-bytes": Golden("up", "1%"),
    "mem-max-allocated-bytes": Golden("up", "1%"),
}
BUDGET, BUDGET_MIN, MIN_ALONE = "gatecfg budget", "gatecfg budget + min_change", "min_change alone"
Z_PEERS = ("bencher-t", "conbench-z5", "elementary-z3")
MEGATRON_RULES = [BUDGET, BUDGET_MIN, MIN_ALONE, *PEERS, *(f"{p} + min_change" for p in Z_PEERS)]


def load_goldens(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each golden-values file's versions, oldest first."""
    versions: dict[str, list[dict[str, Any]]] = {}
    with gzip.open(folder / "versions.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            versions.setdefault(v["file"], []).append(v)
    for history in versions.values():
        history.sort(key=lambda v: int(v["time"]))
    return versions


def curve_of(version: dict[str, Any], metric: str) -> dict[int, float]:
    points = version["metrics"].get(metric) or []
    return {int(s): float(x) for s, x in points if x is not None and np.isfinite(float(x))}


def megatron(folder: Path) -> dict[str, Any]:
    """Per metric and rule: [flagged, judged] over all versions and over the bumps; and per metric what
    its versions look like (how many repeat the version before to the last digit, how far the rest
    moved)."""
    versions = load_goldens(folder)
    gates = {
        metric: (shipped_gate("all", g.direction), shipped_gate("all", g.direction, g.min_change))
        for metric, g in MEGATRON_METRICS.items()
    }
    counts: dict[str, dict[str, list[int]]] = {}
    profile: dict[str, dict[str, Any]] = {}
    bumps: set[str] = set()
    for history in versions.values():
        for metric, ((plain, policy), (with_min, _)) in gates.items():
            golden = MEGATRON_METRICS[metric]
            curves: list[dict[int, float]] = []
            for v in history:
                curve = curve_of(v, metric)
                if not curve:
                    continue
                bump = bool(BUMP.search(str(v["subject"])))
                # Every rule judges the versions the budget rule can (MIN_NIGHTS before them): one count.
                past = curves[-policy.window :]
                steps = sorted(set(curve).intersection(*past)) if len(past) >= MIN_NIGHTS else []
                if steps:
                    if bump:
                        bumps.add(f"{v['commit']} {v['subject']}")
                    matrix = np.array([[c[s] for s in steps] for c in past])  # versions x steps, oldest first
                    value = np.array([curve[s] for s in steps])
                    flags = _megatron_flags((plain, with_min), policy, golden, matrix, value)
                    for rule, flagged in flags.items():
                        # flagged, judged, flagged on a bump, bumps judged, errors, errors on a bump
                        c = counts.setdefault(metric, {}).setdefault(rule, [0, 0, 0, 0, 0, 0])
                        if flagged is None:
                            c[4] += 1
                            c[5] += bump
                            continue
                        c[0] += flagged
                        c[1] += 1
                        c[2] += flagged and bump
                        c[3] += bump
                    p = profile.setdefault(metric, {"files": set(), "same": [0, 0], "moved": [[], []]})
                    p["files"].add(v["file"])
                    with np.errstate(divide="ignore", invalid="ignore"):
                        moved = float(np.nanmax(np.abs(value / matrix[-1] - 1.0)))
                    for k in (0, 1) if bump else (0,):
                        if moved == 0.0:
                            p["same"][k] += 1
                        else:
                            p["moved"][k].append(moved)
                curves.append(curve)
    out: dict[str, Any] = {"bump_commits": sorted(bumps), "metrics": {}}
    for metric, per_rule in counts.items():
        p = profile[metric]
        out["metrics"][metric] = {
            "direction": MEGATRON_METRICS[metric].direction,
            "min_change": MEGATRON_METRICS[metric].min_change,
            "files": len(p["files"]),
            "same_as_previous": p["same"],  # [all versions, bumps]
            "median_moved": [float(np.median(m)) if m else None for m in p["moved"]],
            "rules": per_rule,
        }
    return out


def _megatron_flags(
    gates: tuple[ResolvedGate, ResolvedGate],
    policy: Policy,
    golden: Golden,
    matrix: Array,
    value: Array,
) -> dict[str, bool | None]:
    """Whether each rule flags this version (`value`, one per step) against the versions before it
    (`matrix`, versions x steps, oldest first), a version flagged when any step is."""
    steps = list(range(matrix.shape[1]))
    window = Window.from_runs(steps, np.ascontiguousarray(matrix[::-1]))
    selection = Selection(steps, steps, value.tolist(), [None] * len(steps), [None] * len(steps))
    plain, with_min = gates
    [a, b] = evaluate(
        [(plain, "c", selection), (with_min, "m", selection)],
        Baselines({"c": window, "m": window}),
        policy,
    )
    # A window the rule cannot judge is the gate's `error` (counted apart, as `err`), never a pass.
    flags: dict[str, bool | None] = {
        BUDGET: None if a.status == "error" else a.status == "fail",
        BUDGET_MIN: None if b.status == "error" else b.status == "fail",
    }
    flips = {"up": (False,), "down": (True,), "both": (False, True)}[golden.direction]
    median = np.median(matrix, axis=0)
    beyond = np.abs(value - median) > golden.rel * np.abs(median)
    harmful = np.zeros(len(value), bool)
    for flip in flips:
        harmful |= (value < median) if flip else (value > median)
    flags[MIN_ALONE] = bool((beyond & harmful).any())
    rules = {
        **PEERS,
        **{f"{p} + min_change": dataclasses.replace(PEERS[p], min_rel=golden.rel) for p in Z_PEERS},
    }
    for name, rule in rules.items():
        flags[name] = any(
            rule.score(rule.flip(matrix), rule.flip(value)) > 1.0 if flip else rule.score(matrix, value) > 1.0
            for flip in flips
        )
    return flags


def _cell(counts: Sequence[int]) -> str:
    a, b, c, d, e, f = counts
    return f"{a}/{b}; {c}/{d}" + (f" (err {e}; {f})" if e else "")


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.2g}%"


def megatron_table(result: dict[str, Any]) -> str:
    metrics: dict[str, dict[str, Any]] = result["metrics"]

    def row(label: str, cells: list[str]) -> str:
        return f"{label:<30}" + "".join(f" {c:>24}" for c in cells)

    per = metrics.values()
    lines = [
        "Megatron-LM goldens: versions flagged / judged (all versions; versions whose commit bumps the "
        f"container or toolchain: {len(result['bump_commits'])} commits)",
        "",
        row("rule", list(metrics)),
        row("(harmful direction, minimum)", [f"{x['direction']}, {x['min_change']}" for x in per]),
        *(row(rule, [_cell(x["rules"][rule]) for x in per]) for rule in MEGATRON_RULES),
        "",
        row("files", [str(x["files"]) for x in per]),
        row("same as the version before", ["{}; {}".format(*x["same_as_previous"]) for x in per]),
        row("median largest step change", ["; ".join(_share(m) for m in x["median_moved"]) for x in per]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--series", type=Path, default=SERIES)
    parser.add_argument("--injections", type=int, default=40, help="random injection nights per series")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="only the first N series (development)")
    parser.add_argument("--megatron", type=Path, default=None, help="a megatron-goldens folder")
    parser.add_argument(
        "--megatron-only",
        action="store_true",
        help="with --megatron: skip the asv replay (seconds, not minutes)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        help="nights in gatecfg's window instead of base.yaml's (the same nights judged and injected)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.megatron_only and args.megatron is None:
        parser.error("--megatron-only needs --megatron DIR")
    started = time.perf_counter()
    result: dict[str, Any] = {}
    if not args.megatron_only:
        result = run(load_series(args.series)[: args.limit], args.injections, args.seed, args.window)
        if not args.json:
            print(table(result))
    if args.megatron is not None:
        goldens = megatron(args.megatron)
        if args.json:
            result["megatron"] = goldens
        else:
            if not args.megatron_only:
                print()
            print(megatron_table(goldens))
    if args.json:
        print(json.dumps(result, indent=2))
    print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
