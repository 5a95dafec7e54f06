"""The set-up commands' parsers and handlers: init, completion, db (upgrade, status, copy)."""

from __future__ import annotations

import argparse
import sys

from gatecfg.cli_args import SubParsers, add, check_store_write, db_option, gates_option, override_option
from gatecfg.errors import InputError
from gatecfg.settings import db_url

EXAMPLE_TEST = "tests/e2e/test_example_ci.py"


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
        help="also write .github/workflows/gatecfg.yml and, when there is none, .pre-commit-config.yaml "
        "(default: print them)",
    )

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
        _db,
    )
    p.add_argument(
        "action",
        choices=["upgrade", "status", "copy"],
        help="upgrade: apply the store's migrations; status: schema revision, runs, values, size; "
        "copy: every table from --from into --to (one transaction, counts checked)",
    )
    db_option(p)
    p.add_argument("--from", dest="from_url", metavar="URL", help="copy: the store to read")
    p.add_argument("--to", dest="to_url", metavar="URL", help="copy: the store to write (created if SQLite)")
    p.add_argument(
        "--replace",
        action="store_true",
        help="copy: delete the target's rows first, in the copy's transaction (default: refuse a non-empty "
        "target)",
    )
    override_option(p)


def _init(args: argparse.Namespace) -> int:
    from gatecfg.commands.init import init_command

    return init_command(gates=args.gates, test=args.test, write_ci=args.write_ci)


def _completion(args: argparse.Namespace) -> int:
    from gatecfg.completion import script

    sys.stdout.write(script(args.root, args.shell))
    return 0


def _db(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    if args.action != "copy":
        given = (
            ("--from", args.from_url),
            ("--to", args.to_url),
            ("--replace", args.replace),
            ("--override-write-policy", args.override_write_policy),
        )
        for flag, value in given:
            if value:
                raise InputError.at(
                    flag, f"only means something with `gatecfg db copy`, not `db {args.action}`"
                )
        return db.upgrade(db=db_url(args.db)) if args.action == "upgrade" else db.status(db=db_url(args.db))
    missing = [flag for flag, value in (("--from", args.from_url), ("--to", args.to_url)) if not value]
    if missing or args.db:
        raise InputError.at(
            "gatecfg db copy",
            f"copy needs {' and '.join(missing)}" if missing else "copy takes --from and --to, not --db",
            hint="e.g. gatecfg db copy --from sqlite:///.gatecfg/history.db --to postgresql+psycopg://...",
        )
    check_store_write(args, where="gatecfg db copy", action="copy into a history store")
    return db.copy(source=db_url(args.from_url), target=db_url(args.to_url), replace=args.replace)
