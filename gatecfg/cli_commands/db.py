"""`gatecfg db upgrade|status|copy`: their arguments and the calls into `gatecfg.commands.db`."""

from __future__ import annotations

import argparse

from gatecfg.cli_args import Parser, SubParsers, add, check_store_write, db_option, override_option
from gatecfg.settings import db_url


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "db",
        "Manage the history store: apply its migrations, show what it holds, copy it to another store.",
        "gatecfg db upgrade --db postgresql+psycopg://...\n  gatecfg db status\n"
        "  gatecfg db copy --from sqlite:///.gatecfg/history.db --to postgresql+psycopg://ci@db/gatecfg",
        status,
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
            upgrade,
        )
    )
    db_option(
        add(
            actions,
            "status",
            "Show the store's schema revision, runs, values and size.",
            "gatecfg db status --db sqlite:///.gatecfg/history.db",
            status,
        )
    )
    p = add(
        actions,
        "copy",
        "Copy every table from --from into --to (one transaction, counts checked): SQLite <-> PostgreSQL.",
        "gatecfg db copy --from sqlite:///.gatecfg/history.db --to postgresql+psycopg://ci@db/gatecfg",
        copy,
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


def upgrade(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    return db.upgrade(db=db_url(args.db))


def status(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    return db.status(db=db_url(args.db))


def copy(args: argparse.Namespace) -> int:
    from gatecfg.commands import db

    check_store_write(args, where="gatecfg db copy", action="copy into a history store")
    return db.copy(source=db_url(args.from_url), target=db_url(args.to_url), replace=args.replace)
