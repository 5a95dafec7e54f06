"""`rebaseline --write`: put new limits into a gate file in place, changing only the numbers.

ruamel.yaml's round-trip loader gives the line and column of every key and value; the edit replaces the
text of each limit's number at that position and adds one comment line with the evidence above `limits:`.
Everything else stays byte for byte: comments, key order, flow or block style, quoting, blank lines.
(Dumping the round-trip tree back would be simpler, but it normalises indentation and spacing here and
there, and a reviewer should see a diff of numbers.) Where the gate file writes no `limits:` for the gate
yet, one `limits: {min: ..}` line is added, indented like its neighbours.

The edited text is checked before the file is touched: it must load, resolve, give the gate exactly the
new limits, and give every other gate of the file exactly what it resolved to before. Limits that are an
alias or come through a `<<` merge are not edited where they are written (that would change every gate
sharing them): the gate gets its own `limits:` literal. The file is then replaced atomically
(`textio.write_text`: through a symlink, keeping permissions and CRLF line ends).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from gatecfg.errors import InputError, Location
from gatecfg.resolve import GateTree, load_tree
from gatecfg.textio import write_text

COMMENT_PREFIX = "# gatecfg rebaseline"
NUMBER = re.compile(r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?\.(?:inf|Inf|INF)")
NULL = re.compile(r"(?:null|Null|NULL|~)(?=\s|$|#)")
DEFAULT_INDENT = 2
# The spaces before a `#` comment that ends a line.
TRAILING_COMMENT = re.compile(r"(?<=\S)( +)#")


@dataclass(frozen=True)
class LimitsEdit:
    metric: str
    new: Mapping[str, float]  # "min" and/or "max"
    evidence: str  # one line, without the comment marker


def number_text(value: float) -> str:
    """A limit as YAML reads it back exactly: the shortest repr, `1.0` rather than `1`."""
    return repr(float(value))


def flow(new: Mapping[str, float]) -> str:
    return (
        "{" + ", ".join(f"{side}: {number_text(new[side])}" for side in ("min", "max") if side in new) + "}"
    )


def _load(text: str, path: str) -> Any:
    try:
        return YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise InputError.at(Location(path), f"cannot load the gate file to edit it: {exc}") from None


def _line_start(lines: list[str], line: int) -> int:
    return sum(len(item) for item in lines[:line])


def _with_comment(lines: list[str], line: int, comment: str) -> list[str]:
    """`lines` with the evidence comment above `line`, replacing an earlier rebaseline comment there."""
    indent = len(lines[line]) - len(lines[line].lstrip(" "))
    newline = "\r\n" if lines[line].endswith("\r\n") else "\n"
    entry = f"{' ' * indent}{COMMENT_PREFIX} {comment}{newline}"
    if line > 0 and lines[line - 1].lstrip(" ").startswith(COMMENT_PREFIX):
        return [*lines[: line - 1], entry, *lines[line:]]
    return [*lines[:line], entry, *lines[line:]]


def _replace(text: str, at: tuple[int, int], pattern: re.Pattern[str], new: str, path: str) -> str:
    line, col = at
    lines = text.splitlines(keepends=True)
    start = _line_start(lines, line) + col
    found = pattern.match(text, start)
    if found is None:
        raise InputError.at(
            Location(path, line + 1, col + 1),
            f"cannot edit the value here in place (`{text[start : start + 20].splitlines()[0]}`)",
            hint="write the limit as a plain number, or edit the file by hand",
        )
    edited = text[:start] + new + text[found.end() :]
    return _keep_comment_column(edited, line, col + len(new), len(new) - (found.end() - start))


def _keep_comment_column(text: str, line: int, after: int, grown: int) -> str:
    """Give back (or take) the spaces before a trailing comment after column `after` of `line`, so that
    comments aligned in a column stay aligned when a number got longer or shorter (one space remains)."""
    lines = text.splitlines(keepends=True)
    comment = TRAILING_COMMENT.search(lines[line], after)
    if grown == 0 or comment is None:
        return text
    spaces = max(1, len(comment.group(1)) - grown)
    lines[line] = lines[line][: comment.start(1)] + " " * spaces + lines[line][comment.end(1) :]
    return "".join(lines)


def _child_indent(gates: CommentedMap) -> int:
    """How far this file indents a gate's fields below its metric key."""
    for metric, node in gates.items():
        if isinstance(node, CommentedMap) and not node.fa.flow_style() and node:
            return int(node.lc.key(next(iter(node)))[1]) - int(gates.lc.key(metric)[1])
    return DEFAULT_INDENT


