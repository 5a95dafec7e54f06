"""`gatecfg diff --base REV` end to end, in a temporary git repository holding a copy of the project's gates.

The "done means" of the re-key guard: editing `rel_down` of `rollout/raw_reward` in `gates/base.yaml` names
that line, the old and new value and every test that inherits it; with a store, the orphaned counts; an
evaluate after the edit prints the banner and a warning in every report format.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import REPO, run_cli
from rekey_helpers import (
    GSM8K,
    GSM8K_FILE,
    KIMI,
    KIMI_LORA,
    NIGHTS,
    RAW_REWARD_DEFAULT,
    RAW_REWARD_EDITED,
    edit,
    git,
    gsm8k_record,
    line_of,
    make_repo,
    seed_nightlies,
)
from ruamel.yaml import YAML

from gatecfg.cli import build_parser
from gatecfg.resolve import load_tree


def inheritors(repo: Path, metric: str, field: str) -> set[str]:
    """Tests whose gate for `metric` takes `field` from gates/base.yaml, by resolving the tree."""
    tree = load_tree(repo / "gates")
    return {
        t.test
        for t in tree.tests.values()
        for g in t.gates
        if g.metric == metric and g.sources[field].startswith(str(Path("gates") / "base.yaml"))
    }


def edit_raw_reward_default(repo: Path) -> int:
    """Edit rel_down 0.2 -> 0.25 of the raw_reward default; returns the edited line."""
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    return line_of(repo / "gates" / "base.yaml", RAW_REWARD_EDITED)


def diff_json(*args: str) -> tuple[int, dict[str, object]]:
    result = run_cli("diff", "--base", "HEAD", "--format", "json", *args)
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)


# --- the done means ---------------------------------------------------------------------------------------


def test_editing_a_default_names_its_line_the_values_and_every_test_that_inherits_it(repo: Path) -> None:
    expected = inheritors(repo, "rollout/raw_reward", "constraint")
    assert expected == {GSM8K}  # the kimi twins write their own `constraint: null`
    line = edit_raw_reward_default(repo)

    result = run_cli("diff", "--base", "HEAD")

    assert result.code == 0, result.err
    assert f"gates/base.yaml:{line}:" in result.out
    assert "defaults.rollout/raw_reward.constraint.rel_down: 0.2 -> 0.25" in result.out
    assert f"{GSM8K}: rollout/raw_reward" in result.out
    assert KIMI not in result.out
    assert KIMI_LORA not in result.out
    assert "re-keys 1 gate(s)" in result.out


def test_json_groups_the_rekeyed_gates_under_the_literal_that_moved_them(repo: Path) -> None:
    line = edit_raw_reward_default(repo)

    code, report = diff_json()

    assert code == 0
    [cause] = report["causes"]  # type: ignore[misc]
    assert (cause["path"], cause["line"], cause["kind"]) == ("gates/base.yaml", line, "changed")
    assert cause["changes"] == [
        {
            "path": "gates/base.yaml",
            "line": line,
            "dotted": "defaults.rollout/raw_reward.constraint.rel_down",
            "field": "constraint.rel_down",
            "old": 0.2,
            "new": 0.25,
        }
    ]
    [gate] = cause["gates"]
    assert (gate["test"], gate["metric"], gate["carriable"]) == (GSM8K, "rollout/raw_reward", True)
    assert gate["old"]["constraint_key"] == '{"abs_floor_down":0.05,"rel_down":0.2}'
    assert gate["new"]["constraint_key"] == '{"abs_floor_down":0.05,"rel_down":0.25}'
    assert gate["old"]["coordinate"] != gate["new"]["coordinate"]
    assert gate["stored"] is None  # no --db
    assert (report["rekeyed"], report["added"], report["removed"]) == (1, [], [])


def test_github_format_puts_one_warning_on_the_changed_line_naming_the_gates(repo: Path) -> None:
    line = edit_raw_reward_default(repo)

    result = run_cli("diff", "--base", "HEAD", "--format", "github")

    annotations = [a for a in result.out.splitlines() if a.startswith("::warning ")]
    assert len(annotations) == 1
    assert annotations[0].startswith(f"::warning file=gates/base.yaml,line={line},title=gatecfg::")
    assert "rel_down: 0.2 -> 0.25" in annotations[0]
    assert f"{GSM8K}: rollout/raw_reward" in annotations[0]
    assert result.code == 0


def test_a_populated_store_gives_the_values_each_rekey_orphans(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit_raw_reward_default(repo)

    text = run_cli("diff", "--base", "HEAD", "--db", db)
    _, report = diff_json("--db", db)

    # raw_reward is `steps: last` for gsm8k: one stored value per nightly.
    assert f"{NIGHTS} stored values orphaned ({NIGHTS} trusted)" in text.out
    stored = report["causes"][0]["gates"][0]["stored"]  # type: ignore[index]
    assert stored["orphaned"] == NIGHTS
    assert stored["orphaned_trusted"] == NIGHTS
    assert stored["series"] == 1
    assert stored["carried_series"] == 0
    assert stored["last_written"] is not None


def test_evaluate_after_the_edit_prints_the_banner_and_warns_in_every_report(
    repo: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_nightlies(repo, db)
    line = edit_raw_reward_default(repo)
    record = gsm8k_record(repo / "pr.jsonl", 0.51)
    summary = repo / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit, markdown, github = repo / "out.xml", repo / "out.md", repo / "out.gh"

    result = run_cli(
        "evaluate", "--test", GSM8K, "--record", record, "--db", db, "--format", "json",
        "--report", f"junit={junit}", "--report", f"markdown={markdown}", "--report", f"github={github}",
    )  # fmt: skip

    assert result.code == 0, result.err
    assert "RE-KEY: 1 gate(s) lost their baseline" in result.err
    assert f"written at gates/base.yaml:{line}" in result.err
    [warning] = json.loads(result.out)["warnings"]
    assert warning["kind"] == "rekey"
    assert warning["metric"] == "rollout/raw_reward"
    assert warning["orphaned"] == NIGHTS
    assert warning["nightlies_to_active"] == 1
    assert warning["differences"] == [{"field": "constraint.rel_down", "old": 0.2, "new": 0.25}]
    assert warning["literals"] == {"constraint": f"gates/base.yaml:{line}"}
    assert warning["old"]["coordinate"] != warning["new"]["coordinate"]
    properties = ET.parse(junit).getroot().iter("property")
    assert any(p.get("name") == "gatecfg.rekey" and "rel_down" in (p.get("value") or "") for p in properties)
    assert "> **Re-key, baseline cold-started:** rollout/raw_reward re-keyed" in markdown.read_text()
    assert "Re-key" in summary.read_text()
    annotations = [a for a in github.read_text().splitlines() if a.startswith("::warning ")]
    assert any(f"file={GSM8K_FILE}" in a and "re-keyed" in a for a in annotations)
    text = run_cli("evaluate", "--test", GSM8K, "--record", record, "--db", db)
    assert "WARNING re-key: rollout/raw_reward re-keyed (constraint.rel_down: 0.2 -> 0.25" in text.out


# --- exit codes -------------------------------------------------------------------------------------------


def test_fail_on_rekey_exits_1_and_without_it_a_rekey_exits_0(repo: Path) -> None:
    edit_raw_reward_default(repo)

    assert run_cli("diff", "--base", "HEAD").code == 0
    assert run_cli("diff", "--base", "HEAD", "--fail-on-rekey").code == 1


def test_report_writes_json_and_markdown_beside_the_annotations(repo: Path) -> None:
    edit_raw_reward_default(repo)
    out = repo / "out"

    result = run_cli(
        "diff", "--base", "HEAD", "--format", "github", "--fail-on-rekey",
        "--report", f"json={out}/diff.json", "--report", f"markdown={out}/diff.md",
    )  # fmt: skip

    assert result.code == 1
    assert result.out.startswith("::error file=gates/base.yaml")
    report = json.loads((out / "diff.json").read_text())
    assert report["exit_code"] == 1
    assert report["cold"] == report["rekeyed"] == len(inheritors(repo, "rollout/raw_reward", "constraint"))
    markdown = (out / "diff.md").read_text()
    assert markdown.startswith(
        "### gatecfg diff\n\n```\ngatecfg diff: gates/ in the working tree against HEAD"
    )
    assert markdown.endswith("```\n")


def test_evaluate_fail_on_rekey_fails_a_passing_run_that_rekeys(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit_raw_reward_default(repo)
    record = gsm8k_record(repo / "pr.jsonl", 0.51)
    args = ("evaluate", "--test", GSM8K, "--record", record, "--db", db)
    assert run_cli(*args).code == 0

    result = run_cli(*args, "--fail-on-rekey", "--format", "json")

    assert result.code == 1
    report = json.loads(result.out)
    assert report["exit_code"] == 1
    assert report["notes"][-1] == "1 gate(s) re-keyed and start cold, and --fail-on-rekey is set: exit 1"
    assert "gatecfg evaluate: 1 gate(s) re-keyed and start cold, and --fail-on-rekey is set" in result.err


def test_an_unchanged_tree_says_so_and_passes_fail_on_rekey(repo: Path) -> None:
    result = run_cli("diff", "--base", "HEAD", "--fail-on-rekey")

    assert result.code == 0
    assert "no gate changes key" in result.out


def test_yaml_style_alone_rekeys_nothing(repo: Path) -> None:
    block = "constraint:\n      abs_floor_down: 0.050\n      rel_down: 0.20"
    edit(repo / "gates" / "base.yaml", RAW_REWARD_DEFAULT, block)

    code, report = diff_json("--fail-on-rekey")

    assert code == 0
    assert report["causes"] == []


def test_diff_without_a_store_opens_none(repo: Path) -> None:
    edit_raw_reward_default(repo)

    run_cli("diff", "--base", "HEAD")

    assert not (repo / ".gatecfg").exists()


# --- attribution ------------------------------------------------------------------------------------------


def test_a_gate_file_that_starts_writing_the_field_is_reported_where_it_writes_it(repo: Path) -> None:
    path = repo / GSM8K_FILE
    edit(path, "    limits: {min: 0.20}", "    limits: {min: 0.20}\n    constraint: {rel_down: 0.3}")

    _, report = diff_json()

    [cause] = report["causes"]  # type: ignore[misc]
    assert cause["kind"] == "now-written"
    assert (cause["path"], cause["line"]) == (GSM8K_FILE, line_of(path, "constraint: {rel_down: 0.3}"))
    assert cause["dotted"] == "gates.rollout/raw_reward.constraint"
    assert cause["old_source"].startswith("HEAD:gates/base.yaml:")
    assert {c["field"]: (c["old"], c["new"]) for c in cause["changes"]} == {
        "constraint.rel_down": (0.2, 0.3),
        "constraint.abs_floor_down": (0.05, None),
    }


def test_a_gate_file_that_stops_writing_the_field_is_reported_at_the_gate_with_its_new_source(
    repo: Path,
) -> None:
    path = repo / "gates" / "megatron" / "test_kimi_k3_4layer_ci.yaml"
    gate_line = line_of(path, "  rollout/raw_reward:")
    edit(path, "  rollout/raw_reward:\n    constraint: null", "  rollout/raw_reward:\n    #")

    result = run_cli("diff", "--base", "HEAD")
    _, report = diff_json()

    [cause] = report["causes"]  # type: ignore[misc]
    assert cause["kind"] == "no-longer-written"
    assert (cause["path"], cause["line"]) == ("gates/megatron/test_kimi_k3_4layer_ci.yaml", gate_line)
    assert cause["new_source"].startswith("gates/base.yaml:")
    assert cause["changes"][0]["old"] is None
    assert "constraint: null -> {" in result.out
    assert "no longer written in the gate file, now inherited from gates/base.yaml:" in result.out
    assert [g["test"] for g in cause["gates"]] == [KIMI]


def test_a_default_moved_to_a_nearer_base_file_is_reported_there(repo: Path) -> None:
    nearer = repo / "gates" / "fully_async" / "base.yaml"
    nearer.write_text(
        "version: 1\nextends: ../base.yaml\ndefaults:\n  train/grad_norm:\n    steps: all\n"
        "    constraint: {budget: up}\n",
        encoding="utf-8",
    )

    _, report = diff_json()

    [cause] = report["causes"]  # type: ignore[misc]
    assert cause["kind"] == "moved"
    assert cause["path"] == "gates/fully_async/base.yaml"
    assert cause["line"] == 6
    assert cause["changes"][0]["dotted"] == "defaults.train/grad_norm.constraint.budget"
    assert [(g["test"], g["metric"]) for g in cause["gates"]] == [(GSM8K, "train/grad_norm")]


def test_a_moved_literal_with_the_same_value_rekeys_nothing(repo: Path) -> None:
    edit(repo / GSM8K_FILE, "    limits: {min: 0.20}", "    limits: {min: 0.20}\n    " + RAW_REWARD_DEFAULT)

    _, report = diff_json()

    assert report["causes"] == []


def test_a_temporary_folder_below_the_working_directory_still_names_the_base_revision(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TMPDIR inside the checkout (or running from /tmp) shows the base tree's paths relative, not absolute.
    monkeypatch.setattr(tempfile, "tempdir", str(repo / ".tmp"))
    (repo / ".tmp").mkdir()
    edit_raw_reward_default(repo)

    _, report = diff_json()

    [cause] = report["causes"]  # type: ignore[misc]
    assert cause["kind"] == "changed"
    assert cause["old_source"].startswith("HEAD:gates/base.yaml:")


def test_a_steps_change_is_its_own_cause_beside_a_constraint_change(repo: Path) -> None:
    edit_raw_reward_default(repo)
    edit(repo / GSM8K_FILE, "  rollout/raw_reward:\n    steps: last", "  rollout/raw_reward:\n    steps: all")

    _, report = diff_json()

    fields = sorted((c["field"], c["kind"]) for c in report["causes"])  # type: ignore[union-attr]
    assert fields == [("constraint", "changed"), ("steps", "changed")]
    assert report["rekeyed"] == 1
    gates = [g for c in report["causes"] for g in c["gates"]]  # type: ignore[union-attr]
    assert {g["carriable"] for g in gates} == {False}


def test_a_renamed_test_rekeys_all_its_gates_at_its_test_line(repo: Path) -> None:
    path = repo / GSM8K_FILE
    edit(path, f"test: {GSM8K}", "test: tests/e2e/fully_async/test_gsm8k_renamed_ci.py")

    _, report = diff_json()

    [cause] = report["causes"]  # type: ignore[misc]
    assert (cause["kind"], cause["path"], cause["line"]) == ("renamed", GSM8K_FILE, 2)
    assert len(cause["gates"]) == 4
    assert report["added"] == []
    assert report["removed"] == []


def test_gates_added_and_removed_are_listed_with_their_history(repo: Path, db: str) -> None:
    seed_nightlies(repo, db)
    edit(repo / GSM8K_FILE, "  train/grad_norm:\n", "  train/ppo_kl:\n")

    result = run_cli("diff", "--base", "HEAD", "--db", db)
    _, report = diff_json("--db", db)

    assert [(g["test"], g["metric"]) for g in report["added"]] == [(GSM8K, "train/ppo_kl")]  # type: ignore[union-attr]
    [removed] = report["removed"]  # type: ignore[misc]
    assert (removed["metric"], removed["stored"]["values"]) == ("train/grad_norm", 2 * NIGHTS)
    assert "added (new keys, they start cold):" in result.out
    assert f"{GSM8K}: train/grad_norm · {2 * NIGHTS} stored values orphaned" in result.out


def test_a_file_broken_at_the_base_is_not_compared_and_named_on_stderr(repo: Path) -> None:
    path = repo / GSM8K_FILE
    edit(path, "    enforce: true", "    enforce: yes please")
    git(repo, "commit", "-q", "-am", "broken")
    edit(path, "    enforce: yes please", "    enforce: true")

    result = run_cli("diff", "--base", "HEAD")
    _, report = diff_json()

    assert result.code == 0
    assert f"HEAD:{GSM8K_FILE}:" in result.err
    assert "not compared" in result.err
    assert {g["test"] for g in report["uncompared"]} == {GSM8K}  # type: ignore[union-attr]
    assert report["added"] == []


# --- errors -----------------------------------------------------------------------------------------------


def test_a_broken_working_tree_exits_2_naming_file_and_line(repo: Path) -> None:
    edit(repo / GSM8K_FILE, "    enforce: true", "    enforce: yes")

    result = run_cli("diff", "--base", "HEAD")

    assert result.code == 2
    assert f"{GSM8K_FILE}:8:" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    ("base", "hint"),
    [
        ("origin/nope", "git fetch --depth=1 origin nope"),
        ("nope", "git fetch --depth=1 origin nope"),
        ("HEAD~3", "git log --oneline"),
    ],
    ids=["remote-branch", "plain-name", "ancestor"],
)
def test_an_unknown_revision_exits_2_saying_what_to_do(repo: Path, base: str, hint: str) -> None:
    git(repo, "remote", "add", "origin", str(repo))

    result = run_cli("diff", "--base", base)

    assert result.code == 2
    assert f"git does not know the revision `{base}`" in result.err
    assert hint in result.err


def test_a_revision_spelled_as_an_option_is_refused(repo: Path) -> None:
    result = run_cli("diff", "--base=--output=/tmp/x")

    assert result.code == 2
    assert "is not a git revision" in result.err


def shallow_clone(tmp_path: Path, *, every_branch: bool) -> Path:
    """A one-commit clone of a feature branch that edits the default, like a CI checkout of a PR."""
    origin = make_repo(tmp_path / "origin")
    git(origin, "switch", "-q", "-c", "feature")
    edit(origin / "gates" / "base.yaml", RAW_REWARD_DEFAULT, RAW_REWARD_EDITED)
    git(origin, "commit", "-q", "-am", "widen rel_down")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", "--branch", "feature", f"file://{origin}", str(clone))
    if every_branch:
        git(clone, "remote", "set-branches", "origin", "*")  # what actions/checkout configures
    return clone


@pytest.mark.parametrize(
    ("every_branch", "fetch"),
    [
        (True, "git fetch --depth=1 origin main"),
        (False, "git fetch --depth=1 origin main:refs/remotes/origin/main"),
    ],
    ids=["refspec-of-every-branch", "single-branch-clone"],
)
def test_a_shallow_clone_without_the_base_says_what_to_fetch_and_works_once_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every_branch: bool, fetch: str
) -> None:
    clone = shallow_clone(tmp_path, every_branch=every_branch)
    monkeypatch.chdir(clone)

    missing = run_cli("diff", "--base", "origin/main")

    assert missing.code == 2
    assert "this clone is shallow" in missing.err
    assert f"`{fetch}`" in missing.err
    git(clone, *fetch.split()[1:])
    fetched = run_cli("diff", "--base", "origin/main")
    assert fetched.code == 0, fetched.err
    assert "defaults.rollout/raw_reward.constraint.rel_down: 0.2 -> 0.25" in fetched.out


# --- the GitHub Actions example -----------------------------------------------------------------------------


def test_every_gatecfg_command_of_the_github_actions_example_parses() -> None:
    text = (REPO / "docs" / "github-actions.md").read_text(encoding="utf-8")
    # The "Without the action" workflow; the others call the action (tests/test_github_action.py).
    block = text.split("## Without the action", 1)[1]
    [block] = re.findall(r"```yml\n(.*?)```", block, re.DOTALL)
    workflow = YAML(typ="safe").load(block)
    runs = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    commands = [
        shlex.split(re.sub(r"\$\{\{ *[\w.]+ *\}\}", "main", run), comments=True)
        for run in runs
        if run.startswith("gatecfg ")
    ]

    verbs = [c[1] for c in commands]
    assert verbs == ["lint", "diff", "evaluate"]
    for command in commands:
        build_parser().parse_args(command[1:])  # an invalid option raises InputError
    assert "--write" in commands[2]


def test_an_unknown_remote_branch_gets_a_fetch_that_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No remote `origin`: the hint never spells `origin/origin/main`."""
    repo = make_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    result = run_cli("diff", "--base", "origin/main")
    assert result.code == 2
    assert "origin/origin" not in result.err
    assert (
        "this clone has no git remote: `git remote add origin URL`, then `git fetch --depth=1 origin main`"
        in result.err
    )
    git(repo, "remote", "add", "upstream", "https://example.com/x.git")
    other = run_cli("diff", "--base", "origin/main")
    assert "origin/origin" not in other.err
    assert (
        "`origin` is not a remote of this clone (remotes: upstream): `git fetch --depth=1 upstream main`, "
        "then pass `--base upstream/main`" in other.err
    )


def test_the_pull_request_that_adds_gates_lists_them_as_added_without_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "before gatecfg")
    shutil.copytree(REPO / "gates", repo / "gates")
    monkeypatch.chdir(repo)
    result = run_cli("diff", "--base", "main")
    assert (result.code, result.err) == (0, "")
    assert re.search(r"0 cause\(s\) re-key 0 gate\(s\); \d+ gate\(s\) added, 0 removed", result.out)
