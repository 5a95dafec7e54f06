"""Verdicts for one run: pure, given the resolved gates, the selected values and the baselines."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, overload

import numpy as np

from gatecfg.band import (
    SIGMA_MIN_VALUES,
    Band,
    band,
    fmt,
    limits_breach,
    may_hold_absurd,
    min_values,
    near,
    ragged_bands,
    tidy,
    widths,
)
from gatecfg.budget import CLIP_Z, Decision, UnusableWindowError, decide
from gatecfg.models import Constraint, Direction, Reference
from gatecfg.resolve import Policy, ResolvedGate
from gatecfg.select import METRIC_MISSING, Selected, Selection, step_ranges
from gatecfg.store.rows import STATUSES, PointColumns
from gatecfg.tail import levelled
from gatecfg.windows import Baselines, Counts, Window
from gatecfg.wording import plural as counted

Status = Literal["pass", "fail", "tracked", "cold", "error", "missing"]
# Reports list the statuses a reader must act on first. `missing` is a gate's: steps its baseline holds
# that the run did not log (they have no verdict of their own).
STATUS_ORDER: Mapping[str, int] = {"error": 0, "missing": 1, "fail": 2, "cold": 3, "pass": 4, "tracked": 5}
# ref, lo and hi of every step (NaN: none).
Bands = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Verdict:
    gate: ResolvedGate
    coordinate: str
    step: int
    logged_step: int | None
    status: Status
    enforced: bool
    value: float | None
    band: Band
    reason: str
    # A failing step within its gate's `tolerate`: still `fail` and listed, but the gate passes.
    tolerated: bool = False

    @property
    def blocks_trust(self) -> bool:
        """A gated (enforced or shadow) coordinate that failed or errored makes the run untrusted."""
        return self.gate.gated and self.status in ("fail", "error") and not self.tolerated

    @property
    def fails_job(self) -> bool:
        return self.enforced and self.status in ("fail", "error") and not self.tolerated

    @property
    def delta_pct(self) -> float | None:
        ref = self.band.ref
        if self.value is None or ref is None or ref == 0:
            return None
        return (self.value - ref) / abs(ref) * 100.0


def judge(
    gate: ResolvedGate,
    coordinate: str,
    selected: Selected,
    history: Sequence[float],
    policy: Policy,
    *,
    enforce: bool,
    current: Band | None = None,
    ruled: tuple[Status, str] | None = None,
) -> Verdict:
    """One coordinate's verdict. `history` is the baseline window, newest first; `current` its band,
    when already computed; `ruled` the status and reason a rule over all the gate's steps (the budget
    rule) gave this step, which stands in for the band."""
    if current is None:
        current = band(gate.constraint, history, policy.reference)
    status, reason = _status(gate, selected, current, policy, ruled)
    return Verdict(
        gate=gate,
        coordinate=coordinate,
        step=selected.step,
        logged_step=selected.logged_step,
        status=status,
        enforced=enforce and gate.enforce and gate.gated,
        value=selected.value,
        band=current,
        reason=reason,
    )


def _status(
    gate: ResolvedGate, selected: Selected, current: Band, policy: Policy, ruled: tuple[Status, str] | None
) -> tuple[Status, str]:
    if selected.error is not None or selected.value is None:
        return "error", selected.error or "no value"
    value = selected.value
    versus = current.versus(value, policy.reference)
    if not gate.gated:
        return "tracked", f"tracked: {versus}" if current.n else f"tracked: {fmt(value)}, no history yet"
    breach = limits_breach(value, gate.limits)
    if breach is not None:
        return "fail", breach
    if gate.constraint is None:
        return "pass", f"{fmt(value)} within limits"
    needed = needed_history(gate, policy)
    if current.n < needed:
        missing = needed - current.n
        rule = "budget" if gate.constraint.budget is not None else "sigma"
        why = f"min_history={needed}" if needed == max(policy.min_history, 1) else f"{needed} ({rule})"
        return (
            "cold",
            f"cold: {current.n} of {why} {policy.baseline} values; gates after {missing} more nightl"
            f"{'ies' if missing != 1 else 'y'}",
        )
    if ruled is not None:
        return ruled
    if current.contains(value):
        return "pass", f"{versus}, within {current.span()}"
    return "fail", f"{versus}, {current.crossed(value)}"


def needed_history(gate: ResolvedGate, policy: Policy) -> int:
    """Baseline values a coordinate needs before its band gates: `min_history`; 2 for a sigma-only side."""
    return max(policy.min_history, min_values(gate.constraint))


def evaluate(
    gates: Sequence[tuple[ResolvedGate, str, Sequence[Selected]]],
    baselines: Baselines,
    policy: Policy,
    *,
    enforce: bool = True,
    keep_bands: bool = False,
) -> list[GateVerdicts]:
    """The verdicts of every selected coordinate of every gate (`(gate, coordinate hash, selection)`), one
    `GateVerdicts` per gate in the order given (`keep_bands`: see `GateVerdicts`). A gate that selected
    nothing (a tracked metric whose every value was NaN) has no verdicts, and no entry."""
    return [
        GateVerdicts(
            gate=gate,
            coordinate=coordinate,
            selection=selection if isinstance(selection, Selection) else Selection.of(selection),
            window=levelled(baselines.window(coordinate), gate, policy),
            policy=policy,
            enforced=enforce and gate.enforce and gate.gated,
            keep_bands=keep_bands,
        )
        for gate, coordinate, selection in gates
        if selection
    ]


WHY_STEPS = 5  # failing steps a gate's one-line reason names


def _name(step: int) -> str:
    return "last" if step == -1 else str(step)


def allowed_failures(tolerate: int | float, judged: int) -> int:
    """Failing steps a gate tolerates among `judged` (pass or fail) steps: K, or floor(fraction * judged)."""
    if isinstance(tolerate, float):
        # Through the decimal the user wrote: 0.29 * 100 is 28.999999999999996 in binary floating point.
        return math.floor(Fraction(repr(tolerate)) * judged)
    return tolerate


def tolerates(gate: ResolvedGate, *, failing: int, judged: int) -> bool:
    """Whether the gate's `tolerate` absorbs its `failing` steps among `judged`: all of them or none. It
    never absorbs an error, since a NaN or a missing step is not noise around a band."""
    return bool(gate.tolerate) and 0 < failing <= allowed_failures(gate.tolerate, judged=judged)


class GateVerdicts(Sequence[Verdict]):
    """The verdicts of one gate over its selected steps: statuses decided in bulk, and each step's
    `Verdict` (band and reason) built the first time a report asks for it.

    A run of 40 gates x 1,000 steps has 40,000 verdicts; the exit code, the trust of the run and the text
    report need only the statuses and the few steps that need attention.
    """

    def __init__(
        self,
        *,
        gate: ResolvedGate,
        coordinate: str,
        selection: Selection,
        window: Window | None,
        policy: Policy,
        enforced: bool,
        keep_bands: bool = False,
    ) -> None:
        """`keep_bands`: the caller stores the steps (`stored_columns`), so every step's band is computed
        up front, exactly, and the statuses are read off it instead of a second, rounded pass."""
        self.gate = gate
        self.coordinate = coordinate
        self.selection = selection
        self.window = window
        self.policy = policy
        self.enforced = enforced
        # Per step: its row in the window (-1: no baseline values) and how many values that row holds.
        # The same steps (nearly always): step i is the window's row i.
        self._aligned = window is not None and window.steps == tuple(selection.steps)
        if self._aligned:
            self._rows = np.arange(len(selection), dtype=np.int64)
        else:
            self._rows = np.array(
                [
                    -1 if window is None or (row := window.row(step)) is None else row
                    for step in selection.steps
                ],
                np.int64,
            )
        self._sizes = np.zeros(len(selection), np.int64)
        if window is not None:
            known = self._rows >= 0
            self._sizes[known] = window.counts[self._rows[known]]
        budget = gate.constraint is not None and gate.constraint.budget is not None
        # A budget rule's bands come from its decision, step by step (see `_bulk_bands`).
        self._edges = self._window_bands() if keep_bands and not budget else None
        # Each step's status as its index in STATUSES: a backtest judges millions of cells and counts them.
        self.codes, self.ruled = _statuses(
            gate, selection, window, policy, rows=self._rows, sizes=self._sizes, bands=self._edges
        )
        tally = np.bincount(self.codes, minlength=len(STATUSES)).tolist()
        self.counts: Counter[Status] = Counter({STATUSES[c]: n for c, n in enumerate(tally) if n})
        self.failing = self.counts["fail"]
        self.judged = self.failing + self.counts["pass"]
        self.allowed = allowed_failures(gate.tolerate, judged=self.judged)
        self.tolerated = tolerates(gate, failing=self.failing, judged=self.judged)
        self._verdicts: list[Verdict | None] = [None] * len(self.codes)
        self._bands: list[Band | None] = [None] * len(self.codes)  # a nightly stores them, then reports
        # Steps the baseline holds that the run did not log (a crash, a truncated run, a renamed metric).
        self.missing: tuple[int, ...] = ()
        if gate.gated and policy.missing != "ignore" and window is not None and not self._aligned:
            logged = set(selection.steps)
            self.missing = tuple(step for step in window.steps if step not in logged)

    @functools.cached_property
    def statuses(self) -> tuple[Status, ...]:
        """Each step's status, in step order."""
        return tuple(_STATUS_OBJECTS[self.codes].tolist())

    def __len__(self) -> int:
        return len(self.codes)

    def __repr__(self) -> str:  # `<GateVerdicts train/kl (gates/a.yaml:3) fail: 1 fail, 9 pass>`
        shown = ", ".join(f"{self.counts[s]} {s}" for s in sorted(self.counts, key=STATUS_ORDER.__getitem__))
        return f"<GateVerdicts {self.gate.metric} ({self.gate.file}:{self.gate.line}) {self.status}: {shown}>"

    @overload
    def __getitem__(self, index: int) -> Verdict: ...
    @overload
    def __getitem__(self, index: slice) -> list[Verdict]: ...
    def __getitem__(self, index: int | slice) -> Verdict | list[Verdict]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        found = self._verdicts[index]
        if found is None:
            found = judge(
                self.gate,
                self.coordinate,
                self.selection[index],
                self.history(index),
                self.policy,
                enforce=self.enforced,
                current=self.band_at(index) if self.ruled is not None else self._bands[index],
                ruled=None
                if self.ruled is None
                else self.ruled.step(index, self.selection[index].value, self.selection),
            )
            if found.status != self.statuses[index]:  # pragma: no cover - _statuses is exact by design
                raise AssertionError(
                    f"{self.gate.metric} step {found.step}: bulk and per-step verdicts differ"
                )
            if self.tolerated and found.status == "fail":
                found = dataclasses.replace(found, tolerated=True)
            self._verdicts[index] = found
        return found

    def history(self, index: int) -> list[float]:
        """The baseline values of the index-th selected step, newest first."""
        row, size = int(self._rows[index]), int(self._sizes[index])
        return [] if self.window is None or row < 0 else self.window.values[row, :size].tolist()

    def band_at(self, index: int) -> Band:
        """The band of the index-th selected step, without its reason."""
        found = self._verdicts[index]
        if found is not None:
            return found.band
        current = self._bands[index]
        if current is None:
            ruled = None if self.ruled is None else self.ruled.band(index)
            current = self._bands[index] = ruled or band(
                self.gate.constraint, self.history(index), self.policy.reference
            )
        return current

    def stored_columns(self) -> PointColumns:
        """What the store keeps of the gate's steps: each value with its status and band (not its
        reason), as columns; a step without a value (an error) stores nothing."""
        ref, lo, hi = self._bulk_bands()
        sd = np.full(len(self), np.nan)
        if self.ruled is not None:  # a budget rule's spread, step by step; a band gate's reason gives none
            sd[:] = [np.nan if (x := self.band_at(i).sd) is None else x for i in range(len(self))]
        kept = ~np.isnan(self.selection.numbers())
        everything = bool(kept.all())
        statuses = _STATUS_OBJECTS[self.codes]

        def column(values: np.ndarray) -> list[Any]:
            return (values if everything else values[kept]).tolist()  # type: ignore[no-any-return]

        def nullable(values: np.ndarray) -> list[float | None]:
            return _nullable(values if everything else values[kept])

        return PointColumns(
            steps=column(np.asarray(self.selection.steps, np.int64)),
            values=column(self.selection.numbers()),
            statuses=column(statuses),
            refs=nullable(ref),
            los=nullable(lo),
            his=nullable(hi),
            sds=nullable(sd),
        )

    def _bulk_bands(self) -> Bands:
        """Every step's band as ref, lo and hi arrays (NaN: none), computed in bulk (a budget rule's bands
        come from the rule, step by step)."""
        if self.ruled is not None:
            bands = [self.band_at(i) for i in range(len(self))]
            return tuple(  # type: ignore[return-value]
                np.array([np.nan if x is None else x for x in column], np.float64)
                for column in ([b.ref for b in bands], [b.lo for b in bands], [b.hi for b in bands])
            )
        return self._edges if self._edges is not None else self._window_bands()

    def _window_bands(self) -> Bands:
        """Every step's band of its window as ref, lo and hi arrays (NaN: none), computed in bulk."""
        if self.window is None:
            return tuple(np.full(len(self.selection), np.nan) for _ in range(3))  # type: ignore[return-value]
        matrix = self.window.values if self._aligned else self.window.values[np.maximum(self._rows, 0)]
        return ragged_bands(self.gate.constraint, matrix, self._sizes, self.policy.reference)

    def refs(self) -> list[float | None]:
        """Every step's reference (None without history), computed in bulk."""
        return _nullable(self._bulk_bands()[0])

    @property
    def has_history(self) -> bool:
        """Whether any selected step has baseline values: a gate with none may have been re-keyed."""
        return bool(self._sizes.any())

    def where(self, *statuses: Status) -> Iterator[Verdict]:
        """The verdicts of the steps with these statuses, in step order, each built as it is reached."""
        return (self[i] for i, status in enumerate(self.statuses) if status in statuses)

    @property
    def status(self) -> Status:
        """The gate's status: the worst of its steps, a tolerated failing step counting as a pass; and
        `missing` when the run lacks steps its baseline holds."""
        counted: list[Status] = [s for s in self.counts if not (s == "fail" and self.tolerated)]
        if len(counted) < len(self.counts):
            counted.append("pass")
        if self.missing:
            counted.append("missing")
        return min(counted, key=STATUS_ORDER.__getitem__)

    @property
    def blocking(self) -> int:
        """Steps that failed or errored and that `tolerate` does not absorb, and (`policy.missing: fail`)
        the steps the run lacks."""
        missing = len(self.missing) if self.policy.missing == "fail" else 0
        return self.counts["error"] + missing + (0 if self.tolerated else self.failing)

    def missing_text(self) -> str | None:
        """`steps 10-49 not logged; the last 20 nightlies logged 0-49`, when steps are missing."""
        if not self.missing or self.window is None:
            return None
        nights = int(self.window.counts.max())
        return (
            f"step{'s' * (len(self.missing) != 1)} {step_ranges(self.missing)} not logged; the last "
            f"{nights} nightl{'ies' if nights != 1 else 'y'} logged {step_ranges(self.window.steps)}"
        )

    @property
    def blocks_trust(self) -> bool:
        """A gated (enforced or shadow) gate with a failing or erroring step makes the run untrusted."""
        return self.gate.gated and self.blocking > 0

    @property
    def fails_job(self) -> bool:
        return self.enforced and self.blocking > 0

    @property
    def why(self) -> str | None:
        """Why the gate fails, in one line a person reads (which steps, how far, against what); None when
        it does not."""
        if not self.blocking:
            return None
        if self.ruled is not None and self.ruled.problem is not None:
            return f"its baseline cannot be judged against ({self.ruled.problem})"
        if self.missing and self.policy.missing == "fail" and not self.counts["error"] and not self.failing:
            return f"the run stopped early or lost steps: {self.missing_text()}"
        if self.counts["error"]:
            first = next(self.where("error"))
            if first.logged_step is None and first.reason.startswith(METRIC_MISSING):
                return first.reason  # no step was logged, so none is named (nor `last` for `steps: all`)
            errors = counted(self.counts["error"], "step")
            return f"{errors} without a usable value; step {_name(first.step)}: {first.reason}"
        if self.ruled is not None and self.ruled.decision is not None and self.ruled.decision.fired:
            return self.ruled.why(self.gate, self.selection)
        failing = list(self.where("fail"))
        worst = max(failing, key=lambda v: abs(v.delta_pct or 0.0))
        shown = ", ".join(_name(v.step) for v in failing[:WHY_STEPS]) + (
            f" and {len(failing) - WHY_STEPS} more" if len(failing) > WHY_STEPS else ""
        )
        steps = f"{self.judged} step{'s' * (self.judged != 1)}"
        text = f"{self.failing} of {steps} failing (step{'s' * (self.failing != 1)} {shown})"
        if self.gate.tolerate:
            text += f", more than `tolerate: {self.gate.tolerate}` allows ({self.allowed})"
        return f"{text}; worst: step {_name(worst.step)} {worst.reason}"

    @property
    def reason(self) -> str:
        text = f"{self.failing} of {len(self)} step{'s' * (len(self) != 1)} failing"
        if self.gate.tolerate:
            fate = "tolerated" if self.failing <= self.allowed else "more than tolerated"
            text += f"; tolerate: {self.gate.tolerate} allows {self.allowed} ({fate})"
        return text


