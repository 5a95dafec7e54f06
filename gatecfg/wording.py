"""How counts and names read in messages: a count with its noun in the right number (`1 run`, `2 runs`),
and the near matches of a name that matches nothing (`did you mean `train/ppo_KL`?`), so that every
command words a typo the same way."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

NEAR_MATCHES = 3  # names a hint offers
NEAR_CUTOFF = 0.6  # difflib's ratio below which a name is not "near"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 runs`; `many` for a noun whose plural is not noun + s (`nightlies`)."""
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


def near_matches(name: str, candidates: Iterable[str], *, n: int = NEAR_MATCHES) -> list[str]:
    """The candidates nearest to `name`, best first: one that differs only in case before any other
    (`train/ppo_KL` for `train/ppo_kl`), then difflib's close matches compared without case."""
    known = sorted(set(candidates))
    folded: dict[str, list[str]] = {}
    for candidate in known:
        folded.setdefault(candidate.casefold(), []).append(candidate)
    key = name.casefold()
    same_case = [c for c in folded.get(key, []) if c != name]
    # difflib.get_close_matches, with ties in name order (it breaks them backwards).
    matcher = difflib.SequenceMatcher(b=key)
    scored = []
    for other in folded:
        matcher.set_seq1(other)
        if other != key and matcher.quick_ratio() >= NEAR_CUTOFF and matcher.ratio() >= NEAR_CUTOFF:
            scored.append((-matcher.ratio(), other))
    close = [c for _, other in sorted(scored) for c in folded[other]]
    return (same_case + close)[:n]


def did_you_mean(name: str, candidates: Iterable[str], *, n: int = 1) -> str | None:
    """`did you mean `train/ppo_KL`?` (with `n` > 1, `one of `a`, `b`?` when several are near) when a
    candidate is near `name`, else None."""
    found = near_matches(name, candidates, n=n)
    if not found:
        return None
    if len(found) == 1:
        return f"did you mean `{found[0]}`?"
    return "did you mean one of " + ", ".join(f"`{c}`" for c in found) + "?"
