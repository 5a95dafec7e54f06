"""Reading a user's file as text: one wording for a missing file, a folder, and bytes that are not UTF-8."""

from __future__ import annotations

import codecs
from pathlib import Path

from gatecfg.errors import InputError, Location


def read_text(path: Path, shown: str, *, what: str, hint: str) -> str:
    """The file's text; `what` names the kind of file in messages ("record file", "export file")."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError.at(Location(shown), f"{what} not found", hint=hint) from None
    except IsADirectoryError:
        raise InputError.at(Location(shown), f"is a directory, not a {what}", hint=hint) from None
    except OSError as exc:
        raise InputError.at(Location(shown), f"cannot read the {what}: {exc.strerror or exc}") from None
    return decode_utf8(data, shown, hint=f"save the {what} as UTF-8 text")


def decode_utf8(data: bytes, shown: str, *, hint: str) -> str:
    # Editors and Windows tools may prepend a byte order mark, which is not an error.
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        # The bytes before the bad one decode; counting their characters gives the column an editor shows.
        col = len(data[line_start : exc.start].decode("utf-8")) + 1
        raise InputError.at(
            Location(shown, line, col), f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", hint=hint
        ) from None
