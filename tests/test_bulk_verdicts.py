"""The bulk verdicts of `evaluate` (array arithmetic per gate) against `judge`, the per-step definition:
every status the same, on random windows and on values placed exactly on, and one float beside, each band
edge, where the bulk path must hand the step to `judge`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatecfg.band import Band, band, bulk_bands
from gatecfg.models import Constraint, Limits
from gatecfg.resolve import BUILTIN, Policy, ResolvedGate
from gatecfg.select import Selected
from gatecfg.verdicts import GateVerdicts, evaluate, judge
from gatecfg.windows import Baselines, Window

COORDINATE = "c0ffee"


def _gate(
    constraint: Constraint | None, limits: Limits | None = None, tolerate: int | float = 0
) -> ResolvedGate:
    return ResolvedGate(
        test="t", file="gates/t.yaml", line=3, metric="train/grad_norm", steps="all",
        constraint=constraint, limits=limits, enforce=True, sources=dict.fromkeys(("steps",), BUILTIN),
        tolerate=tolerate,
    )  # fmt: skip


def _policy(reference: str = "mean", min_history: int = 1) -> Policy:
    return Policy(window=30, min_history=min_history, enforce=True, sources={}, reference=reference)  # type: ignore[arg-type]


def _judged(gate: ResolvedGate, values: list[float | None], windows: dict[int, list[float]], policy: Policy):
    selection = [
        Selected(step, step, value, None, None)
        if value is not None
        else Selected(step, None, None, "value is NaN", None)
        for step, value in enumerate(values)
    ]
    baselines = Baselines.from_values({(COORDINATE, step): w for step, w in windows.items()})
    [result] = evaluate([(gate, COORDINATE, selection)], baselines, policy)
    expected = [judge(gate, COORDINATE, s, windows.get(s.step, []), policy, enforce=True) for s in selection]
    return result, expected


def _kept(result: GateVerdicts) -> GateVerdicts:
    """The same steps judged as an import judges them: every band computed first, the statuses read off it."""
    return GateVerdicts(
        gate=result.gate,
        coordinate=result.coordinate,
        selection=result.selection,
        window=result.window,
        policy=result.policy,
        enforced=result.enforced,
        keep_bands=True,
    )


def _assert_same(result: GateVerdicts, expected: list) -> None:
    assert list(result.statuses) == [v.status for v in expected]
    # Built one by one, each verdict carries judge's band and reason (and checks the bulk status again).
    for built, want in zip(result, expected, strict=True):
        assert (built.band, built.reason, built.value) == (want.band, want.reason, want.value)
    kept = _kept(result)
    assert list(kept.statuses) == [v.status for v in expected]
    assert kept.stored_columns() == result.stored_columns()
    stored = [v for v in expected if v.value is not None]
    assert (kept.stored_columns().refs, kept.stored_columns().los, kept.stored_columns().his) == (
        [v.band.ref for v in stored],
        [v.band.lo for v in stored],
        [v.band.hi for v in stored],
    )


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
tame = st.one_of(
    st.integers(-50, 50).map(float),
    st.integers(-10_000, 10_000).map(lambda k: k / 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(-1e-300, 1e-300, allow_nan=False),
)
side = st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 3.0, 1e6]))


@st.composite
def constraints(draw: st.DrawFn) -> Constraint:
    names = ("rel_up", "abs_floor_up", "sigma_up", "rel_down", "abs_floor_down", "sigma_down")
    keys = {name: draw(side) for name in names}
    if all(v is None for v in keys.values()):
        keys["rel_down"] = 0.2
    return Constraint(**{name: v for name, v in keys.items() if v is not None})


def _value_near(
    constraint: Constraint, history: list[float], policy: Policy
) -> st.SearchStrategy[float | None]:
    """None (an error), any float, or a band edge of `history` and the floats just beside it."""
    current = band(constraint, history, policy.reference)
    edges = [e for e in (current.lo, current.hi) if e is not None]
    near = [x for e in edges for x in (e, math.nextafter(e, math.inf), math.nextafter(e, -math.inf))]
    return (
        st.one_of(st.none(), tame, finite, st.sampled_from(near))
        if near
        else st.one_of(st.none(), tame, finite)
    )


@settings(max_examples=300, deadline=None)
@given(
    constraint=constraints(),
    reference=st.sampled_from(["mean", "median"]),
    min_history=st.integers(0, 4),
    windows=st.lists(st.lists(st.one_of(tame, finite), max_size=8), min_size=1, max_size=12),
    data=st.data(),
)
def test_bulk_statuses_match_judge_on_and_beside_every_edge(
    constraint: Constraint, reference: str, min_history: int, windows: list[list[float]], data: st.DataObject
) -> None:
    policy = _policy(reference, min_history)
    values = [data.draw(_value_near(constraint, history, policy)) for history in windows]
    result, expected = _judged(_gate(constraint), values, dict(enumerate(windows)), policy)
    _assert_same(result, expected)


@pytest.mark.parametrize("reference", ["mean", "median"])
def test_a_value_on_a_rounded_edge_passes_and_one_float_beyond_fails(reference: str) -> None:
    # 0.521875 - 0.2 * 0.521875 is 0.41750000000000004 in floats; the edge is rounded to 0.4175.
    constraint = Constraint(rel_down=0.2, abs_floor_down=0.05)
    history = [0.521875] * 5
    lo = band(constraint, history).lo
    assert lo == 0.4175
    values: list[float | None] = [lo, math.nextafter(lo, -math.inf), 0.9, 0.1]
    result, expected = _judged(
        _gate(constraint), values, dict.fromkeys(range(4), history), _policy(reference)
    )
    assert list(result.statuses) == ["pass", "fail", "pass", "fail"]
    _assert_same(result, expected)


def test_limits_errors_cold_and_tracked_steps_match_judge() -> None:
    constraint = Constraint(rel_up=0.1, rel_down=0.1)
    limits = Limits(min=0.0, max=10.0)
    values: list[float | None] = [None, -1.0, 11.0, 5.0, 5.0, 5.0, 10.0]
    windows = {3: [], 4: [5.0, 5.1], 5: [1.0], 6: [10.0] * 3}
    for gate in (_gate(constraint, limits), _gate(None, limits), _gate(None), _gate(constraint)):
        result, expected = _judged(gate, values, windows, _policy(min_history=2))
        _assert_same(result, expected)


def test_tolerate_absorbs_all_failing_steps_or_none_and_never_an_error() -> None:
    constraint = Constraint(rel_up=0.1, rel_down=0.1)
    windows = dict.fromkeys(range(10), [1.0] * 5)
    two_spikes: list[float | None] = [1.0] * 8 + [5.0, 5.0]
    result, _ = _judged(_gate(constraint, tolerate=2), two_spikes, windows, _policy())
    assert (result.status, result.tolerated, result.fails_job) == ("pass", True, False)
    assert [v.tolerated for v in result.where("fail")] == [True, True]
    result, _ = _judged(_gate(constraint, tolerate=1), two_spikes, windows, _policy())
    assert (result.status, result.tolerated, result.fails_job) == ("fail", False, True)
    with_error: list[float | None] = [1.0] * 8 + [5.0, None]
    result, _ = _judged(_gate(constraint, tolerate=2), with_error, windows, _policy())
    assert (result.status, result.blocking, result.fails_job) == ("error", 1, True)


def test_a_window_keeps_each_steps_values_newest_first() -> None:
    window = Window.from_lists({3: [0.5, 0.25], 1: [1.0], 2: []})
    assert window is not None
    assert window.steps == (1, 3)
    assert window.history(3) == [0.5, 0.25]
    assert window.history(2) == []
    baselines = Baselines({"c": window})
    assert dict(baselines) == {("c", 1): [1.0], ("c", 3): [0.5, 0.25]}
    assert baselines == {("c", 1): [1.0], ("c", 3): [0.5, 0.25]}
    assert ("c", 2) not in baselines


def test_a_gate_that_selected_nothing_has_no_entry_and_a_window_without_values_is_cold() -> None:
    constraint = Constraint(rel_up=0.1)
    empty = Baselines({COORDINATE: Window.from_runs([], np.empty((3, 0)))})
    selection = [Selected(0, 0, 1.0, None, None), Selected(1, 1, 2.0, None, None)]
    assert evaluate([(_gate(None), COORDINATE, [])], empty, _policy()) == []
    [result] = evaluate([(_gate(constraint), COORDINATE, selection)], empty, _policy())
    assert (result.statuses, result.has_history, result.status) == (("cold", "cold"), False, "cold")


@pytest.mark.parametrize("reference", ["mean", "median"])
def test_a_window_near_the_float_maximum_gives_open_sides_not_an_overflow(reference: str) -> None:
    # A diverged run can log 1.7e308; the sums and squares of such a window leave the float range.
    huge = 1.7e308
    constraint = Constraint(rel_up=0.2, sigma_up=3.0, rel_down=0.5, sigma_down=3.0)
    windows = {0: [huge, huge], 1: [-huge, -huge, -huge], 2: [huge, -huge], 3: [huge, huge, 1.0, -huge]}
    values: list[float | None] = [huge, -huge, 0.0, huge]
    result, expected = _judged(_gate(constraint), values, windows, _policy(reference))
    _assert_same(result, expected)
    assert result.statuses == ("pass", "pass", "pass", "pass")
    for verdict in result:
        band_ = verdict.band
        assert all(x is None or math.isfinite(x) for x in (band_.ref, band_.lo, band_.hi, band_.sd))
    assert result[0].band.hi is None  # 1.7e308 + 20% leaves the float range: open, as if unwritten
    assert result[2].band.ref == 0.0


# ------------------------------------------------------------------------------------ bands in bulk

CONSTRAINTS = [
    Constraint(rel_up=0.5, abs_floor_up=0.1, rel_down=0.5, abs_floor_down=0.1),
    Constraint(rel_down=0.2, abs_floor_down=0.05),
    Constraint(abs_floor_up=0.3),
    None,
]


def _as_arrays(bands: list[Band]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    def column(values: list[float | None]) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in values], np.float64)

    return column([b.ref for b in bands]), column([b.lo for b in bands]), column([b.hi for b in bands])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.floats(-1e6, 1e6, allow_subnormal=True), min_size=1, max_size=24),
    shape=st.integers(1, 6),
    scale=st.sampled_from([1.0, 1e-9, 1e-300, 1e12, 1e300, 0.001]),
    constraint=st.sampled_from(CONSTRAINTS),
)
def test_bulk_bands_are_band_bit_for_bit(
    rows: list[float], shape: int, scale: float, constraint: Constraint | None
) -> None:
    # Rows of random values, at magnitudes where decimal rounding, overflow and subnormals matter.
    width = max(1, len(rows) // shape)
    windows = np.array(rows[: width * (len(rows) // width)], np.float64).reshape(-1, width) * scale
    found = bulk_bands(constraint, windows)
    assert found is not None
    expected = _as_arrays([band(constraint, row.tolist()) for row in windows])
    for got, want in zip(found, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_bulk_bands_round_edges_on_a_decimal_midpoint_as_band_does() -> None:
    # A 12-digit reference halved has 13 digits ending in 5: an edge on (or a hair beside) the midpoint
    # of the 12-digit grid, which the bulk rounding must settle exactly as `tidy` does.
    rng = np.random.default_rng(5)
    windows = np.round(rng.uniform(0.1, 10.0, (4000, 1)), 11)
    found = bulk_bands(CONSTRAINTS[0], windows)
    assert found is not None
    expected = _as_arrays([band(CONSTRAINTS[0], row.tolist()) for row in windows])
    for got, want in zip(found, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_bulk_bands_leave_medians_and_sigma_terms_to_band() -> None:
    windows = np.ones((3, 4))
    assert bulk_bands(Constraint(sigma_up=3.0), windows) is None
    assert bulk_bands(CONSTRAINTS[0], windows, "median") is None


def test_stored_columns_hold_what_stored_points_hold_with_bands_per_step() -> None:
    gate = _gate(CONSTRAINTS[0])
    rng = np.random.default_rng(7)
    windows = {step: rng.normal(1.0, 0.05, 1 + step % 5).tolist() for step in range(40) if step != 3}
    values: list[float | None] = [None if step == 9 else float(rng.normal(1.0, 0.3)) for step in range(40)]
    result, _ = _judged(gate, values, windows, _policy())
    columns = result.stored_columns()
    assert 9 not in columns.steps
    for step, ref, lo, hi in zip(columns.steps, columns.refs, columns.los, columns.his, strict=True):
        expected = band(gate.constraint, windows.get(step, []))
        assert (ref, lo, hi) == (expected.ref, expected.lo, expected.hi)
