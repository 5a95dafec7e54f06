"""`gatecfg alerts` on real Megatron-LM golden values (issue 37): which commits show as one alert across
their test cases, and what their subjects say.

    python benchmarks/alerts_goldens.py [--megatron /work/shared/real/megatron-goldens] [--json]

Every version of every golden-values file (`versions.jsonl.gz`, 50 files, 415 versions) is replayed as a
nightly `evaluate --write` of its test case (the file), at its commit and on its commit's time, in time
order, into one SQLite store. The gates are the ones benchmarks/real_baselines.py chose for these
metrics before looking at what they flag (`{budget: DIRECTION, min_change: X}` per metric, its docstring
says why), under the project's policy. After each commit's versions, `gatecfg alerts` is read: each new
alert is printed with its tests and the commit's subject, then acknowledged as `intended`, since every
version of a golden file is a deliberate refresh: the next commit starts from the new level, as a team
that triaged each refresh once would.

The table: per alert, the commit, its tests (and how many files that commit refreshed), and whether its
subject names a container or toolchain change (real_baselines.BUMP). A minute or two on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_baselines import BUMP, MEGATRON_METRICS, curve_of, load_goldens

import gatecfg
from gatecfg.alerts import group
from gatecfg.commands.alerts import identity
from gatecfg.store import Store

REAL = Path("/work/shared/real/megatron-goldens")
POLICY = """\
policy:
  window: 60
  min_history: 1
  false_alarm: 0.01
  accept_shift_after: 5
  missing: fail
  same_code: warn
"""


def write_gates(root: Path, test: str, metrics: list[str]) -> Path:
    """A gates root for one test case: its metrics gated as real_baselines.MEGATRON_METRICS says."""
    root.mkdir(parents=True)
    lines = []
    for m in metrics:
        golden = MEGATRON_METRICS[m]
        lines.append(
            f'  "{m}":\n    steps: all\n'
            f'    constraint: {{budget: {golden.direction}, min_change: "{golden.min_change}"}}\n'
        )
    (root / "base.yaml").write_text(f"version: 1\n{POLICY}", encoding="utf-8")
    (root / "gate.yaml").write_text(f'test: "{test}"\ngates:\n{"".join(lines)}', encoding="utf-8")
    return root


def replay(folder: Path, work: Path) -> dict[str, Any]:
    versions = load_goldens(folder)
    db = f"sqlite:///{work / 'history.db'}"
    roots = {}
    for i, (test, history) in enumerate(sorted(versions.items())):
        metrics = sorted({m for v in history for m in v["metrics"] if m in MEGATRON_METRICS})
        roots[test] = write_gates(work / "gates" / f"t{i:02d}", test, metrics)
    by_commit: dict[tuple[int, str], list[tuple[str, dict[str, Any]]]] = {}
    for test, history in versions.items():
        for v in history:
            by_commit.setdefault((int(v["time"]), v["commit"]), []).append((test, v))
    subjects = {commit: vs[0][1]["subject"] for (_, commit), vs in by_commit.items()}
    alerts: list[dict[str, Any]] = []
    seen: set[str] = set()
    nights = 0
    started = time.perf_counter()
    for (at, commit), listed in sorted(by_commit.items()):
        for test, v in listed:
            record = {
                m: sorted(curve_of(v, m).items())
                for m in v["metrics"]
                if m in MEGATRON_METRICS and curve_of(v, m)
            }
            gatecfg.evaluate(
                test,
                record,
                gates=roots[test],
                db=db,
                write=True,
                run_id=f"{commit}-{test}",
                commit=commit,
                date=datetime.fromtimestamp(at, UTC),
            )
            nights += 1
        with Store.open(db) as store:
            found = store.alerts()
            groups = group(found.gates, found.history, found.width)
            for g in groups:
                if g.id in seen or g.decision is not None:
                    continue
                seen.add(g.id)
                alerts.append(
                    {
                        "alert": g.id,
                        "commit": g.cause.commit,
                        "night": g.cause.night,
                        "tests": len(g.tests),
                        "gates": len(g.gates),
                        "refreshed": len(by_commit[next(k for k in by_commit if k[1] == g.cause.commit)]),
                        "bump": bool(BUMP.search(subjects.get(g.cause.commit or "", ""))),
                        "subject": subjects.get(g.cause.commit or "", "?"),
                        "evidence": g.evidence,
                    }
                )

                def chosen(snap: Any, g: Any = g) -> Any:
                    return g.cause, [x for x in g.gates if x.decision is None]

                store.decide(
                    chosen, verdict="intended", reason="a golden-values refresh", link=None, who=identity()
                )
    commits = {commit for _, commit in by_commit}
    bumps = {c for c in commits if BUMP.search(subjects[c])}
    multi = {c for (_, c), vs in by_commit.items() if len(vs) >= 2}
    grouped = {a["commit"] for a in alerts}
    return {
        "versions": nights,
        "commits": len(commits),
        "seconds": time.perf_counter() - started,
        "alerts": alerts,
        "bump_commits": len(bumps),
        "bump_commits_refreshing_2_or_more": len(bumps & multi),
        "bump_commits_shown": len(bumps & grouped),
        "bump_commits_refreshing_2_or_more_shown": len(bumps & multi & grouped),
        "other_commits_shown": len(grouped - bumps),
        "other_commits": len(commits - bumps),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['versions']} versions at {result['commits']} commits replayed as nightlies "
        f"in {result['seconds']:.0f} s; {len(result['alerts'])} alerts",
        "",
        "| alert | night | commit | tests (files the commit refreshed) | gates | bump | commit subject |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in result["alerts"]:
        lines.append(
            f"| {a['alert']} | {a['night']} | {a['commit']} | {a['tests']} ({a['refreshed']}) | "
            f"{a['gates']} | {'yes' if a['bump'] else ''} | {a['subject'][:80]} |"
        )
    lines += [
        "",
        f"container/toolchain commits (subject names a bump): {result['bump_commits']}, of which "
        f"{result['bump_commits_shown']} showed as an alert naming the commit; of the "
        f"{result['bump_commits_refreshing_2_or_more']} that refreshed 2 files or more, "
        f"{result['bump_commits_refreshing_2_or_more_shown']} did",
        f"other commits: {result['other_commits']}, of which {result['other_commits_shown']} showed "
        "as an alert",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megatron", type=Path, default=REAL, help="folder holding versions.jsonl.gz")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        result = replay(args.megatron, Path(work))
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
