"""Reading a user's file as text (one wording for a missing file, a folder, a symlink loop and bytes that
are not UTF-8), and writing one: in place through a symlink, to a device or pipe as it is, and otherwise
atomically without leaving a temporary file behind when the disk is full."""

from __future__ import annotations

import codecs
import os
import stat
import tempfile
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
    except (OSError, RuntimeError, ValueError) as exc:
        # RuntimeError: pathlib's word for a symlink loop; ValueError: a NUL in the path.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError.at(Location(shown), f"cannot read the {what}: {reason}") from None
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


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def check_writable(path: Path, *, what: str) -> None:
    """Fail (exit 2) now, not after the work, when `path` cannot become a file: a folder, a folder that
    cannot be created, a NUL in the name. The file itself is not created."""
    try:
        target = Path(os.path.realpath(path))
        if target.is_dir():
            raise InputError.at(str(path), f"cannot write the {what}: is a directory; give a file name")
        target.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        raise InputError.at(str(path), f"cannot write the {what} here: {_reason(exc)}") from None


def write_text(path: Path, text: str, *, what: str) -> None:
    """Write `text` to `path`. A symlink is written through (its target is replaced, the link stays);
    a device, pipe or socket (`/dev/stdout`) is written as it is; a regular file is replaced atomically,
    keeping its permissions, by a temporary file beside it that never outlives a failed write."""
    try:
        target = Path(os.path.realpath(path))
        mode = target.stat().st_mode if target.exists() else None
        if mode is not None and not stat.S_ISREG(mode):
            with open(target, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except (OSError, ValueError) as exc:
        raise InputError.at(str(path), f"cannot write the {what}: {_reason(exc)}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(tmp_name, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(tmp_name, target)
    except OSError as exc:
        raise InputError.at(str(path), f"cannot write the {what}: {_reason(exc)}") from None
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def _umask() -> int:
    # The process's umask can only be read by setting it; set it straight back.
    current = os.umask(0o022)
    os.umask(current)
    return current