def _nullable(values: np.ndarray) -> list[float | None]:
    """Floats as Python objects, None where NaN (the store's and the report's "none")."""
    missing = np.isnan(values)
    if not missing.any():  # a warm history's refs and edges: floats made at C speed
        return values.tolist()  # type: ignore[no-any-return]
    if missing.all():  # an open side
        return [None] * len(values)
    found = values.astype(object)
    found[missing] = None
    return found.tolist()  # type: ignore[no-any-return]


def trusted(results: Sequence[GateVerdicts]) -> bool:
    return not any(r.blocks_trust for r in results)


def exit_code(results: Sequence[GateVerdicts]) -> int:
    return 1 if any(r.fails_job for r in results) else 0


# ------------------------------------------------------------------------------------- bulk statuses

# A band edge within this fraction of the magnitudes involved is a close call, decided step by step by
# `judge`. The bulk arithmetic differs from judge's (a pairwise sum, not math.fsum; edges not rounded to
# 12 digits) by far less: 12 significant digits is 5e-13, a window's rounding error n * 2.2e-16.
CLOSE_CALL = 1e-9
# Windows longer than this are judged step by step: the rounding error of a sum grows with its length.
BULK_MAX_WINDOW = 100_000


def _statuses(
    gate: ResolvedGate,
    selection: Selection,
    window: Window | None,
    policy: Policy,
    *,
    rows: Counts,
    sizes: Counts,
    bands: Bands | None = None,
) -> tuple[np.ndarray, Ruled | None]:
    """Every step's status (its index in STATUSES), exactly as `judge` decides it, with the band
    arithmetic done in arrays; and for a budget gate, the rule's decision over all its judged steps.
    Kept for benchmarks/bench.py's evaluate; tests/test_bulk_verdicts.py holds it equal to `judge`.
    Given every step's exact `bands` (ref, lo, hi; `band()` bit for bit), a step's status is read off its
    edges, as `judge` reads it."""
    values = selection.numbers()
    codes = np.full(len(selection), _CLOSE, np.int8)
    # A selected value is finite or an error, so NaN marks the errors.
    open_ = ~np.isnan(values)
    codes[~open_] = _CODE["error"]
    if not gate.gated:
        codes[open_] = _CODE["tracked"]
        open_[:] = False
    if gate.limits is not None:
        with np.errstate(invalid="ignore"):
            breach = np.zeros(len(values), bool)
            if gate.limits.min is not None:
                breach |= values < gate.limits.min
            if gate.limits.max is not None:
                breach |= values > gate.limits.max
        codes[open_ & breach] = _CODE["fail"]
        open_ &= ~breach
    ruled = None
    if gate.constraint is None:
        codes[open_] = _CODE["pass"]
    else:
        cold = open_ & (sizes < needed_history(gate, policy))
        codes[cold] = _CODE["cold"]
        open_ &= ~cold
    if gate.constraint is not None and gate.constraint.budget is not None:
        if window is not None and open_.any():
            ruled = Ruled.of(
                gate,
                gate.constraint.budget,
                values,
                window,
                judged=np.flatnonzero(open_),
                rows=rows,
                sizes=sizes,
            )
            codes[open_] = (
                _CODE["error"]
                if ruled.decision is None
                else np.where(ruled.decision.failing, _CODE["fail"], _CODE["pass"])
            )
    elif gate.constraint is not None and bands is not None:
        judged = np.flatnonzero(open_)
        value, (ref, low, high) = values[judged], (column[judged] for column in bands)
        # Band.contains: an open side (NaN) holds all; one that may round to `ref` is for `judge`.
        inside = (np.isnan(low) | (low <= value)) & (np.isnan(high) | (value <= high))
        close = ~inside & (np.abs(value - ref) <= np.abs(value) * CLOSE_CALL)
        codes[judged] = np.where(close, _CLOSE, np.where(inside, _CODE["pass"], _CODE["fail"]))
    elif gate.constraint is not None:
        # Steps whose windows hold as many values share a matrix (one, nearly always). A set, not
        # np.unique, which imports numpy.ma (a sixtieth of a CI process's start) to ask about masks.
        judged = sizes[open_]
        lengths = [int(judged[0])] if len(judged) and judged.min() == judged.max() else set(judged.tolist())
        for size in sorted(lengths):
            if window is None or size > BULK_MAX_WINDOW:
                continue
            steps = np.flatnonzero(open_ & (sizes == size))
            if len(steps) == len(rows) and window.values.shape[0] == len(rows) and (rows == steps).all():
                matrix = window.values[:, :size]  # every step, each its own row (nearly always): no copy
            else:
                # Gathered column-major, where the band's reductions over each row run several times
                # faster (numpy's fancy indexing would lay the rows out row-major).
                matrix = np.take(window.values.T[:size], rows[steps], axis=1).T
            codes[steps] = _band_statuses(gate.constraint, values[steps], matrix, policy.reference)
    for i in np.flatnonzero(codes == _CLOSE).tolist():
        history = [] if window is None else window.values[rows[i], : sizes[i]].tolist()
        codes[i] = _CODE[judge(gate, "", selection[i], history, policy, enforce=False).status]
    return codes, ruled


