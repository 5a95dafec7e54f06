"""`benchmarks/tcpd.py`'s own F1 and covering, on the small examples of the benchmark's paper and code
(van den Burg & Williams 2020, TCPDBench `analysis/scripts/metrics.py`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "tcpd.py"


def _tcpd() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tcpd_bench", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tcpd_bench"] = module
    spec.loader.exec_module(module)
    return module


tcpd = _tcpd()


def test_true_positives_count_each_prediction_once() -> None:
    assert tcpd.true_positives({1, 10, 20, 23}, {3, 8, 20}) == {1, 10, 20}
    assert tcpd.true_positives({1, 10, 20, 23}, {1, 3, 8, 20}) == {1, 10, 20}
    assert tcpd.true_positives({1, 10, 20, 23}, {1, 3, 5, 8, 20}) == {1, 10, 20}
    assert tcpd.true_positives(set(), {1, 2, 3}) == set()
    assert tcpd.true_positives({1, 2, 3}, set()) == set()


def test_f1_counts_the_start_for_everyone() -> None:
    people = {"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}
    assert tcpd.f_measure(people, [10, 20])[0] == pytest.approx(1.0)
    assert tcpd.f_measure({"1": [], "2": [10], "3": [50]}, [10])[0] == pytest.approx(0.9090909090909091)
    assert tcpd.f_measure({"1": [], "2": [10], "3": [50]}, [])[0] == pytest.approx(0.8)


def test_covering_of_the_papers_examples() -> None:
    assert tcpd.cover_single([{1, 2, 3}, {4, 5}, {6}], [{1, 2, 3}, {4, 5, 6}]) == pytest.approx(0.8333333333)
    assert tcpd.cover_single([{1, 2, 3, 4, 5, 6}], [{1}, {2}, {3}, {4, 5, 6}]) == pytest.approx(0.3333333333)
    people = {"1": [10, 20], "2": [10], "3": [0, 5]}
    assert tcpd.covering(people, [10, 20], 45) == pytest.approx(0.7962962962962963)
    assert tcpd.covering({"1": [], "2": [10], "3": [40]}, [10], 45) == pytest.approx(0.7954144620811286)
    assert tcpd.covering({"1": [], "2": [10], "3": [40]}, [], 45) == pytest.approx(0.8189300411522634)


def test_partition_from_change_points() -> None:
    assert tcpd.partition([], 5) == [{0, 1, 2, 3, 4}]
    assert tcpd.partition([3, 5], 8) == [{0, 1, 2}, {3, 4}, {5, 6, 7}]
    assert tcpd.partition([0, 4], 6) == [{0, 1, 2, 3}, {4, 5}]


def test_a_series_with_missing_values_is_scored_on_its_own_indices(tmp_path: Path) -> None:
    # Nights 5-14 have no value: the change at index 40 is reported at 40, not at 30.
    values: list[float | None] = [float(i % 2) for i in range(40)] + [10.0 + i % 2 for i in range(40)]
    values[5:15] = [None] * 10
    assert tcpd.regime_starts([values], tmp_path) == [40]


def test_a_series_of_two_dimensions_changes_where_either_does(tmp_path: Path) -> None:
    first = [float(i % 2) + (8.0 if i >= 30 else 0.0) for i in range(90)]
    second: list[float | None] = [float(i % 3) + (9.0 if i >= 60 else 0.0) for i in range(90)]
    second[0] = None
    assert tcpd.regime_starts([first, second], tmp_path) == [30, 60]


def test_a_tcpd_file_reads_every_dimension_and_its_nulls(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"series": [{"raw": [1, null, 3]}, {"raw": [4.5, 5, null]}]}')
    assert tcpd._series(path) == [[1.0, None, 3.0], [4.5, 5.0, None]]
