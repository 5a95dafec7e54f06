"""Reading a user's file (one wording for a missing file, a folder, a symlink loop, a pipe or device, a file
past its reader's size limit and bytes that are not UTF-8), and writing one: in place through a symlink, to a
device or pipe as it is, and otherwise atomically without leaving a temporary file behind when the disk is
full."""

from __future__ import annotations

import codecs
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from gatecfg.errors import InputError, Location

MB = 1_000_000


def size_text(size: int) -> str:
    return f"{size / MB:,.1f} MB" if size >= MB // 10 else f"{size:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


@contextmanager
def open_user_file(path: Path, shown: str, *, what: str, limit: int, hint: str) -> Iterator[BinaryIO]:
    """A user's file, open for reading in binary, once it is known to be a regular file of at most `limit`
    bytes. The file is opened without blocking and checked on the open descriptor, so a FIFO (with or
    without a writer), a device (`/dev/zero`) or a socket is refused before one byte is read, and a file
    larger than its reader's documented limit (a 2 GiB sparse file) is refused by its size, not by a
    MemoryError. A reader that reads past `limit` on a file that grows is stopped by `read_limited`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError.at(Location(shown), f"{what} not found", hint=hint or None) from None
    except IsADirectoryError:
        raise InputError.at(Location(shown), f"is a directory, not {_a(what)}", hint=hint or None) from None
    except (OSError, ValueError) as exc:
        # ValueError: a NUL in the path; ELOOP: a symlink loop; ENXIO: a socket, which cannot be opened.
        mode = _mode(path)
        if mode is not None and not stat.S_ISREG(mode):
            raise _not_regular(shown, what, mode, hint) from None
        raise InputError.at(Location(shown), f"cannot read the {what}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(shown, what, info.st_mode, hint)
        if info.st_size > limit:
            raise too_large(shown, what, info.st_size, limit)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            yield handle
        except OSError as exc:
            # A regular file that cannot be read (/proc/self/mem: EIO; a file on a failing disk).
            raise InputError.at(Location(shown), f"cannot read the {what}: {_reason(exc)}") from None


def _a(what: str) -> str:
    return f"an {what}" if what[:1] in "aeiou" else f"a {what}"


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None


def _not_regular(shown: str, what: str, mode: int, hint: str) -> InputError:
    return InputError.at(
        Location(shown),
        f"is {_kind(mode)}, not {_a(what)}: gatecfg reads regular files only",
        hint=hint or None,
    )


def too_large(shown: str, what: str, size: int | None, limit: int) -> InputError:
    told = f"the {what} is {size_text(size)}" if size is not None else f"the {what} is larger than that"
    return InputError.at(
        Location(shown),
        f"{told}; gatecfg reads {_a(what)} of at most {size_text(limit)}",
        hint="this limit keeps a hostile or runaway file from exhausting the runner (docs/security.md)",
    )


def read_limited(handle: BinaryIO, shown: str, *, what: str, limit: int) -> bytes:
    """All of an open file's bytes, but never more than `limit` (a file that grows while it is read)."""
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise too_large(shown, what, None, limit)
    return data


def read_bytes(path: Path, shown: str, *, what: str, limit: int, hint: str) -> bytes:
    """A user's regular file's bytes, at most `limit` of them (`open_user_file`)."""
    with open_user_file(path, shown, what=what, limit=limit, hint=hint) as handle:
        try:
            return read_limited(handle, shown, what=what, limit=limit)
        except OSError as exc:
            raise InputError.at(Location(shown), f"cannot read the {what}: {_reason(exc)}") from None


def read_text(path: Path, shown: str, *, what: str, hint: str, limit: int) -> str:
    """The file's text; `what` names the kind of file in messages ("record file", "export file")."""
    data = read_bytes(path, shown, what=what, limit=limit, hint=hint)
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
