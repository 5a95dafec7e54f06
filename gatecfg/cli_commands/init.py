"""`gatecfg init`: its arguments and the call into `gatecfg.commands.init`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import SubParsers, add, gate_test_option, gates_option
from gatecfg.errors import InputError

EXAMPLE_TEST = "tests/e2e/test_example_ci.py"
CI_SYSTEMS = ("github", "gitlab")  # gatecfg.commands.init writes a file for each


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "init",
        "Start gating in this repository: a commented base file with the shipped defaults, an example "
        "gate file, and the pre-commit entry and GitHub workflow (printed, or written with --write-ci).",
        "gatecfg init --test tests/e2e/test_tiny_ci.py --write-ci",
        run,
    )
    gates_option(p)
    gate_test_option(p, f"the example gate file's test (default: {EXAMPLE_TEST})", default=EXAMPLE_TEST)
    p.add_argument(
        "--write-ci",
        action="store_true",
        help="also write the CI files (--ci) and, when there is none, .pre-commit-config.yaml (default: "
        "print them); in a repository with its base file already, add the CI files that are missing",
    )
    p.add_argument(
        "--ci",
        action="append",
        choices=CI_SYSTEMS,
        help="--write-ci: the CI to write for, repeatable: github (.github/workflows/gatecfg.yml) or gitlab "
        "(.gitlab/ci/gatecfg.yml, included from .gitlab-ci.yml) (default: github)",
    )
    p.add_argument(
        "--install",
        metavar="SPEC",
        help="how CI installs gatecfg: a git URL pinned to a commit or tag "
        "(git+https://github.com/ORG/gatecfg@COMMIT), a wheel URL or a requirement (default: where this "
        "gatecfg was installed from)",
    )
    p.add_argument(
        "--pre-commit-repo",
        metavar="URL",
        help="the pre-commit entry's remote repository, with --pre-commit-rev (default: a `repo: local` "
        "hook over the installed gatecfg)",
    )
    p.add_argument("--pre-commit-rev", metavar="REV", help="the tag or commit of --pre-commit-repo")


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.init import PreCommitRemote, init_command

    if (args.pre_commit_repo is None) != (args.pre_commit_rev is None):
        raise InputError.at(
            "--pre-commit-repo" if args.pre_commit_rev is None else "--pre-commit-rev",
            "--pre-commit-repo and --pre-commit-rev go together: a remote hook is pinned to a tag or commit",
        )
    remote = (
        None if args.pre_commit_repo is None else PreCommitRemote(args.pre_commit_repo, args.pre_commit_rev)
    )
    return init_command(
        gates=args.gates,
        test=args.test,
        write_ci=args.write_ci,
        ci=tuple(dict.fromkeys(args.ci or ["github"])),
        install=args.install,
        pre_commit_remote=remote,
    )
