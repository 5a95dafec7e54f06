"""`gatecfg schema`: its arguments and the call into `gatecfg.commands.schema`."""

from __future__ import annotations

import argparse
from pathlib import Path

from gatecfg.cli_args import SubParsers, add

SCHEMA_NAMES = ("base", "gatefile")  # gatecfg.commands.schema.SCHEMAS, named without importing pydantic


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "schema",
        "Write the JSON Schema files under schema/ from the models (or --check they are current).",
        "gatecfg schema --check",
        run,
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 if the files are stale, write nothing")
    what.add_argument(
        "--print",
        dest="print_name",
        choices=SCHEMA_NAMES,
        metavar="NAME",
        help="write one schema to stdout, for an editor or check-jsonschema: `base` (base.yaml files) or "
        "`gatefile` (gate files)",
    )
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="output folder (default: schema/, in gatecfg's own checkout only: elsewhere give --dir or "
        "--print)",
    )


def run(args: argparse.Namespace) -> int:
    from gatecfg.commands.schema import print_schema, schema

    if args.print_name is not None:
        return print_schema(args.print_name)
    if args.dir is not None and not args.check:
        from gatecfg.outputs import check_outputs, project_reads

        files = [("--dir", args.dir / f"{name}.schema.json") for name in SCHEMA_NAMES]
        check_outputs(files, project_reads())
    return schema(directory=args.dir, check=args.check)