def apply_edit(text: str, path: str, edit: LimitsEdit) -> str:
    """`text` with the gate's limits set to `edit.new` and the evidence comment above them."""
    doc = _load(text, path)
    gates = doc["gates"]
    node = gates[edit.metric]
    limits = node.get("limits") if isinstance(node, CommentedMap) else None
    if isinstance(limits, CommentedMap) and _own(node, "limits"):
        _refuse_merged_sides(path, edit.metric, node, limits)
    if isinstance(node, CommentedMap) and "limits" in node and (not _own(node, "limits") or _shared(limits)):
        # The limits are another node's (an alias, or a `<<` merge): editing them there would change
        # every gate that shares them. This gate gets its own literal instead.
        full = {**_plain(limits), **edit.new} if isinstance(limits, CommentedMap) else dict(edit.new)
        text, key_line = _own_limits(text, path, node, full)
    elif isinstance(limits, CommentedMap) and set(edit.new) <= set(limits):
        # The usual case: the numbers are there; replace them right to left so positions stay valid.
        positions = sorted((limits.lc.value(side), side) for side in edit.new)
        for (line, col), side in reversed(positions):
            text = _replace(text, (line, col), NUMBER, number_text(edit.new[side]), path)
        key_line = int(node.lc.key("limits")[0])
    elif isinstance(limits, CommentedMap):
        # A side the file does not limit yet: the whole mapping is rewritten, in flow style.
        line, col = node.lc.value("limits")
        text = _replace_mapping(text, path, line, col, flow({**_plain(limits), **edit.new}))
        key_line = int(node.lc.key("limits")[0])
    elif isinstance(node, CommentedMap) and "limits" in node:
        line, col = node.lc.value("limits")
        text = _replace(text, (line, col), NULL, flow(edit.new), path)
        key_line = int(node.lc.key("limits")[0])
    elif isinstance(node, CommentedMap):
        text, key_line = _insert_limits(text, node, flow(edit.new))
        if node.fa.flow_style():
            key_line = int(gates.lc.key(edit.metric)[0])
    else:
        text, key_line = _expand_one_liner(text, path, gates, edit)
    lines = text.splitlines(keepends=True)
    return "".join(_with_comment(lines, key_line, edit.evidence))


def _limits_slot(node: CommentedMap) -> tuple[int, int]:
    """Where a new `limits:` line goes in a block mapping: right after `steps` / `constraint` (the
    documented order of fields) when the later of them holds a one-line value; else before the first key.
    Right after a key rather than before the next one, so that a comment above the next key stays its own."""
    keys = _own_keys(node)
    first_line, col = (int(x) for x in node.lc.key(keys[0]))
    before = [k for k in keys if k in ("steps", "constraint")]
    if not before:
        return first_line, col
    last = max(before, key=lambda k: int(node.lc.key(k)[0]))
    key_line, value_line = int(node.lc.key(last)[0]), int(node.lc.value(last)[0])
    value = node[last]
    block = isinstance(value, CommentedMap) and not value.fa.flow_style()
    return (key_line + 1, col) if key_line == value_line and not block else (first_line, col)


def _own(node: CommentedMap, key: str) -> bool:
    """Whether `key` is written in `node` itself rather than merged into it by `<<`."""
    return key in (node.lc.data or {})  # None in a mapping that holds nothing but a `<<` merge


def _refuse_merged_sides(path: str, metric: str, node: CommentedMap, limits: CommentedMap) -> None:
    """The gate's own limits, some of whose sides a `<<` merge key brings in: a number written elsewhere
    cannot be edited here without changing every mapping that merges it, and dropping the merge would
    change what the file says in more places than the limits' numbers."""
    merged = [str(side) for side in limits if not _own(limits, side)]
    if merged:
        line, col = (int(x) for x in node.lc.key("limits"))
        sides = ", ".join(f"`{side}`" for side in merged)
        raise InputError.at(
            Location(path, line + 1, col + 1),
            f"these limits take {sides} through a `<<` merge key; rebaseline edits only numbers written in "
            "the gate itself",
            dotted=f"gates.{metric}.limits",
            hint=f"write the limits out (`limits: {flow(_plain(limits))}`) in place of the merge, then run "
            "rebaseline --write again",
        )


def _own_keys(node: CommentedMap) -> list[Any]:
    return [key for key in node if _own(node, key)]


def _shared(value: Any) -> bool:
    """An anchored value (`&name`, or an alias `*name` of one): other gates may use the same node."""
    anchor = getattr(value, "anchor", None)
    return bool(anchor is not None and anchor.value)


ALIAS = re.compile(r"\*[^\s,\[\]{}]+")


def _own_limits(text: str, path: str, node: CommentedMap, full: Mapping[str, float]) -> tuple[str, int]:
    """Give the gate its own `limits:` literal: replace an alias (`limits: *lim`) by it, or add the key
    when the limits come through `<<`. An anchor defined at this gate is used by others: refused."""
    literal = flow(full)
    if _own(node, "limits"):
        line, col = (int(x) for x in node.lc.key("limits"))
        lines = text.splitlines(keepends=True)
        after = _line_start(lines, line) + col + len("limits")
        alias = re.compile(r"\s*:\s*").match(text, after)
        found = ALIAS.match(text, alias.end()) if alias else None
        if found is None:
            raise InputError.at(
                Location(path, line + 1, col + 1),
                "these limits carry an anchor (`&name`) that other gates may use; editing them here "
                "would change those gates too",
                hint=f"write `limits: {literal}` here by hand, and keep the anchor where it is shared",
            )
        return text[: found.start()] + literal + text[found.end() :], line
    return _insert_limits(text, node, literal)


