"""Base files: each loaded once, the chain of files it `extends`, the one nearest a gate file
(docs/gate-language.md, "Inheritance precedence")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gatecfg.errors import InputError, Location, Problem
from gatecfg.gate_files import BASE_NAME, display_path, is_gate_file
from gatecfg.models import BaseFile
from gatecfg.parse import parse_doc
from gatecfg.yamlio import LoadedDoc, read_yaml


@dataclass(frozen=True)
class Base:
    path: Path
    doc: LoadedDoc
    model: BaseFile

    def source(self, *key: str | int) -> str:
        return f"{self.doc.path}:{self.doc.line_of(key)}"


class BaseFiles:
    """The base files under a gates root, each loaded once, and their `extends` chains; `problems`
    collects what is wrong with them."""

    def __init__(self, root: Path, problems: list[Problem]) -> None:
        self.root = root
        self.problems = problems
        self.bases: dict[Path, Base | None] = {}
        self.chains: dict[Path, tuple[Base, ...] | None] = {}

    def inside(self, path: Path, shown: str) -> bool:
        """Whether the file really lives under the gates root. A symlink out of it is refused, as `extends`
        out of it is: a change to the gates folder must not read (and quote in errors) files elsewhere."""
        real = path.resolve()
        if real.is_relative_to(self.root):
            return True
        self.problems.append(
            Problem(
                Location(shown, 1, 1),
                f"is a link to {display_path(real)}, outside the gates root {display_path(self.root)}",
                hint="gate and base files live inside the gates folder: copy the file in, do not link it",
            )
        )
        return False

    def base(self, path: Path, shown: str | None = None) -> Base | None:
        shown = shown or display_path(path)
        path = path.resolve()  # one entry per real file, however it is reached
        if path not in self.bases:
            self.bases[path] = None
            if not self.inside(path, shown):
                return None
            try:
                doc = read_yaml(path, shown)
                self.bases[path] = Base(path, doc, parse_doc(doc, BaseFile))
            except InputError as exc:
                self.problems.extend(exc.problems)
        return self.bases[path]

    def chain(self, start: Path) -> tuple[Base, ...] | None:
        """The base file at `start` and every file it extends, nearest first; None if any is broken."""
        if start in self.chains:
            return self.chains[start]
        chain: list[Base] = []
        path = start
        while True:
            base = self.base(path)
            if base is None:
                break
            chain.append(base)
            if base.model.extends is None:
                self.chains[start] = tuple(chain)
                return self.chains[start]
            target = (path.parent / base.model.extends).resolve()
            loc = base.doc.location(("extends",))
            if not target.is_relative_to(self.root):
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` is outside the gates root {display_path(self.root)}",
                        dotted="extends",
                        hint="base files may only extend files inside the gates folder",
                    )
                )
                break
            if not target.is_file():
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` does not exist ({display_path(target)})",
                        dotted="extends",
                        hint="the path is relative to the folder of this base file",
                    )
                )
                break
            if is_gate_file(target):
                self.problems.append(
                    Problem(
                        loc,
                        f"`{base.model.extends}` is a gate file (it has `test:`/`gates:`), not a base file",
                        dotted="extends",
                        hint="extend a base file (`version: 1` with `defaults:`/`policy:`)",
                    )
                )
                break
            if any(b.path == target for b in chain):
                cycle = " -> ".join([*(b.doc.path for b in chain), display_path(target)])
                self.problems.append(
                    Problem(
                        loc,
                        f"base files extend each other in a cycle: {cycle}",
                        dotted="extends",
                        hint="remove `extends:` from one of them",
                    )
                )
                break
            path = target
        self.chains[start] = None
        return None

    def nearest_base(self, gate_file: Path) -> Path | None:
        """The `base.yaml` of the gate file's folder or the nearest folder above it, up to the root."""
        folder = gate_file.parent
        while True:
            candidate = folder / BASE_NAME
            if candidate.is_file():
                return candidate
            if folder == self.root or not folder.is_relative_to(self.root):
                return None
            folder = folder.parent