@dataclass(frozen=True)
class Ruled:
    """A budget gate's decision over its judged steps (`judged`: their indices among the selected), or
    why its window could not be judged against (`problem`: every judged step is an error)."""

    decision: Decision | None
    judged: Counts
    position: Mapping[int, int]  # selected index -> index among the judged
    nights: int
    problem: str | None = None

    @classmethod
    def of(
        cls,
        gate: ResolvedGate,
        direction: Direction,
        values: np.ndarray,
        window: Window,
        *,
        judged: Counts,
        rows: Counts,
        sizes: Counts,
    ) -> Ruled:
        # The nights every judged step holds: the newest `nights` columns of the window, newest first.
        nights = int(sizes[judged].min())
        history = window.values[rows[judged], :nights]
        position = {int(i): k for k, i in enumerate(judged.tolist())}
        try:
            decision = decide(
                values[judged],
                history,
                direction=direction,
                alpha=gate.false_alarm,
                trials=gate.trials,
                min_change=None if gate.constraint is None else gate.constraint.min_change,
                stretch=None if window.stretch is None else window.stretch[0],
            )
        except UnusableWindowError as exc:
            return cls(None, judged, position, nights, f"budget rule, {nights} past nights: {exc}")
        return cls(decision, judged, position, nights)

    def band(self, index: int) -> Band | None:
        """The step's baseline as reports show it: the median of its window, its night-to-night spread,
        and the edges beyond which it fails on its own (the rule judges the steps together too: a step
        within them fails when a statistic over several steps blames it); one beyond the float range is
        as open as none."""
        k = self.position.get(index)
        if k is None:
            return None
        d = self.decision
        if d is None:
            return Band(None, self.nights, None, None)

        def at(values: np.ndarray | None) -> float | None:
            return tidy(float(values[k])) if values is not None and np.isfinite(values[k]) else None

        return Band(tidy(float(d.loc[k])), self.nights, at(d.lo), at(d.hi), at(d.spread))

    def step(self, index: int, value: float | None, selection: Selection) -> tuple[Status, str] | None:
        """The status and reason of the index-th selected step (its value `value`), when the rule judged
        it: "6.6 vs usual 2.19 ± 0.1: +44 spreads (fails alone beyond 3.7)", and for a failing step what
        made it fail (docs/evaluate.md, "Reading a budget gate")."""
        k = self.position.get(index)
        if k is None:
            return None
        d = self.decision
        if d is None:
            return "error", self.problem or "the window cannot be judged against"
        assert value is not None  # judged steps have values
        versus, edge = self._versus(k, value)
        if not d.failing[k]:
            return "pass", f"{versus} (fails alone {edge})"
        if self._alone(k, value):
            return "fail", f"{versus}, {edge} where it fails alone"
        return "fail", f"{versus} (fails alone {edge}); moved with {self._statistic(d, selection)}"

    def _versus(self, k: int, value: float) -> tuple[str, str]:
        """A step's value against its usual value and spread in the metric's units (`6.60 vs usual 2.19 ±
        0.10: +44 spreads`), and the edge beyond which it fails on its own (`beyond 3.70`)."""
        d = self.decision
        assert d is not None
        assert d.spread is not None
        loc, spread = float(d.loc[k]), float(d.spread[k])
        text = f"{near(value, spread)} vs usual {near(loc, spread)} ± {near(spread, spread)}"
        if spread > 0 and math.isfinite(value - loc):
            text += f": {(value - loc) / spread:+.{1 if abs(value - loc) < 10 * spread else 0}f} spreads"
        lo = None if d.lo is None else float(d.lo[k])
        hi = None if d.hi is None else float(d.hi[k])
        if lo is not None and hi is not None:
            return text, f"outside {near(lo, spread)} to {near(hi, spread)}"
        if hi is not None:
            return text, f"beyond {near(hi, spread)}"
        assert lo is not None  # a budget gate judges at least one side
        return text, f"below {near(lo, spread)}"

    def _alone(self, k: int, value: float) -> bool:
        """Whether the step is beyond the edge at which it fails on its own."""
        d = self.decision
        assert d is not None
        return (d.hi is not None and value > float(d.hi[k])) or (d.lo is not None and value < float(d.lo[k]))

    def _statistic(self, d: Decision, selection: Selection) -> str:
        """The statistic that went furthest, fired or not, and the steps it covers, in words."""
        judged = len(self.judged)
        steps = self._covers(selection, d.first, d.last)
        whole = d.first == 0 and d.last == judged - 1
        if d.kind == "edges":
            first, last = (_name(selection.steps[int(self.judged[i])]) for i in (d.first, d.last))
            moves = (
                ("rising at", "falling back after") if d.direction == "up" else ("dropping at", "back after")
            )
            return f"the edges of the block {steps} ({moves[0]} step {first}, {moves[1]} step {last})"
        if d.kind == "trend":
            return f"the trend over {steps} (a drift {d.direction} along the run)"
        if d.kind == "step":
            return f"the lone step ({steps})"
        return f"the mean over {steps}" if whole else f"the mean of the block {steps}"

    def why(self, gate: ResolvedGate, selection: Selection) -> str:
        """A fired budget gate in one line: the steps that moved, the statistic that fired and how far it
        went against the edge a clean night passes with probability `false_alarm`, and the worst step
        against its usual value (docs/evaluate.md, "Reading a budget gate")."""
        d = self.decision
        assert d is not None  # a window that could not be judged makes errors, whose reason is theirs
        moved = np.flatnonzero(d.failing)
        judged = len(self.judged)
        steps = "step" if len(moved) == 1 else "steps"
        where = f"{steps} {self._ranges(selection, moved)} moved {d.direction}"
        if len(moved) == judged and judged > 1:
            where = f"all {judged} steps moved {d.direction}"
        elif judged > 1:
            where += f" ({len(moved)} of {judged} steps)"
        # The statistic's steps' mean change against their usual values.
        change = "" if d.pct is None else f" ({d.pct:+.1f}% on average)"
        sign = 1.0 if d.direction == "up" else -1.0
        worst = int(moved[np.argmax(sign * d.z[moved])])
        value = float(selection.numbers()[int(self.judged[worst])])
        step = _name(selection.steps[int(self.judged[worst])])
        statistic = self._statistic(d, selection)
        if d.kind == "step":
            # A lone step beyond anything the window's nights showed, and an explosion (budget.py).
            lone = _name(selection.steps[int(self.judged[d.first])])
            fired = (
                f"fired: step {lone} exploded on its own{change}, {d.distance:.3g} spreads {d.direction}, "
                f"beyond {d.threshold:.3g}: farther than any step of the {d.nights} past nights went"
            )
        else:
            unit = "spreads" if d.kind == "mean" else "(a score)"
            capped = "at least " if judged > 1 and d.kind == "mean" and d.distance >= CLIP_Z else ""
            fired = (
                f"fired: {statistic}{change} went {capped}{d.distance:.2f} {unit} {d.direction}, beyond "
                f"{d.threshold:.2f} that a clean night passes with probability {gate.false_alarm:g}"
            )
        versus, edge = self._versus(worst, value)
        return (
            f"{where}; {fired}; worst step {step}: {versus} (fails alone {edge}); budget rule, "
            f"{d.nights} past nights"
        )

    def _covers(self, selection: Selection, first: int, last: int) -> str:
        """Judged steps first..last as logged steps: `all 100 steps`, `step 7`, `steps 40-49`."""
        if first == 0 and last == len(self.judged) - 1 and last > 0:
            return f"all {last + 1} steps"
        low, high = (_name(selection.steps[int(self.judged[i])]) for i in (first, last))
        return f"step {low}" if first == last else f"steps {low}-{high}"

    def _ranges(self, selection: Selection, indices: np.ndarray) -> str:
        """Judged steps (their indices) as logged steps in runs of neighbours: `30-49`, `7, 12-14`; the
        first WHY_STEPS runs and how many more."""
        runs: list[tuple[int, int]] = []
        for i in indices.tolist():
            if runs and runs[-1][1] == i - 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))

        def name(i: int) -> str:
            return _name(selection.steps[int(self.judged[i])])

        shown = [name(a) if a == b else f"{name(a)}-{name(b)}" for a, b in runs[:WHY_STEPS]]
        more = len(runs) - WHY_STEPS
        return ", ".join(shown) + (f" and {more} more runs of steps" if more > 0 else "")


