"""Each stored run's trust as a replay would decide it, found in bulk: every gate's runs judged together,
a block of runs at a time, in rounds (`BulkTrust`), so that a replay reporting some gates need not judge
every other gate run by run only to know which runs form baselines."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gatecfg.analysis.matrix import GateMatrix
from gatecfg.resolve import Policy, ResolvedTest
from gatecfg.store import STATUSES
from gatecfg.verdicts import tolerates

if TYPE_CHECKING:
    from gatecfg.analysis.replayer import StoredRun

# Rounds of `BulkTrust.trust` before it leaves a history to the run-by-run replay; a round judges the runs
# of a block from the first one whose trust is not yet known.
TRUST_ROUNDS = 6
# Stored values of a block of runs judged together (every gate's), which bounds BulkTrust's memory.
RUN_BLOCK_VALUES = 2_000_000
# Window values a judged part of a block gathers at once (x 8 bytes).
BLOCK_VALUES = 4_000_000


class BulkTrust:
    """Each run's trust as judging `runs` (one series, oldest first) one by one under `test` decides it,
    each gate's runs judged together (`GateMatrix`), a block of runs at a time.

    Under `baseline: trusted` a run's window rests on the trust of the runs before it, which rests on
    their verdicts. A round judges the runs of a block given a guess of their trust: the first run the
    guess gets wrong is judged right (every run before it was guessed right), so the next round, guessing
    what this one found, need judge only the runs after it; a round that finds its own guess is the
    replay's answer for the block. Starting from "trusted unless set by hand", a block nearly always takes
    one round, and that round judges its runs exactly as `baseline: nightly` does: rounds are kept, so
    that the replays under both policies judge them once. Between blocks a gate carries only each step's
    newest `window` values that join baselines (`GateMatrix.tail`), so memory does not grow with history.
    """

    def __init__(self, test: ResolvedTest, runs: Sequence[StoredRun]) -> None:
        self.test = test
        self.runs = runs
        self._hand = np.array([run.trust_override is not None for run in runs], bool)
        self._given = np.array([bool(run.trust_override) for run in runs], bool)
        self._gates = [gate for gate in test.gates if gate.gated]
        self._blocked: dict[tuple[int, bytes, int, int, str, float], npt.NDArray[np.bool_]] = {}

    def trust(self, policy: Policy) -> list[bool] | None:
        """Each run's trust; None when a block takes more than TRUST_ROUNDS rounds."""
        found = np.where(self._hand, self._given, True)
        by_hand = ~(self._hand & ~self._given)  # the runs `baseline: nightly` pools
        tails: dict[str, GateMatrix | None] = {gate.metric: None for gate in self._gates}
        for start, stop in self._blocks():
            matrices = [
                GateMatrix.stored(
                    gate, [run.values.get((gate.metric, gate.steps_key)) for run in self.runs[start:stop]]
                ).after(tails[gate.metric])
                for gate in self._gates
            ]
            blocked = np.zeros(stop - start, bool)
            settled = 0  # runs of the block whose trust is known
            for _ in range(TRUST_ROUNDS):
                qualifies = found if policy.baseline == "trusted" else by_hand
                blocked[settled:] = self._judged(matrices, qualifies[:stop], policy, start, settled)
                block = np.where(self._hand[start:stop], self._given[start:stop], ~blocked)
                wrong = np.flatnonzero(block != found[start:stop])
                found[start:stop] = block
                if policy.baseline != "trusted" or not len(wrong):
                    break
                settled = int(wrong[0]) + 1
            else:
                return None
            pooled = (found if policy.baseline == "trusted" else by_hand)[start:stop]
            for gate, matrix in zip(self._gates, matrices, strict=True):
                carried = len(matrix.values) - (stop - start)
                tails[gate.metric] = matrix.tail(
                    np.concatenate([np.ones(carried, bool), pooled]), policy.window
                )
        return found.tolist()  # type: ignore[no-any-return]

    def _blocks(self) -> Iterator[tuple[int, int]]:
        """(start, stop) of consecutive runs holding about RUN_BLOCK_VALUES values."""
        start, size = 0, 0
        for at, run in enumerate(self.runs):
            size += sum(map(len, run.values.values()))
            if size >= RUN_BLOCK_VALUES:
                yield start, at + 1
                start, size = at + 1, 0
        if start < len(self.runs):
            yield start, len(self.runs)

    def _judged(
        self,
        matrices: Sequence[GateMatrix],
        qualifies: npt.NDArray[np.bool_],
        policy: Policy,
        start: int,
        settled: int,
    ) -> npt.NDArray[np.bool_]:
        """Per run of the block from its `settled`-th: whether a gate keeps it from being trusted, given
        which runs up to the block's end join baselines (`qualifies`, from the first run on)."""
        # What verdicts rest on besides the windows' runs (`baseline` only chooses those runs); the runs
        # before the block enter through the tails, which rest on their qualification alone.
        key = (
            start + settled,
            qualifies.tobytes(),
            policy.window,
            policy.min_history,
            policy.reference,
            policy.false_alarm,
        )
        found = self._blocked.get(key)
        if found is None:
            found = np.zeros(len(qualifies) - start - settled, bool)
            for matrix in matrices:
                carried = len(matrix.values) - (len(qualifies) - start)
                pooled = np.concatenate([np.ones(carried, bool), qualifies[start:]])
                found |= _blocked(matrix, pooled, policy, np.arange(carried + settled, len(matrix.values)))
            self._blocked[key] = found
        return found


def bulk_trust(test: ResolvedTest, runs: Sequence[StoredRun], policy: Policy) -> list[bool] | None:
    """`BulkTrust(test, runs).trust(policy)`."""
    return BulkTrust(test, runs).trust(policy)


def _blocked(
    matrix: GateMatrix, qualifies: npt.NDArray[np.bool_], policy: Policy, runs: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Per run of `runs` (row indices, ascending): whether the gate keeps it from being trusted (a failing
    or erroring step, not tolerated), given which rows join baselines."""
    blocked = np.zeros(len(runs), bool)
    gate = matrix.gate
    if gate.constraint is not None and gate.constraint.budget is not None:
        for k, run in enumerate(runs.tolist()):
            judged = matrix.night(qualifies, policy, run)
            blocked[k] = judged is not None and judged.blocks_trust
        return blocked
    block = max(1, BLOCK_VALUES // max(1, len(matrix.steps) * policy.window))
    for start in range(0, len(runs), block):
        part = runs[start : start + block]
        judged, rows = matrix.verdicts(qualifies, policy, part)
        at = np.searchsorted(part, rows)  # each cell's run, as its index in `part`
        count = {
            status: np.bincount(at[judged.codes == STATUSES.index(status)], minlength=len(part))
            for status in ("fail", "pass", "error")
        }
        for k in np.flatnonzero(np.bincount(at, minlength=len(part))).tolist():
            failing = int(count["fail"][k])
            tolerated = tolerates(gate, failing=failing, judged=failing + int(count["pass"][k]))
            blocked[start + k] = count["error"][k] > 0 or (failing > 0 and not tolerated)
    return blocked
