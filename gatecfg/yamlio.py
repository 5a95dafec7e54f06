"""Safe YAML loading that keeps the position of every key and value.

We compose the YAML node graph with ruamel.yaml and convert it to plain Python ourselves instead of
letting a constructor build objects: nothing in a gate file is ever instantiated, so no tag can run
code, and we see every duplicate key, alias expansion and position on the way. Standard scalars are
still converted by ruamel's safe constructor, so `1_000`, `0x10` and `.inf` mean what YAML says.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import BaseConstructor, SafeConstructor
from ruamel.yaml.error import ReusedAnchorWarning, YAMLError
from ruamel.yaml.events import (
    Event,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver

try:
    from ruamel.yaml.clib._ruamel_yaml import CParser  # type: ignore[import-not-found]
except ImportError:  # no compiler for the platform: the pure parser does it all, five times slower
    CParser = None

from gatecfg.errors import InputError, Location, Problem
from gatecfg.memory import collector_paused
from gatecfg.textio import read_bytes
from gatecfg.yaml_problems import check_breaks, check_version, decode, yaml_error

KeyPath = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_TAG}{name}" for name in ("str", "int", "float", "bool", "null")}
_MERGE_TAG = f"{_TAG}merge"
_STR_TAG = f"{_TAG}str"
# A gate file has a few hundred nodes; a document that expands past this through aliases is an
# alias bomb ("billion laughs"), not configuration.
MAX_NODES = 100_000
MAX_BYTES = 16_000_000
# A gate file nests five levels deep. Composing recurses once per level, in C for libyaml, which overflows
# the stack (a segfault, not an exception) somewhere past 10,000 levels; the pure parser hits Python's
# recursion limit near 300.
MAX_DEPTH = 64
# Only a document that could nest deeper than this is scanned for its depth before it is composed; libyaml
# composes 1,000 levels safely.
SCAN_ABOVE = 1_000
_OPENERS = ("[", "{", "-", "?", "\n")


@dataclass(frozen=True)
class LoadedDoc:
    """Plain data (dict/list/str/int/float/bool/None) plus where every piece of it was written."""

    path: str
    data: Any
    keys: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    values: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def location(self, path: KeyPath, *, key: bool = False) -> Location:
        """The location of the key (or value) at `path`, or of its nearest written ancestor."""
        probe = path
        while True:
            table = self.keys if key and probe in self.keys else self.values
            if probe in table:
                line, col = table[probe]
                return Location(self.path, line, col)
            if not probe:
                return Location(self.path, 1, 1)
            probe = probe[:-1]
            key = True

    def line_of(self, path: KeyPath) -> int:
        return self.location(path, key=True).line or 1


def dotted(path: KeyPath) -> str:
    """`('gates', 'train/grad_norm', 'constraint')` -> `gates.train/grad_norm.constraint`."""
    return ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")


def read_yaml(path: Path, display: str | None = None) -> LoadedDoc:
    """A YAML file of the gates folder: a regular file of at most MAX_BYTES (a FIFO, a socket or a device
    named `*.yaml` is an error, never a hang or an endless read)."""
    shown = display or str(path)
    hint = "a gate or base file is a plain file inside the gates folder"
    return load_yaml(read_bytes(path, shown, what="YAML file", limit=MAX_BYTES, hint=hint), shown)


def load_yaml(raw: bytes | str, path: str) -> LoadedDoc:
    # A large file makes hundreds of thousands of node, mark and value objects, none of them in a cycle;
    # the cyclic garbage collector would walk them all again at every generation-2 pass, which took more
    # than half of the time a 5 MB file loaded in. Paused for the load only.
    with collector_paused():
        return _load_yaml(raw, path)


def _load_yaml(raw: bytes | str, path: str) -> LoadedDoc:
    size = len(raw)
    if size > MAX_BYTES:
        raise InputError.at(
            Location(path, 1, 1),
            f"the file is {size / 1e6:.1f} MB; gatecfg reads YAML files of at most {MAX_BYTES / 1e6:g} MB",
            hint="a gate file declares a test's gates; split a generated one into a file per test",
        )
    text = decode(raw, path) if isinstance(raw, bytes) else raw
    check_breaks(text, path)
    check_version(text, path)
    if sum(text.count(opener) for opener in _OPENERS) > SCAN_ABOVE:
        _check_depth(text, path)
    constructor: BaseConstructor
    try:
        if _CLoader is None:
            raise YAMLError("ruamel.yaml.clib is not installed")
        loader = _CLoader(text)
        root, constructor = loader.get_single_node(), loader
    except YAMLError:
        # libyaml (ruamel.yaml.clib) composes ten times faster; the pure parser words its errors
        # better and the same on every machine, so a document libyaml rejects is composed again.
        yaml = _yaml(pure=True)
        root, constructor = _compose_or_raise(yaml, text, path), yaml.constructor
    if root is None:
        raise InputError.at(
            Location(path, 1, 1),
            "the file is empty" if not text.strip() else "the file holds only comments",
            hint="a gate file starts with `test:` and `gates:`; a base file with `version: 1`",
        )
    doc = LoadedDoc(path, None)
    converter = _Converter(doc, constructor)
    data = converter.convert(root, ())
    return LoadedDoc(path, data, doc.keys, doc.values)


@functools.cache
def _yaml(*, pure: bool) -> YAML:
    """One instance per parser: building a YAML object costs as much as composing a small file."""
    yaml = YAML(typ="safe", pure=pure)
    yaml.Resolver = _Resolver
    return yaml


def _compose_or_raise(yaml: YAML, text: str, path: str) -> Node | None:
    try:
        with warnings.catch_warnings():
            # libyaml refuses a reused anchor name; the pure parser only warns, on stderr. The converter
            # refuses it at the second anchor, for both.
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            return yaml.compose(text)  # type: ignore[no-any-return]
    except YAMLError as exc:
        raise yaml_error(exc, text, path) from None
    except RecursionError:
        # Only a document that libyaml rejected lands here, nested too deep for the pure composer.
        _check_depth(text, path)
        raise InputError.at(
            Location(path, 1, 1), f"invalid YAML: nested more than {MAX_DEPTH} levels deep"
        ) from None


def _check_depth(text: str, path: str) -> None:
    """Reject a document nested deeper than MAX_DEPTH at the first node too deep, before anything recurses
    into it. The parser's event stream is flat: reading it never recurses, whatever the nesting. libyaml's
    parser reads it ten times faster; a document it rejects is read again by the pure one, whose error
    `_compose_or_raise` words the same on every machine."""
    try:
        if _CLoader is None:
            raise YAMLError("ruamel.yaml.clib is not installed")
        loader = _CLoader(text)
        _deepest(iter(loader.get_event, None), path)
    except YAMLError:
        try:
            _deepest(_yaml(pure=True).parse(text), path)
        except YAMLError as exc:
            raise yaml_error(exc, text, path) from None


_OPEN = {MappingStartEvent: 1, SequenceStartEvent: 1, MappingEndEvent: -1, SequenceEndEvent: -1}


def _deepest(events: Iterator[Event], path: str) -> None:
    depth = 0
    step = _OPEN.get
    for event in events:
        # A dictionary lookup by exact class: this loop runs once per event of a file of any size.
        change = step(type(event), 0)
        if change:
            depth += change
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise InputError.at(
                    Location(path, mark.line + 1, mark.column + 1),
                    f"nested more than {MAX_DEPTH} levels deep",
                    hint="a gate file nests a few levels; write the value out flat",
                )
        elif type(event) is StreamEndEvent:
            return


class _Resolver(VersionedResolver):
    """ruamel's resolver, minus its cost: it looks up the YAML version of the document for every node it
    resolves, and with the C parser (which has no Python scanner) through an AttributeError each time,
    which was most of the time a large gate file took to load. The version is read as ruamel reads it:
    the pure scanner's `%YAML` directive, else the loader's version, else YAML 1.2."""

    @property
    def processing_version(self) -> Any:
        scanner = getattr(self.loadumper, "_scanner", None)
        version = getattr(scanner, "yaml_version", None)
        return version or self._loader_version or (1, 2)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # The tag of a plain scalar depends on its text only (and the version): a large file repeats
        # its numbers and keys, so each text's tag is matched against the regular expressions once.
        if kind is ScalarNode and implicit[0]:
            key = (value, self.processing_version)
            found = self._plain_tags.get(key)
            if found is None:
                found = self._plain_tags[key] = super().resolve(kind, value, implicit)
            return found
        return super().resolve(kind, value, implicit)

    @functools.cached_property
    def _plain_tags(self) -> dict[tuple[str, Any], Any]:
        return {}


_CLoader: Any = None
if CParser is not None:

    class _CLoader(CParser, SafeConstructor, _Resolver):  # type: ignore[misc,no-redef]
        """ruamel's C loader (libyaml parses and composes), resolving and constructing scalars as
        `YAML(typ="safe")` does: composing in C is most of the gain on a large file."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            self._parser = self._composer = self
            SafeConstructor.__init__(self, loader=self)
            _Resolver.__init__(self, loadumper=self)
            self._table: Any = None

        @property
        def versioned_resolver(self) -> Any:
            # libyaml reads no `%YAML` directive: one version, so one table, for the whole file.
            if self._table is None:
                self._table = _Resolver.versioned_resolver.fget(self)  # type: ignore[attr-defined]
            return self._table

        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            # One version for the file (above): a plain scalar's tag is its text's, looked up directly.
            if kind is ScalarNode and implicit[0]:
                found = self._by_text.get(value)
                if found is None:
                    found = self._by_text[value] = _Resolver.resolve(self, kind, value, implicit)
                return found
            return _Resolver.resolve(self, kind, value, implicit)

        @functools.cached_property
        def _by_text(self) -> dict[str, Any]:
            return {}


