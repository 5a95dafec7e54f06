"""`gatecfg demo`: a newcomer's first run: seed history from the bundled nightlies, then judge a PR run."""

from __future__ import annotations

import hashlib
import shutil
import sys
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ruamel.yaml import YAML

from gatecfg import terminal
from gatecfg.commands.evaluate import banner
from gatecfg.errors import EXIT_OK
from gatecfg.evaluation import Request, run_evaluation
from gatecfg.report import render

DEMO_TEST = "tests/e2e/megatron/model_scripts/test_kimi_k3_4layer_ci.py"
REKEYED = "train/ppo_kl"


def _unpack(source: Traversable, into: Path) -> Path:
    """Copy a folder of package data to a real folder: evaluate reads files by path, and the commands the
    demo prints must work when the user runs them."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_dir():
            _unpack(item, into / item.name)
        else:
            (into / item.name).write_bytes(item.read_bytes())
    return into


def _pr_gates(gates: Path, into: Path) -> Path:
    """A copy of the gates in which the PR edits one default (its budget rule guards both directions
    instead of one): the kind of edit that silently re-keyed baselines in the system gatecfg replaces."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(gates, into)
    yaml = YAML()  # round-trip: comments and layout survive, like a human edit
    base = into / "base.yaml"
    data = yaml.load(base)
    data["defaults"][REKEYED]["constraint"]["budget"] = "both"
    with base.open("w", encoding="utf-8") as handle:
        yaml.dump(data, handle)
    return into


def demo(*, db_file: Path) -> int:
    """Everything the demo reads is package data (gatecfg/data/demo), unpacked beside `db_file`: the demo
    runs from any folder after `pip install 'gatecfg[store]'`."""
    work = db_file.parent / "demo"
    bundled = resources.files("gatecfg") / "data" / "demo"
    gates = _unpack(bundled / "gates", work / "gates")
    records = _unpack(bundled / "records", work / "records")
    nightlies = sorted((records / "nightly").glob("kimi_k3_4layer_night*.jsonl"))
    pr_record = records / "pr" / "kimi_k3_4layer_regressed.jsonl"
    db_file.unlink(missing_ok=True)  # the demo owns this file: every demo starts from empty history
    db = f"sqlite:///{db_file}"
    say = sys.stderr.write
    say(f"1. seeding {len(nightlies)} nightly runs into {db_file} (what `evaluate --write` does nightly)\n")
    for night, record in enumerate(nightlies, start=1):
        report = run_evaluation(
            Request(
                gates=gates,
                test=DEMO_TEST,
                records=[record],
                db=db,
                write=True,
                run_id=f"nightly-{night:02d}",
                commit=hashlib.sha1(f"demo-{night}".encode()).hexdigest()[:12],
                branch="main",
                # The demo's own scratch store, made afresh above: no baseline anyone gates against, so
                # the write policy (which would refuse these writes in CI) has nothing to guard.
                write_override="gatecfg demo seeds its own scratch store",
            )
        )
        say(f"   {record.name}: {'trusted' if report.run.trusted else 'untrusted'}\n")
    pr_gates = _pr_gates(gates, work / "gates-pr")
    say(
        "\n2. judging a PR run against that history (no --write: a PR never enters history).\n"
        f"   The PR also made `{REKEYED}` guard both directions (budget: up -> both) in "
        f"{pr_gates}/base.yaml:\n"
        f"   gatecfg evaluate --gates {pr_gates} --test {DEMO_TEST} \\\n"
        f"       --record {pr_record} --db {db}\n\n"
    )
    report = run_evaluation(
        Request(gates=pr_gates, test=DEMO_TEST, records=[pr_record], db=db, run_id="pr-demo")
    )
    if report.warnings:
        say(banner(report.warnings) + "\n\n")
    sys.stdout.write(render(report, "text", verbose=True, width=terminal.width()))  # a tour shows every table
    say(
        "\nWhat you see:\n"
        "  - train/grad_norm FAILS from step 5 on: a shadow gate (not enforced), so it is reported and\n"
        "    the exit code stays 0; with `enforce: true` such a failure fails the CI job (exit 1).\n"
        f"  - {REKEYED} is COLD: the PR's default change re-keyed it, so its 20 nightlies no longer count\n"
        "    and it cannot fail until a nightly stores the new key (the RE-KEY banner above says so).\n"
        "  - rollout/raw_reward and perf/actor_train_mfu are TRACKED: stored and compared, never failing.\n"
        f"\nThe history lives in {db_file}; try:\n"
        f"  gatecfg history --db {db} --test {DEMO_TEST} --metric train/grad_norm --step 5\n"
        f"  gatecfg resolve --gates {gates} --test {DEMO_TEST}\n"
    )
    return EXIT_OK
