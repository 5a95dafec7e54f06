"""The light commands import no heavy library, and the analytics commands name their extra when it is missing.

`lint` runs in pre-commit on every commit and `--help` is the first thing a user types: both must start
in a fraction of a second, so they may not pull in numpy, SQLAlchemy or the analytics stack.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, run_cli, subprocess_env
from rekey_helpers import GSM8K, gsm8k_record, make_repo, seed_nightlies

# Top-level packages that no light command may import.
HEAVY = ("numpy", "sqlalchemy", "alembic", "scipy", "ruptures", "matplotlib", "PIL", "psycopg", "rich")

# Runs one command in a fresh interpreter and prints the heavy packages it imported.
PROBE = f"""
import json, sys
from gatecfg.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help exits through argparse
    code = exc.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


def probe(cwd: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--help"], id="help"),
        pytest.param(["lint", "gates/"], id="lint"),
        pytest.param(["lint", "gates/base.yaml", "--format", "json"], id="lint-file"),
        pytest.param(["resolve", "--format", "json"], id="resolve"),
        pytest.param(["schema", "--check"], id="schema"),
        pytest.param(["diff", "--base", "main"], id="diff"),
        pytest.param(["evaluate", "--help"], id="evaluate-help"),
    ],
)
def test_light_command_imports_no_heavy_package(tmp_path: Path, args: list[str]) -> None:
    root = make_repo(tmp_path / "repo")
    (root / "schema").symlink_to(REPO / "schema")
    result = probe(root, *args)
    assert result == {"code": 0, "heavy": []}


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    """The probe itself works: `history` reads the store, so SQLAlchemy is loaded."""
    root = make_repo(tmp_path / "repo")
    result = probe(root, "history", "--test", "t", "--metric", "m", "--db", f"sqlite:///{tmp_path}/h.db")
    assert "sqlalchemy" in result["heavy"]  # type: ignore[operator]


# What evaluating or finding the regimes of a SQLite history may not import: the store is read through
# sqlite3 (store/direct.py); SQLAlchemy and Alembic are for writes and for the other stores, scipy for
# nothing these commands do.
NOT_FOR_READS = {"sqlalchemy", "alembic", "scipy", "matplotlib", "PIL", "psycopg", "rich"}


@pytest.mark.parametrize(
    ("command", "extra", "heavy"),
    [
        pytest.param("evaluate", "", set(), id="evaluate"),
        pytest.param("regimes", "", set(), id="regimes"),
        # The probe sees SQLAlchemy where the store needs it: options in the URL go through its parsing.
        pytest.param("evaluate", "?timeout=5", {"sqlalchemy"}, id="evaluate-url-with-options"),
    ],
)
def test_reading_a_sqlite_history_imports_no_sqlalchemy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, extra: str, heavy: set[str]
) -> None:
    root = make_repo(tmp_path / "repo")
    monkeypatch.chdir(root)  # the nightlies are written under this repository's gates/
    db = f"sqlite:///{tmp_path / 'history.db'}"
    seed_nightlies(root, db)
    if command == "evaluate":
        args = ["--record", str(gsm8k_record(root / "tonight.jsonl", 0.61))]
    else:
        args = ["--metric", "rollout/raw_reward"]
    result = probe(root, command, "--test", GSM8K, *args, "--db", db + extra)
    assert result["code"] == 0
    assert set(result["heavy"]) & NOT_FOR_READS == heavy  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "command"),
    [
        pytest.param(["regimes", "--test", "t", "--metric", "m"], "gatecfg regimes", id="regimes"),
        pytest.param(["rebaseline", "--test", "t"], "gatecfg rebaseline", id="rebaseline"),
        pytest.param(["backtest"], "gatecfg backtest", id="backtest"),
        pytest.param(["report", "--html", "site"], "gatecfg report", id="report"),
        pytest.param(
            ["lint", "--max-false-alarm", "0.05"], "gatecfg lint --max-false-alarm", id="lint-budget"
        ),
    ],
)
def test_analytics_command_without_the_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, args: list[str], command: str
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "ruptures" else real(name, *rest)
    )
    result = run_cli(*args)
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines() == [
        f"{command}: error: needs the `analytics` extra, which is not installed (missing: ruptures)",
        "  hint: pip install 'gatecfg[analytics]'",
    ]


# `gatecfg ARGS` where the `store` extra's packages cannot be imported, as where only the core is
# installed (the pre-commit hook's environment).
CORE_ONLY = """
import sys
from gatecfg.extras import EXTRAS
class CoreOnly:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRAS["store"]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, CoreOnly())
from gatecfg.cli import main
sys.exit(main(sys.argv[1:]))
"""


def core_only(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CORE_ONLY, *args],
        cwd=cwd, env=subprocess_env(), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_the_core_install_is_what_lint_needs_and_no_more() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[ <>=;\[]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert core == {"pydantic", "ruamel.yaml", "ruamel.yaml.clib"}
    for extra, needs in project["optional-dependencies"].items():
        if extra not in ("store", "dev"):
            assert "gatecfg[store]" in needs, extra  # every other extra gives the commands it serves


def test_lint_runs_where_only_the_core_is_installed(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    done = core_only(root, "lint", "gates/")
    assert done.returncode == 0, done.stderr
    assert "files checked" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "command"),
    [
        pytest.param(["evaluate", "--test", GSM8K, "--record", "r.jsonl"], "gatecfg evaluate", id="evaluate"),
        pytest.param(["history", "--test", "t", "--metric", "m"], "gatecfg history", id="history"),
        pytest.param(["demo"], "gatecfg demo", id="demo"),
    ],
)
def test_a_store_command_where_only_the_core_is_installed_names_the_extra(
    tmp_path: Path, args: list[str], command: str
) -> None:
    root = make_repo(tmp_path / "repo")
    gsm8k_record(root / "r.jsonl", 0.61)
    done = core_only(root, *args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    first, hint = done.stderr.splitlines()
    found = re.fullmatch(
        rf"{command}: error: needs the `store` extra, which is not installed \(missing: (\w+)\)", first
    )
    assert found is not None, first
    assert found.group(1) in ("numpy", "sqlalchemy", "alembic", "rich", "orjson")
    assert hint == "  hint: pip install 'gatecfg[store]'"


# `python -m gatecfg ARGS` with an exit handler that says whether the interpreter's teardown ran.
TEARDOWN_PROBE = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write("TEARDOWN RAN"))
sys.argv = ["gatecfg", *sys.argv[1:]]
runpy.run_module("gatecfg", run_name="__main__")
"""


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(["resolve", "--format", "json"], 0, id="exit-0"),
        pytest.param(["resolve", "--gates", "missing", "--format", "json"], 2, id="exit-2"),
    ],
)
def test_the_command_ends_without_the_interpreters_teardown_its_output_whole(
    tmp_path: Path, args: list[str], code: int
) -> None:
    root = make_repo(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-c", TEARDOWN_PROBE, *args],
        cwd=root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == code
    assert "TEARDOWN RAN" not in done.stderr
    if code == 0:
        assert len(done.stdout) > 8192  # more than a stream buffer: the flush is what brings the rest out
        assert json.loads(done.stdout)
    else:
        assert done.stderr.startswith("missing")
