"""The set-up commands' parsers and handlers: init, completion, db (upgrade, status, copy)."""

from __future__ import annotations

import argparse
import sys

from gatecfg.cli_args import (
    Parser,
    SubParsers,
    add,
    check_store_write,
    db_option,
    gates_option,
    override_option,
)
from gatecfg.errors import InputError
from gatecfg.settings import db_url

EXAMPLE_TEST = "tests/e2e/test_example_ci.py"
CI_SYSTEMS = ("github", "gitlab")  # gatecfg.commands.init writes a file for each


def add_setup(sub: SubParsers, root: argparse.ArgumentParser) -> None:
    """init, completion, db: a repository's first gates, shell completion, the store itself."""
    p = add(
        sub,
        "init",
        "Start gating in this repository: a commented base file with the shipped defaults, an example "
        "gate file, and the pre-commit entry and GitHub workflow (printed, or written with --write-ci).",
        "gatecfg init --test tests/e2e/test_tiny_ci.py --write-ci",
        _init,
    )
    gates_option(p)
    p.add_argument(
        "--test",
        default=EXAMPLE_TEST,
        metavar="T",
        help=f"the example gate file's test (default: {EXAMPLE_TEST})",
    )
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

    p = add(
        sub,
        "completion",
        "Print the shell completion script for bash, zsh or fish.",
        "gatecfg completion bash > ~/.local/share/bash-completion/completions/gatecfg",
        _completion,
    )
    p.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete in")
    p.set_defaults(root=root)  # the script describes the whole parser, this subcommand's parent

    p = add(
        sub,
        "db",
        "Manage the history store: apply its migrations, show what it holds, copy it to another store.",
        "gatecfg db upgrade --db postgresql+psycopg://...\n  gatecfg db status\n"
        "  gatecfg db copy --from sqlite:///.gatecfg/history.db --to postgresql+psycopg://ci@db/gatecfg",
        _db_status,
    )
    # An action of its own per verb, so that `gatecfg db copy --help` is copy's help.
    actions = p.add_subparsers(
        title="actions",
        dest="action",
        metavar="ACTION",
        parser_class=Parser,
        required=True,
        help="upgrade: apply the store's migrations; status: schema revision, runs, values, size; copy: "
        "every table from --from into --to",
    )
    db_option(
        add(
            actions,
            "upgrade",
            "Apply the store's migrations (PostgreSQL needs this once per release); says what it did.",
            "gatecfg db upgrade --db postgresql+psycopg://ci@db/gatecfg",
            _db_upgrade,
        )
    )
    db_option(
        add(
            actions,
            "status",
            "Show the store's schema revision, runs, values and size.",
            "gatecfg db status --db sqlite:///.gatecfg/history.db",
            _db_status,
        )
    )
    p = add(
        actions,
        "copy",
        "Copy every table from --from into --to (one transaction, counts checked): SQLite <-> PostgreSQL.",
        "gatecfg db copy --from sqlite:///.gatecfg/history.db --to postgresql+psycopg://ci@db/gatecfg",
        _db_copy,
    )
    p.add_argument("--from", dest="from_url", metavar="URL", required=True, help="the store to read")
    p.add_argument(
        "--to", dest="to_url", metavar="URL", required=True, help="the store to write (created if SQLite)"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="delete the target's rows first, in the copy's transaction (default: refuse a non-empty target)",
    )
    override_option(p)


def _init(args: argparse.Namespace) -> int:
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


def _completion(args: argparse.Namespace) -> int:
    from gatecfg.completion import script

    sys.stdout.write(script(args.root, args.shell))
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    return db.upgrade(db=db_url(args.db))


def _db_status(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    return db.status(db=db_url(args.db))


def _db_copy(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    check_store_write(args, where="gatecfg db copy", action="copy into a history store")
    return db.copy(source=db_url(args.from_url), target=db_url(args.to_url), replace=args.replace)
