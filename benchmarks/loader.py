"""How long the gate-file loader takes on large honest files and on hostile ones (issue 11, class 5).

    python benchmarks/loader.py            # 1 MB and 5 MB honest files, and the hostile shapes
    python benchmarks/loader.py --mb 1     # a quick run

Each line prints the case, the file's size, the wall and CPU seconds `load_yaml` took (best of --repeat),
and what it returned: `ok` with the number of values, or the first line of the error it raised. Honest
files are gate files with many gates (`gates`), or one gate with a long list of steps (`steps`); the
hostile ones are chained merge keys, a self-merge, nested aliases (billion laughs) and a file past the
size limit.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from gatecfg.errors import InputError
from gatecfg.yamlio import MAX_BYTES, load_yaml


def many_gates(size: int) -> str:
    lines = ["test: tests/e2e/test_big_ci.py", "gates:"]
    total, i = 0, 0
    while total < size:
        block = (
            f"  train/metric_{i}:\n"
            "    steps: [0, 100, 200, 300, 400, 500]\n"
            "    constraint: {rel_up: 0.5, abs_floor_up: 0.1, rel_down: 0.8, abs_floor_down: 0.1}\n"
            "    limits: {min: 0.0, max: 10.0}  # hand-set\n"
        )
        lines.append(block.rstrip("\n"))
        total += len(block)
        i += 1
    return "\n".join(lines) + "\n"


def long_steps(size: int) -> str:
    head = "test: tests/e2e/test_big_ci.py\ngates:\n  train/grad_norm:\n    steps:\n"
    count = max(1, (size - len(head)) // 14)
    return head + "".join(f"      - {i}\n" for i in range(count))


def chained_merges(lines: int) -> str:
    out = ["a0: &a0 {x: 1, y: 2}"]
    for i in range(1, lines):
        out.append(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}")
    return "\n".join(out) + "\n"


def self_merge() -> str:
    return "a: &a\n  x: 1\n  <<: *a\n"


def laughs(levels: int) -> str:
    out = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        out.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(out) + "\n"


def run(name: str, make: Callable[[], str], repeat: int) -> None:
    text = make()
    data = text.encode("utf-8")
    best, best_cpu = float("inf"), float("inf")
    outcome = ""
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            doc = load_yaml(data, f"{name}.yaml")
            outcome = f"ok, {len(doc.values)} values"
        except InputError as exc:
            outcome = "error: " + exc.problems[0].message
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    print(f"{name:<28} {len(data) / 1e6:8.2f} MB {best:8.3f} s {best_cpu:8.3f} s  {outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, nargs="*", default=[1.0, 5.0], help="honest file sizes in MB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # CPU seconds beside wall seconds: on a shared machine the wall clock measures the neighbours too.
    print(f"{'case':<28} {'size':>11} {'wall':>10} {'cpu':>10}  outcome")
    for mb in args.mb:
        size = int(mb * 1e6)
        run(f"gates-{mb:g}MB", lambda size=size: many_gates(size), args.repeat)
        run(f"steps-{mb:g}MB", lambda size=size: long_steps(size), args.repeat)
    run("chained-merges-40-lines", lambda: chained_merges(40), args.repeat)
    run("self-merge", self_merge, args.repeat)
    run("laughs-9-levels", lambda: laughs(9), args.repeat)
    run("over-the-size-limit", lambda: long_steps(MAX_BYTES + 1000), 1)


if __name__ == "__main__":
    main()
