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
