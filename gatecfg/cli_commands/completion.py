"""`gatecfg completion`: its arguments and the call into `gatecfg.completion`."""

from __future__ import annotations

import argparse
import sys

from gatecfg.cli_args import SubParsers, add


def register(sub: SubParsers) -> None:
    p = add(
        sub,
        "completion",
        "Print the shell completion script for bash, zsh or fish.",
        "gatecfg completion bash > ~/.local/share/bash-completion/completions/gatecfg",
        run,
    )
    p.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    from gatecfg.completion import script

    # `root`: the whole parser, which the script describes (set by `gatecfg.cli.build_parser`).
    sys.stdout.write(script(args.root, args.shell))
    return 0
