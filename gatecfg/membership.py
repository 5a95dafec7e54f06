"""Which stored values form a coordinate's baseline: the one rule that live `evaluate`, the API, the pytest
plugin, `backtest`'s replay, `import` and every view call (docs/calibration.md, "Which runs form a
baseline").

The store only fetches: for each stored (coordinate, run) row it hands over the facts below, newest run
first. `standing` says whether the row's values join the baseline and why; `joining` walks the rows that
do, newest first, of which tonight's window is each step's newest `window` values. What a write does to
those facts afterwards (a rejoin, an accepted shift) is here too, so that a replay holding its history in
memory changes it exactly as the store does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, TypeVar

T = TypeVar("T")
# `policy.baseline`: which stored values a baseline takes (gatecfg.models spells the same for the schema).
Baseline = Literal["trusted", "nightly"]

# Why a row's values are in the baseline ...
In = Literal["passed", "rejoined", "accepted shift", "trusted by hand", "nightly"]
# ... or out of it.
Out = Literal["failed", "run failed", "untrusted by hand", "before shift"]
# The cause `gatecfg.shifts` names for a row kept out (its stale-baseline warning).
Cause = Literal["failed", "untrusted", "run untrusted"]


@dataclass(frozen=True, slots=True)
class Facts:
    """What the store keeps about one gate's values in one run (a `run_coordinates` row and its run)."""

    gate_trusted: bool | None  # the gate's own verdict when written; None: written before trust per gate
    run_trusted: bool  # the run's verdict when written (no gate of it failed)
    override: bool | None = None  # trust set by hand on this gate's values (`trust --metric`)
    run_override: bool | None = None  # trust set by hand on the whole run (`trust`, `untrust`)
    rejoined: str | None = None  # `recovered` or `shift N`: a failed value that joined later
    before_shift: bool = False  # older than the first run of an accepted shift of the coordinate

    @classmethod
    def stored(cls, columns: Sequence[object], before: object) -> Facts:
        """The facts as a store's driver hands them over: the gate's own verdict, the run's, trust set
        by hand on the gate and on the run, the rejoin (store/statements.py FACT_COLUMNS, in that order;
        SQLite's booleans are 0 and 1, NULL is None), and whether an accepted shift starts after it."""
        own, run_trusted, override, run_override, rejoined = columns
        return cls(
            gate_trusted=None if own is None else bool(own),
            run_trusted=bool(run_trusted),
            override=None if override is None else bool(override),
            run_override=None if run_override is None else bool(run_override),
            rejoined=None if rejoined is None else str(rejoined),
            before_shift=bool(before),
        )


class Standing(NamedTuple):
    joins: bool
    why: In | Out


# How `history`'s baseline column and the report's hover say a standing: what a person acts on, short
# enough for an 80-column table.
MARKS: dict[In | Out, str] = {
    "passed": "in",
    "nightly": "in",
    "rejoined": "in (rejoined)",
    "accepted shift": "in (shift)",
    "trusted by hand": "in (by hand)",
    "failed": "OUT (failed)",
    "run failed": "OUT (run failed)",
    "untrusted by hand": "OUT (by hand)",
    "before shift": "OUT (pre-shift)",
}


def mark(found: Standing) -> str:
    """Whether a value is in its gate's baseline and why, in the words `history` and the report show."""
    return MARKS[found.why]


def standing(facts: Facts, baseline: Baseline) -> Standing:
    """Whether the row's values join the coordinate's baseline under `policy.baseline`, and why.

    Precedence, first that applies: trust set by hand on the gate, then on the run; a failed value that
    rejoined (its gate passed later, or an accepted shift took it in); the gate's own verdict; for rows
    written before trust per gate, the run's. `nightly` takes every row nobody untrusted by hand. Whatever
    the trust, nothing older than an accepted shift's first run joins: the level moved there.
    """
    hand = facts.override if facts.override is not None else facts.run_override
    found: Standing
    if hand is False:
        found = Standing(False, "untrusted by hand")
    elif hand is True:
        found = Standing(True, "trusted by hand")
    elif baseline == "nightly":
        found = Standing(True, "nightly")
    elif facts.rejoined is not None:
        found = Standing(True, "accepted shift" if facts.rejoined.startswith("shift") else "rejoined")
    elif facts.gate_trusted is not None:
        found = Standing(True, "passed") if facts.gate_trusted else Standing(False, "failed")
    else:
        found = Standing(True, "passed") if facts.run_trusted else Standing(False, "run failed")
    if found.joins and facts.before_shift:
        return Standing(False, "before shift")
    return found


def joins(facts: Facts, baseline: Baseline) -> bool:
    return standing(facts, baseline).joins


def cause(facts: Facts) -> Cause:
    """Why a row that does not join a `trusted` baseline is out, in the words of a stale-baseline warning."""
    if facts.override is False or facts.run_override is False:
        return "untrusted"
    if facts.gate_trusted is None and not facts.run_trusted:
        return "run untrusted"
    return "failed"


def joining(rows: Iterable[T], facts_of: Callable[[T], Facts], baseline: Baseline) -> Iterator[T]:
    """The rows of `rows` (newest first) whose values join the baseline, newest first. Stops at the
    first row older than an accepted shift: no older row can join."""
    for row in rows:
        facts = facts_of(row)
        if facts.before_shift:
            return
        if joins(facts, baseline):
            yield row


# What a write changes: the SQL of store/follow.py does the same to the stored rows
# (tests/test_one_baseline.py holds the two equal, night by night).


def rejoins(facts: Facts) -> bool:
    """Whether tonight's pass of the gate lets this row's failed values rejoin (`follow.rejoin`): a value
    its gate failed that nobody set by hand and that has not rejoined yet."""
    return facts.gate_trusted is False and facts.rejoined is None and facts.override is None


def rejoined(facts: Facts) -> Facts:
    return replace(facts, rejoined="recovered") if rejoins(facts) else facts


def taken_by_shift(facts: Facts, shift_pk: int) -> Facts:
    """A row of an accepted shift's runs (`follow.accept`): its values join from now on."""
    return facts if facts.rejoined is not None else replace(facts, rejoined=f"shift {shift_pk}")