class _Converter:
    """Node graph -> plain data, recording positions; rejects tags, duplicate keys and alias bombs.

    Every node is converted once where it is written; a node reached again, through an alias or a merge
    key (`<<`), costs the budget one unit per value it expands to. So an honest file of any size (up to
    MAX_BYTES) loads, and the work an expanding one makes is bounded by MAX_NODES, however it nests."""

    def __init__(self, doc: LoadedDoc, constructor: BaseConstructor) -> None:
        self.doc = doc
        self.constructor = constructor
        self.budget = MAX_NODES
        self.seen: set[int] = set()
        self.stack: set[int] = set()
        self.anchors: dict[str, tuple[int, int]] = {}  # name -> (id of its node, line)

    def fail(self, node: Node, message: str, path: KeyPath, hint: str | None = None) -> InputError:
        loc = Location(self.doc.path, node.start_mark.line + 1, node.start_mark.column + 1)
        return InputError([Problem(loc, message, dotted=dotted(path), hint=hint)])

    def spend(self, node: Node, path: KeyPath) -> None:
        """Charge a collection reached again (an expansion) to the budget, one unit for it and one per
        item or pair, so that its scalars need no bookkeeping of their own; the first visit is free."""
        if isinstance(node, ScalarNode):
            return
        if id(node) not in self.seen:
            self.seen.add(id(node))
            return
        self.budget -= 1 + len(node.value)
        if self.budget >= 0:
            return
        # Deep inside the expansion both the node (an anchor's definition) and the list indices mean
        # nothing to the reader: name the nearest key whose value blows up.
        keyed = path
        while keyed and isinstance(keyed[-1], int):
            keyed = keyed[:-1]
        raise InputError(
            [
                Problem(
                    self.doc.location(keyed, key=True),
                    f"the value expands to more than {MAX_NODES} values through aliases and merge keys",
                    dotted=dotted(keyed),
                    hint="write the values out instead of nesting aliases or `<<` merges",
                )
            ]
        )

    def convert(self, node: Node, path: KeyPath) -> Any:
        self.spend(node, path)
        self.doc.values.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if len(path) > MAX_DEPTH:
            # Aliases of aliases nest without the text nesting: each level is one more recursion here.
            raise self.fail(
                node,
                f"nested more than {MAX_DEPTH} levels deep",
                _outer_keys(path),
                hint="a gate file nests a few levels; write the value out flat",
            )
        anchor = node.anchor
        if anchor:
            first = self.anchors.setdefault(str(anchor), (id(node), node.start_mark.line + 1))
            if first[0] != id(node):
                raise self.fail(
                    node,
                    f"anchor `&{anchor}` is defined twice (first on line {first[1]})",
                    path,
                    hint="give each anchor its own name: an alias would quietly mean the last one",
                )
        if id(node) in self.stack:
            raise self.fail(
                node,
                "an alias refers to the mapping or list that contains it",
                path,
                hint="an anchor cannot contain its own alias; write the values out",
            )
        tag = _tag(node)
        if isinstance(node, ScalarNode):
            return self.scalar(node, tag, path)
        self.stack.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self.mapping(node, tag, path)
            if isinstance(node, SequenceNode):
                self.check_tag(node, tag, f"{_TAG}seq", path)
                return [self.item(item, (*path, i)) for i, item in enumerate(node.value)]
        finally:
            self.stack.discard(id(node))
        raise self.fail(node, "unsupported YAML node", path)

    def item(self, node: Node, path: KeyPath) -> Any:
        """`convert`, with a shortcut for what most of a large file is: an untagged, unanchored scalar
        (a string, or a number or boolean the resolver recognised), whose value needs no checks."""
        ctag = node.ctag
        if type(node) is not ScalarNode or node.anchor or ctag.handle is not None or len(path) > MAX_DEPTH:
            return self.convert(node, path)
        mark = node.start_mark
        self.doc.values.setdefault(path, (mark.line + 1, mark.column + 1))
        tag = ctag.suffix
        if tag == _STR_TAG:
            return node.value
        # libyaml gives `!!null xyz` the same tag as a resolved `null`: the text says which it was.
        if tag in _SCALAR_TAGS and _reads_as(node.value, tag):
            try:
                return self.constructor.yaml_constructors[tag](self.constructor, node)
            except (ValueError, KeyError, TypeError, OverflowError):
                pass  # an explicit tag on text it cannot convert (`!!float abc`): `scalar` says where
        return self.convert(node, path)

    def check_tag(self, node: Node, tag: str, expected: str, path: KeyPath) -> None:
        if tag != expected:
            raise self.fail(
                node,
                f"YAML tag `{_short_tag(tag)}` is not allowed",
                path,
                hint="gate files hold plain values; remove the tag",
            )

    def scalar(self, node: ScalarNode, tag: str, path: KeyPath) -> Any:
        if tag == _STR_TAG:
            return str(node.value)  # what the constructor would return, without its dispatch
        if tag == f"{_TAG}timestamp":
            return str(node.value)  # no field takes a date: keep the text so the error quotes it
        if tag not in _SCALAR_TAGS:
            self.check_tag(node, tag, _STR_TAG, path)
        if not _reads_as(node.value, tag):
            # An explicit tag on text of another type: the constructors are lenient (`!!null xyz` is None,
            # `!!bool yes` True, as YAML 1.1 read them), so the text must be what YAML 1.2 reads as that type.
            name = _short_tag(tag)
            raise self.fail(
                node,
                f"`{name} {node.value}` is not a valid {name.removeprefix('!!')} in YAML 1.2",
                path,
                hint=f"remove the `{name}` tag, or write a value of that type",
            )
        try:
            # The constructor's own table, without construct_object's bookkeeping for recursive objects
            # (a scalar is never one) and its per-node tag decoding.
            return self.constructor.yaml_constructors[tag](self.constructor, node)
        except (ValueError, KeyError, TypeError, OverflowError):
            # Only an explicit tag gets here (`!!float abc`): untagged text resolves to what it reads as.
            name = _short_tag(tag)
            raise self.fail(
                node,
                f"`{name} {node.value}` is not a valid {name.removeprefix('!!')}",
                path,
                hint=f"remove the `{name}` tag, or write a value of that type",
            ) from None

    def mapping(
        self, node: MappingNode, tag: str, path: KeyPath, skip: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Keys in `skip` are already written nearer (merge keys): their values and positions lose."""
        self.check_tag(node, tag, f"{_TAG}map", path)
        out: dict[str, Any] = {}
        first_seen: dict[str, int] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            key_tag = _tag(key_node)
            if key_tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode) or key_tag != _STR_TAG:
                raise self.fail(
                    key_node,
                    f"keys must be strings, got `{_source_text(key_node)}`",
                    path,
                    hint="quote the key",
                )
            key = str(key_node.value)
            if key in first_seen:
                raise self.fail(
                    key_node,
                    f"duplicate key `{key}` (first written on line {first_seen[key]})",
                    (*path, key),
                    hint="remove one of the two; YAML would silently keep only the last",
                )
            first_seen[key] = key_node.start_mark.line + 1
            if key in skip:
                continue
            child = (*path, key)
            self.doc.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if _is_empty(value_node):
                # An empty value's mark is wherever the next token starts, often the next line:
                # the key is where the reader wrote `enforce:` and left it empty.
                self.doc.values.setdefault(child, self.doc.keys[child])
            out[key] = self.item(value_node, child)
        # Merged after the explicit keys, whatever the order in the file, so that an overridden
        # merged value never records its position over the key that really wins.
        for merge in merges:
            self.spend(merge, path)
            for source in merge.value if isinstance(merge, SequenceNode) else [merge]:
                if not isinstance(source, MappingNode):
                    raise self.fail(
                        source,
                        "`<<` merges mappings only",
                        path,
                        hint="merge an anchored mapping: `<<: *name` where `&name` marks a mapping",
                    )
                if id(source) in self.stack:
                    raise self.fail(
                        source,
                        "`<<` merges the mapping that contains it",
                        path,
                        hint="a mapping cannot merge itself; merge another anchored mapping",
                    )
                self.spend(source, path)
                self.stack.add(id(source))
                try:
                    out.update(self.mapping(source, _tag(source), path, skip | frozenset(out)))
                finally:
                    self.stack.discard(id(source))
        return out


def _outer_keys(path: KeyPath, keep: int = 3) -> KeyPath:
    """The first few keys of a very deep path: enough for the reader to find the value."""
    keys = [part for part in path if isinstance(part, str)]
    return tuple(keys[:keep])


def _is_empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.value == "" and not node.style  # plain: None or ""


@functools.cache
def _implicit_table() -> dict[str | None, list[tuple[str, re.Pattern[str]]]]:
    """YAML 1.2's resolver table: the (tag, pattern) pairs to try, by the text's first character."""
    return dict(_yaml(pure=True).resolver.versioned_resolver)


def _implicit_tag(text: str) -> str:
    """The tag YAML 1.2 gives `text` as a plain scalar, as `BaseResolver.resolve` finds it, without the
    per-call version lookups and Tag objects that cost more than the match (every number of a large file
    is checked)."""
    table = _implicit_table()
    for tag, pattern in [*table.get(text[:1], ()), *table.get(None, ())]:
        if pattern.match(text):
            return str(tag)
    return _STR_TAG


def _reads_as(text: str, tag: str) -> bool:
    """Whether a scalar tagged `tag` holds text YAML 1.2 reads as that type (a whole number is a float)."""
    implicit = _implicit_tag(text)
    return implicit == tag or (tag == f"{_TAG}float" and implicit == f"{_TAG}int")


def _tag(node: Node) -> str:
    """`str(node.tag)`, without ruamel's URI decoding for the resolved tags that need none."""
    ctag = node.ctag
    return str(ctag.suffix) if ctag.handle is None else str(ctag)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


def _source_text(node: Node) -> str:
    return str(node.value) if isinstance(node, ScalarNode) else type(node).__name__