def _insert_limits(text: str, node: CommentedMap, literal: str) -> tuple[str, int]:
    """A `limits:` key written into a gate's own mapping (first in a flow mapping; in a block mapping
    where `_limits_slot` puts it), and the line it is on."""
    if node.fa.flow_style():
        line, col = (int(x) for x in node.lc.key(_own_keys(node)[0]))
        lines = text.splitlines(keepends=True)
        start = _line_start(lines, line) + col
        return text[:start] + f"limits: {literal}, " + text[start:], line
    line, col = _limits_slot(node)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines[line - 1].endswith("\r\n") else "\n"
    if not lines[line - 1].endswith(("\n", "\r")):
        lines[line - 1] += newline
    lines.insert(line, f"{' ' * col}limits: {literal}{newline}")
    return "".join(lines), line


def _plain(limits: CommentedMap) -> dict[str, float]:
    return {str(k): float(v) for k, v in limits.items()}


def _replace_mapping(text: str, path: str, line: int, col: int, new: str) -> str:
    """Replace a flow mapping `{...}` that starts at (line, col) by `new`."""
    lines = text.splitlines(keepends=True)
    start = _line_start(lines, line) + col
    end = text.find("}", start)
    if text[start] != "{" or end < 0:
        raise InputError.at(
            Location(path, line + 1, col + 1),
            "cannot add a side to block-style limits in place",
            hint=f"write `limits: {new}` by hand",
        )
    return text[:start] + new + text[end + 1 :]


def _expand_one_liner(text: str, path: str, gates: CommentedMap, edit: LimitsEdit) -> tuple[str, int]:
    """`metric:` (or `metric: null`) becomes a mapping holding just `limits:`; its comment stays."""
    key_line, key_col = gates.lc.key(edit.metric)
    value_line, value_col = gates.lc.value(edit.metric)
    if value_line == key_line and NULL.match(
        text, _line_start(text.splitlines(keepends=True), key_line) + value_col
    ):
        text = _replace(text, (value_line, value_col), NULL, "", path)
    lines = text.splitlines(keepends=True)
    body = lines[key_line].rstrip("\r\n")
    lines[key_line] = body.rstrip(" ") + lines[key_line][len(body) :]  # `m: null` leaves no trailing space
    indent = key_col + _child_indent(gates)
    newline = "\r\n" if lines[key_line].endswith("\r\n") else "\n"
    if not lines[key_line].endswith(("\n", "\r")):
        lines[key_line] += newline
    lines.insert(key_line + 1, f"{' ' * indent}limits: {flow(edit.new)}{newline}")
    return "".join(lines), key_line + 1


def write_limits(path: Path, shown: str, gates_root: Path, test: str, edits: Sequence[LimitsEdit]) -> None:
    """Apply `edits` to the gate file at `path`; check that the result gives the edited gates their new
    limits and changes nothing else any gate of the file resolves to; then write it in place (through a
    symlink, keeping the file's permissions and line ends)."""
    try:
        original = path.read_bytes().decode("utf-8")  # bytes: reading text would turn CRLF into LF
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.at(Location(shown), f"cannot read the gate file to edit it: {exc}") from None
    text = original
    for edit in edits:
        text = apply_edit(text, shown, edit)
    before = _resolved(load_tree(gates_root, files=[path]), test, shown)
    # Checked beside the file (inside the gates root, so it inherits the same base files).
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        _check(load_tree(gates_root, files=[tmp]), before, shown, test, edits)
    finally:
        tmp.unlink(missing_ok=True)
    write_text(path, text, what="gate file")


def _resolved(tree: GateTree, test: str, shown: str) -> dict[str, dict[str, Any]]:
    """What each gate of `test` resolves to, without where it was written."""
    resolved = tree.tests.get(test)
    if resolved is None:
        return {}
    where = ("file", "line", "sources", "coordinate")
    return {
        gate.metric: {k: v for k, v in gate.as_json("").items() if k not in where} for gate in resolved.gates
    }


def _check(
    tree: GateTree,
    before: Mapping[str, Mapping[str, Any]],
    shown: str,
    test: str,
    edits: Sequence[LimitsEdit],
) -> None:
    after = _resolved(tree, test, shown)
    problems = "; ".join(p.message for p in tree.problems)
    edited = {edit.metric: edit for edit in edits}
    for edit in edits:
        got = after.get(edit.metric, {}).get("limits")
        wanted = {**(before.get(edit.metric, {}).get("limits") or {}), **edit.new}
        if tree.problems or got != wanted:
            raise InputError.at(
                Location(shown),
                f"the edited file would not give `{edit.metric}` the limits {flow(edit.new)}"
                + (f" ({problems})" if problems else ""),
                hint=f"nothing was written; set `limits: {flow(edit.new)}` by hand",
            )
    for metric, was in before.items():
        now = dict(after.get(metric, {}))
        if metric in edited:
            now["limits"] = was["limits"]
        if now != was:
            raise InputError.at(
                Location(shown),
                f"the edit would also change `{metric}`, which it does not name (a shared anchor or merge)",
                hint="nothing was written; give each gate its own `limits:` literal, then run again",
            )
