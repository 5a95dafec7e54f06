"""A temporary git repository holding a copy of this project's own `gates/`, with nightlies to seed a store:
the setting of the re-key guard's end-to-end tests (test_diff, test_carry, test_prune)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from helpers import REPO, run_cli

GSM8K = "tests/e2e/fully_async/test_gsm8k_fully_async_ci.py"
KIMI = "tests/e2e/megatron/model_scripts/test_kimi_k3_4layer_ci.py"
KIMI_LORA = "tests/e2e/megatron/model_scripts/test_kimi_k3_4layer_lora_ci.py"
# The raw_reward default as these tests write it into their copy of gates/base.yaml (a rel/abs band, whose
# edges they check), and the edit that re-keys every gate inheriting it.
SHIPPED_RAW_REWARD = "constraint: {budget: down}"
RAW_REWARD_DEFAULT = "constraint: {rel_down: 0.2, abs_floor_down: 0.05}"
RAW_REWARD_EDITED = "constraint: {rel_down: 0.25, abs_floor_down: 0.05}"
GSM8K_FILE = "gates/fully_async/test_gsm8k_fully_async_ci.yaml"
NIGHTS = 5
NIGHT_REWARDS = [0.5, 0.52, 0.54, 0.5, 0.52]  # mean 0.516


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def make_repo(root: Path) -> Path:
    """A git repository at `root` whose one commit holds a copy of the project's `gates/` on `main`, its
    raw_reward default written as the band RAW_REWARD_DEFAULT."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    shutil.copytree(REPO / "gates", root / "gates")
    edit(root / "gates" / "base.yaml", SHIPPED_RAW_REWARD, RAW_REWARD_DEFAULT)
    git(root, "add", "gates")
    git(root, "commit", "-q", "-m", "the project's gates")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not written exactly once in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def line_of(path: Path, needle: str) -> int:
    """The 1-based line that holds `needle` (once) in `path`."""
    lines = [n for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in text]
    assert len(lines) == 1, f"{needle!r} is on lines {lines} of {path}"
    return lines[0]


def gsm8k_record(path: Path, reward: float) -> Path:
    """A record with every metric the gsm8k gate file declares; `reward` is raw_reward's last point."""
    rows = {
        "eval/all/avg_score": [[0, 0.6], [1, 0.62]],
        "rollout/raw_reward": [[0, 0.4], [1, reward]],
        "train/grad_norm": [[0, 1.0], [1, 1.1]],
        "perf/actor_train_mfu": [[1, 0.41]],
    }
    path.write_text("".join(json.dumps({k: v}) + "\n" for k, v in rows.items()), encoding="utf-8")
    return path


def seed_nightlies(repo: Path, db: str) -> None:
    """NIGHTS trusted nightlies of the gsm8k test, written under the gate tree as it is now."""
    for night, reward in enumerate(NIGHT_REWARDS):
        record = gsm8k_record(repo / f"night{night}.jsonl", reward)
        result = run_cli(
            "evaluate", "--test", GSM8K, "--record", record, "--db", db, "--write",
            "--run-id", f"night-{night}", "--commit", f"c{night}",
        )  # fmt: skip
        assert result.code == 0, result.err
