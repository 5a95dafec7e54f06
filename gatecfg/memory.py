"""Pausing Python's cyclic garbage collector while a stage builds many objects that hold no cycles.

Every 700 new container objects start a collection, and every tenth and hundredth of those walk older
generations too: reading 800,000 baseline rows as tuples, or loading a large YAML file, triggered over a
thousand collections that found nothing to free (reference counting frees all of it) and cost 5-10% of the
stage. Objects the stage leaves in a cycle are collected at the next collection after it.

Kept for speed by benchmarks/bench.py (evaluate's baseline read at 8M values) and benchmarks/loader.py (a
large gate file); nothing to hold equal: what the stage returns does not depend on the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (if it was on), then back on."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
