"""No output can overwrite what a command reads (gatecfg.outputs): `evaluate --output`, `--report FMT=FILE`,
`demo --db-file`, `schema --dir` and `report --html` never replace the SQLite store (under any spelling:
a symlink, `..`, a hard link, a store the first write creates), the record being judged, a gate file or
the settings file; the refusal exits 2 naming the flag and the file, and nothing is written."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from helpers import CliResult, run_cli

from gatecfg.outputs import Reads, collision, store_file
from gatecfg.store import Store

TEST = "tests/t_ci.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the working directory) with gates/, a record and a store holding one run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATECFG_DB_URL", raising=False)
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "base.yaml").write_text("version: 1\n")
    gate = {"test": TEST, "gates": {"eval/score": {"steps": "last", "constraint": {"rel_down": 0.5}}}}
    (gates / "t.yaml").write_text(json.dumps(gate))
    (tmp_path / "r.jsonl").write_text('{"_step": 0, "eval/score": 0.5}\n')
    assert _evaluate("--write", "--run-id", "first").code == 0
    return tmp_path


def _evaluate(*extra: str | Path, db: str = "sqlite:///h.db") -> CliResult:
    argv = ["evaluate", "--gates", "gates", "--test", TEST, "--record", "r.jsonl", "--db", db]
    return run_cli(*argv, *extra)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _runs(url: str = "sqlite:///h.db") -> list[str]:
    with Store.open(url) as store:
        return [row.run.run_id for row in store.runs()]


def _link(project: Path, how: str, target: str) -> str:
    """Another name for `target`: itself, another spelling, a symlink, a hard link."""
    if how == "same":
        return target
    if how == "spelling":
        (project / "sub").mkdir(exist_ok=True)
        return f"sub/../{target}"
    name = f"alias-{how}"
    if how == "symlink":
        (project / name).symlink_to(project / target)
    else:
        os.link(project / target, project / name)
    return name


HOWS = ["same", "spelling", "symlink", "hardlink"]
TARGETS = [
    ("h.db", "the history store"),
    ("r.jsonl", "a record being judged"),
    ("gates/t.yaml", "a gate file"),
    ("gates/base.yaml", "a gate file"),
]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize(("target", "what"), TARGETS, ids=[t for t, _ in TARGETS])
@pytest.mark.parametrize("flag", ["--output", "--report"])
def test_an_output_over_a_file_evaluate_reads_is_refused_and_nothing_is_written(
    project: Path, how: str, target: str, what: str, flag: str
) -> None:
    name = _link(project, how, target)
    before = _digests(project)
    given = [flag, name] if flag == "--output" else ["--format", "json", flag, f"json={name}"]
    result = _evaluate("--write", "--run-id", "second", *given)
    assert result.code == 2, result.err
    assert result.err.startswith(f"{flag}: error: `{name}` is {what}"), result.err
    assert "nothing was written" in result.err
    assert _digests(project) == before
    assert _runs() == ["first"]


def test_a_report_over_the_store_the_first_write_would_create_is_refused(project: Path) -> None:
    result = _evaluate("--write", "--report", "json=new.db", db="sqlite:///new.db")
    assert result.code == 2
    assert "`new.db` is the history store" in result.err
    assert not (project / "new.db").exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_an_output_over_the_stores_journal_files_is_refused(project: Path, suffix: str) -> None:
    result = _evaluate("--output", f"h.db{suffix}")
    assert result.code == 2
    assert f"the history store's `{suffix}` file" in result.err


@pytest.mark.parametrize("name", [".gatecfg.toml", "pyproject.toml"])
def test_an_output_over_the_settings_file_being_read_is_refused(project: Path, name: str) -> None:
    table = "" if name == ".gatecfg.toml" else "[tool.gatecfg]\n"
    (project / name).write_text(f'{table}db = "h.db"\n')
    before = (project / name).read_bytes()
    result = run_cli("evaluate", "--test", TEST, "--record", "r.jsonl", "--output", name)
    assert result.code == 2
    assert f"`{name}` is the settings file being read" in result.err
    assert (project / name).read_bytes() == before


def test_a_new_yaml_file_in_the_gates_tree_is_refused_a_report_beside_it_is_not(project: Path) -> None:
    refused = _evaluate("--output", "gates/report.yaml")
    assert refused.code == 2
    assert "a gate file under the gates root" in refused.err
    assert not (project / "gates" / "report.yaml").exists()
    allowed = _evaluate("--format", "json", "--output", "gates/report.json")
    assert allowed.code == 0, allowed.err
    assert json.loads((project / "gates" / "report.json").read_text())["test"] == TEST


def test_two_outputs_of_one_file_are_refused(project: Path) -> None:
    result = _evaluate("--output", "out.txt", "--report", "junit=sub/../out.txt")
    assert result.code == 2
    assert "`sub/../out.txt` is also the file of --output" in result.err
    assert not (project / "out.txt").exists()


def test_a_step_summary_that_is_the_store_is_a_warning_and_the_store_is_intact(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project / "h.db"))
    before = (project / "h.db").read_bytes()
    result = _evaluate()
    assert result.code == 0, result.err
    assert "is the history store: the markdown summary is not appended to it" in result.err
    assert (project / "h.db").read_bytes() == before


def test_demo_refuses_a_db_file_that_is_the_projects_store(project: Path) -> None:
    (project / ".gatecfg.toml").write_text('db = "h.db"\n')
    result = run_cli("demo", "--db-file", "h.db")
    assert result.code == 2
    assert result.err.startswith("--db-file: error: `h.db` is the history store")
    assert _runs() == ["first"]


def test_schema_refuses_to_write_over_the_store(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATECFG_DB_URL", "sqlite:///h.db")
    (project / "out").mkdir()
    os.link(project / "h.db", project / "out" / "base.schema.json")
    result = run_cli("schema", "--dir", "out")
    assert result.code == 2, result.err
    assert "is the history store" in result.err
    assert _runs() == ["first"]


def test_report_refuses_an_index_page_over_the_store(project: Path) -> None:
    pytest.importorskip("matplotlib")
    (project / "site").mkdir()
    (project / "site" / "index.html").symlink_to(project / "h.db")
    result = run_cli("report", "--html", "site", "--gates", "gates", "--db", "sqlite:///h.db")
    assert result.code == 2, result.err
    assert result.err.startswith("--html: error: `site/index.html` is the history store")
    assert _runs() == ["first"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///h.db", "h.db"),
        ("sqlite:////abs/h.db", "/abs/h.db"),
        ("sqlite+pysqlite:///dir/h.db?timeout=5", "dir/h.db"),
        ("sqlite:///my%20store.db", "my store.db"),
        ("sqlite:///file:h.db?mode=ro&uri=true", "h.db"),
        ("sqlite:///file:///abs/h.db?uri=true", "/abs/h.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite://h.db", None),
        ("postgresql+psycopg://u@host/db", None),
    ],
)
def test_the_file_of_a_store_url(url: str, expected: str | None) -> None:
    found = store_file(url)
    assert (None if found is None else str(found)) == expected


def test_a_file_of_its_own_collides_with_nothing(tmp_path: Path) -> None:
    (tmp_path / "h.db").write_text("")
    reads = Reads(store=f"sqlite:///{tmp_path / 'h.db'}", records=[tmp_path / "r.jsonl"], gates=tmp_path)
    assert collision(tmp_path / "report.json", reads) is None
    assert collision(tmp_path / "h.db", reads) == "the history store"


def test_a_gate_file_linked_from_elsewhere_is_protected_where_it_lives(tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    (tmp_path / "shared.yaml").write_text("test: t\n")
    (gates / "t.yaml").symlink_to(tmp_path / "shared.yaml")
    assert collision(tmp_path / "shared.yaml", Reads(gates=gates)) == "a gate file being read"
