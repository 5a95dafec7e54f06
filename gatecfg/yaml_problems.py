"""What is wrong with a YAML file's text, as located problems: bytes that are not UTF-8, characters YAML
readers take for a line break, a `%YAML` version other than 1.2, and ruamel's syntax errors worded for the
author of a gate file (docs/gate-language.md)."""

from __future__ import annotations

import re
import unicodedata

from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from gatecfg.errors import InputError, Location, Problem

# Characters YAML 1.1 readers (ruamel's among them, in places) take for a line break: inside a quoted
# name one is folded into a space, in a comment it ends the comment. Written as an escape (`"\u2028"`)
# each is one character of a double-quoted string, read the same by every reader.
_UNICODE_BREAKS = re.compile("[\x85\u2028\u2029]")


def check_breaks(text: str, path: str) -> None:
    found = _UNICODE_BREAKS.search(text)
    if found is None:
        return
    start = text.rfind("\n", 0, found.start()) + 1
    code = f"U+{ord(found.group()):04X}"
    raise InputError.at(
        Location(path, text.count("\n", 0, found.start()) + 1, found.start() - start + 1),
        f"the file holds {code} ({unicodedata.name(found.group(), 'NEXT LINE')}), which YAML readers "
        "take for a line break",
        hint="remove it (a metric name holds no line break); where a string needs it, write the escape "
        f'\\u{ord(found.group()):04x} inside double quotes, e.g. "a\\u{ord(found.group()):04x}b"',
    )


_VERSION_DIRECTIVE = re.compile(r"^%YAML[ \t]+(\S*)", re.MULTILINE)


def check_version(text: str, path: str) -> None:
    """A `%YAML` directive names 1.2. Under 1.1 `yes`, `on`, `010` and `1:30` are true, true, 8 and 90, where
    gatecfg (as YAML 1.2) reads the strings, 10 and the string: a file that asks for 1.1 would be read
    differently from what its author meant, so it is an error at the directive, as any other version is
    (the pure parser asserts on those: a crash, not an error)."""
    for found in _VERSION_DIRECTIVE.finditer(text):
        if found.group(1) != "1.2":
            line = text.count("\n", 0, found.start()) + 1
            raise InputError.at(
                Location(path, line, found.start(1) - found.start() + 1),
                f"invalid YAML: `%YAML {found.group(1)}` is not a YAML version gatecfg reads "
                "(it reads YAML 1.2)",
                hint="leave the directive out (or write `%YAML 1.2`), and write booleans as `true`/`false`",
            )


def yaml_error(exc: YAMLError, text: str, path: str) -> InputError:
    if isinstance(exc, MarkedYAMLError):
        return InputError([_syntax_problem(exc, path, text)])
    if isinstance(exc, ReaderError):
        return InputError([_character_problem(exc, text, path)])
    return InputError.at(Location(path, 1, 1), f"invalid YAML: {exc}")  # unmarked errors are rare


def decode(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError.at(
            Location(path, line, col),
            f"the file is not UTF-8 (byte 0x{raw[exc.start]:02x})",
            hint="save the file as UTF-8",
        ) from None


YAML_KEY_CHARS = 1024


def _key_length(text: str, line: int, col: int) -> int:
    """The length of what precedes column `col` of 1-based `line`, less its indentation and quotes."""
    lines = text.split("\n")
    before = lines[line - 1][: col - 1] if 0 < line <= len(lines) else ""
    return len(before.strip().strip("\"'"))


def _character_problem(exc: ReaderError, text: str, path: str) -> Problem:
    """A character YAML does not allow (NUL, a control character): where it is, not the stream offset."""
    position = exc.position if isinstance(exc.position, int) else 0
    line = text.count("\n", 0, position) + 1
    col = position - (text.rfind("\n", 0, position) + 1) + 1
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return Problem(
        Location(path, line, col),
        f"invalid YAML: the character U+{character:04X} is not allowed in a YAML file",
        hint="remove it (a control character, often pasted from a terminal or another tool)",
    )


def _syntax_problem(exc: MarkedYAMLError, path: str, text: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    problem = str(exc.problem or exc.context or "invalid YAML")
    for raw, plain in (("'<stream end>'", "the end of the file"), ("end of stream", "end of the file")):
        problem = problem.replace(raw, plain)
    if exc.problem and exc.context and exc.context_mark is not None:
        # "while parsing a flow mapping": where the unclosed construct began is what the reader needs;
        # at the end of the file it is the only useful place to point at.
        start = exc.context_mark
        if "end of the file" in problem:
            mark = start
            problem += f" ({exc.context} that starts here)"
        else:
            problem += f" ({exc.context} that starts at {start.line + 1}:{start.column + 1})"
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    hint = None
    if "'\\t'" in problem or "\t" in problem:
        problem, hint = "a tab character in indentation", "YAML indents with spaces; replace the tab"
    elif "another document" in problem:
        problem, hint = "more than one YAML document", "remove the `---` line: one file holds one document"
    elif "undefined alias" in problem:
        hint = "define the anchor (`&name`) before its alias (`*name`)"
    elif "mapping values are not allowed" in problem and _key_length(text, line, col) > YAML_KEY_CHARS:
        # YAML reads a key without `?` only up to 1,024 characters; the `:` after a longer one is then
        # taken for a value's.
        problem = (
            f"a key of {_key_length(text, line, col):,} characters (YAML reads at most {YAML_KEY_CHARS})"
        )
        hint = "shorten the name: names are at most 512 bytes"
    elif "mapping values are not allowed" in problem:
        hint = _colon_hint(text, line)
    return Problem(Location(path, line, col), f"invalid YAML: {problem}", hint=hint)


def _colon_hint(text: str, line: int) -> str:
    """A `key: value` where YAML expects none: most often the line above lacks its colon (`test foo`,
    `train/grad_norm` before an indented block), else the value itself holds `: `."""
    lines = text.splitlines()
    above = [
        (number, content.strip())
        for number, content in enumerate(lines[: max(line - 1, 0)], start=1)
        if content.strip() and not content.strip().startswith("#")
    ]
    if above and ":" not in above[-1][1]:
        number, content = above[-1]
        key = content.split()[0]
        return f"line {number} `{content}` has no colon: write `{key}:`" + (
            f" before its value (`{key}: {content[len(key) :].strip()}`)" if content != key else ""
        )
    key, sep, value = lines[line - 1].strip().partition(": ") if 0 < line <= len(lines) else ("", "", "")
    if sep and value and '"' not in value and not value.startswith(("'", "#")):
        return f'quote a value that contains `: `: `{key}: "{value}"`'
    return "quote a value that contains `: `"
