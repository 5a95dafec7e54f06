"""Test helpers shared by every test module (on sys.path through pytest's `pythonpath`)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from gatecfg.cli import main

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str | Path) -> CliResult:
    """Run the real entry point in-process. Only errors meant for users are handled by `main`;
    anything else propagates, so a traceback fails the test instead of hiding in captured output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return CliResult(code, out.getvalue(), err.getvalue())
