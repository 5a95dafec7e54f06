"""Install anywhere: what the wheel carries, and the commands a user has with only the installed package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from gatecfg.cli_commands.schema import SCHEMA_NAMES
from gatecfg.commands.schema import SCHEMAS
from gatecfg.yamlio import load_yaml

DEMO_TEST = "tests/e2e/megatron/model_scripts/test_kimi_k3_4layer_ci.py"


def test_schema_names_of_the_cli_are_the_schema_files() -> None:
    assert sorted(f"{name}.schema.json" for name in SCHEMA_NAMES) == sorted(SCHEMAS)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_print_writes_the_committed_schema_to_stdout(name: str) -> None:
    result = run_cli("schema", "--print", name)
    assert result.code == 0
    assert result.out == (REPO / "schema" / f"{name}.schema.json").read_text(encoding="utf-8")


def test_the_demo_data_is_package_data() -> None:
    demo = resources.files("gatecfg") / "data" / "demo"
    assert (demo / "gates" / "base.yaml").is_file()
    assert len([f for f in (demo / "records" / "nightly").iterdir() if f.name.endswith(".jsonl")]) == 20
    assert (demo / "records" / "pr" / "kimi_k3_4layer_regressed.jsonl").is_file()


@pytest.mark.parametrize("name", ["base.yaml", "megatron/test_kimi_k3_4layer_ci.yaml"])
def test_the_demo_gates_are_the_projects_gates(name: str) -> None:
    """The demo shows this project's defaults: a change to gates/ is copied to the package data too."""
    demo = resources.files("gatecfg") / "data" / "demo" / "gates" / name
    assert (
        load_yaml(demo.read_text(encoding="utf-8"), name).data
        == load_yaml((REPO / "gates" / name).read_text(encoding="utf-8"), name).data
    )


def test_the_demo_gates_lint_clean() -> None:
    gates = Path(str(resources.files("gatecfg") / "data" / "demo" / "gates"))
    result = run_cli("lint", "--gates", gates)
    assert (result.code, result.out) == (0, "")


def test_the_demo_runs_from_an_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    result = run_cli("demo")
    assert result.code == 0, result.err
    assert "RE-KEY: 1 gate(s) lost their baseline" in result.err
    # the last table: one row per gate
    statuses = {line.split()[2]: line.split()[0] for line in result.out.splitlines() if " shadow " in line}
    assert statuses["train/grad_norm"] == "FAIL"
    assert statuses["train/ppo_kl"] == "COLD"
    # The commands the demo prints work as printed.
    again = run_cli("resolve", "--gates", ".gatecfg/demo/gates", "--test", DEMO_TEST)
    assert again.code == 0, again.err


def test_help_texts_point_at_nothing_only_a_checkout_has() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gatecfg", "--help"], capture_output=True, text=True, check=True
    )
    assert "docs/" not in result.stdout
    assert "gatecfg COMMAND --help" in result.stdout


@pytest.mark.slow
def test_the_wheel_carries_the_package_data(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("gatecfg-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "gatecfg/py.typed",
        "gatecfg/data/schema/base.schema.json",
        "gatecfg/data/schema/gatefile.schema.json",
        "gatecfg/data/demo/gates/base.yaml",
        "gatecfg/data/demo/gates/megatron/test_kimi_k3_4layer_ci.yaml",
        "gatecfg/data/demo/records/pr/kimi_k3_4layer_regressed.jsonl",
        "gatecfg/store/migrations/versions/0001_initial.py",
        # the report's charts, inline in every test page (the page fetches nothing), with uPlot's licence
        "gatecfg/data/report/uPlot.iife.min.js",
        "gatecfg/data/report/uPlot.min.css",
        "gatecfg/data/report/uPlot.LICENSE",
        "gatecfg/data/report/charts.js",
    } <= names
    assert len([n for n in names if n.startswith("gatecfg/data/demo/records/nightly/")]) == 20
    assert "gatecfg/data/demo/generate.py" not in names
