"""Regenerate the demo's records (deterministic): `python gatecfg/data/demo/generate.py`.

Twenty nightly runs of the 4-layer MoE e2e test, 8 logged steps each, and one PR run whose
grad_norm blows up from step 5 on.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = 8


def row(rng: random.Random, step: int, *, grad_scale: float = 1.0) -> dict[str, float]:
    return {
        "_step": step,
        "train/grad_norm": round((2.6 - 0.08 * step + rng.gauss(0, 0.06)) * grad_scale, 5),
        "train/ppo_kl": round(0.012 + rng.gauss(0, 0.0006), 6),
        "train/train_rollout_logprob_abs_diff": round(0.031 + rng.gauss(0, 0.0015), 6),
        # A 4-layer model's reward is the mean of 16 coin flips: no signal, tracked only.
        "rollout/raw_reward": sum(rng.random() < 0.5 for _ in range(16)) / 16,
        "perf/actor_train_mfu": round(0.412 + rng.gauss(0, 0.004), 5),
        "train/train_rollout_kl": round(0.004 + rng.gauss(0, 0.0003), 6),
    }


def write(path: Path, rows: list[dict[str, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def main() -> None:
    rng = random.Random(20261130)
    for night in range(1, 21):
        rows = [row(rng, step) for step in range(STEPS)]
        write(HERE / "records" / "nightly" / f"kimi_k3_4layer_night{night:02d}.jsonl", rows)
    rows = [row(rng, step, grad_scale=3.0 if step >= 5 else 1.0) for step in range(STEPS)]
    write(HERE / "records" / "pr" / "kimi_k3_4layer_regressed.jsonl", rows)


if __name__ == "__main__":
    main()