# Status codes of the bulk arithmetic, and a close call that `judge` decides.
_CODE: Mapping[Status, int] = {status: code for code, status in enumerate(STATUSES)}
_STATUS_OBJECTS = np.array(STATUSES, dtype=object)
_CLOSE = -1


def _band_statuses(
    constraint: Constraint, values: np.ndarray, window: np.ndarray, how: Reference
) -> np.ndarray:
    """Per row: pass or fail against the band of its window, or _CLOSE when float rounding could decide it."""
    with np.errstate(all="ignore"):  # an overflow makes a non-finite edge: a close call, judged by judge
        ref = np.median(window, axis=1) if how == "median" else window.mean(axis=1)
        has_sigma = constraint.sigma_up is not None or constraint.sigma_down is not None
        sd = window.std(axis=1, ddof=1) if has_sigma and window.shape[1] >= SIGMA_MIN_VALUES else None
        up = widths(constraint.rel_up, constraint.abs_floor_up, constraint.sigma_up, ref, sd)
        down = widths(constraint.rel_down, constraint.abs_floor_down, constraint.sigma_down, ref, sd)
        # What the rounding errors of ref, sd and the edges scale with.
        factor = 1.0 + sum(
            abs(x or 0.0)
            for x in (constraint.rel_up, constraint.rel_down, constraint.sigma_up, constraint.sigma_down)
        )
        # The largest magnitude of each row, without an array of magnitudes.
        scale = np.maximum(window.max(axis=1), -window.min(axis=1)) * factor + np.abs(values)
        inside = np.ones(len(values), dtype=bool)
        outside = np.zeros(len(values), dtype=bool)
        if up is not None:
            hi = ref + up
            scale += np.abs(hi)
        if down is not None:
            lo = ref - down
            scale += np.abs(lo)
        # The absolute term covers subnormal numbers, whose 12-digit rounding is coarser than 5e-13.
        margin = scale * CLOSE_CALL + 1e-300
        if up is not None:
            inside &= values <= hi - margin
            outside |= values > hi + margin
        if down is not None:
            inside &= values >= lo + margin
            outside |= values < lo - margin
        # A window that may hold an absurd value (left out of its band) is for `judge`.
        finite = np.isfinite(margin) & ~may_hold_absurd(window)
    return np.where(finite & inside, _CODE["pass"], np.where(finite & outside, _CODE["fail"], _CLOSE))
