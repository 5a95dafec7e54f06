"""Logger formats for `--record`, detected from the file's content: TensorBoard event files, a Weights &
Biases history export (CSV or a JSON array of rows with `_step`), and an MLflow file store run.

Each reader feeds the points into the records builder, so a record in any format is judged exactly as the
equivalent JSON Lines, with the same errors at `file:line` (`file:N` with N the record's number in a
TensorBoard file or a JSON array). Only TensorBoard's binary format needs a library (its own record reader
and compat layers, in the `tensorboard` extra); W&B exports and MLflow's metric files are text, read with
the standard library.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from gatecfg.errors import InputError, Location, RecordError
from gatecfg.records.builder import JSON_DECODER, RECORD_HINT, DuplicateKeyError, read_record_text
from gatecfg.records.values import shorten
from gatecfg.textio import open_user_file

if TYPE_CHECKING:
    from gatecfg.records.builder import _Builder

Kind = Literal["jsonl", "tensorboard", "wandb-csv", "wandb-json", "mlflow"]

# A TFRecord starts with an 8-byte length and a 4-byte CRC; an event file's first record names the format.
_TB_MARK = b"brain.Event:"
# An MLflow metric line (`timestamp value step`), or one with the wrong number of fields, which the reader
# then names at its line.
_MLFLOW_LINE = re.compile(r"-?\d+([ \t]+\S+)+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_STEP_CELL_HINT = "every row of a W&B history export has its step in the `_step` column"
# What a tensor of a dtype that is no number holds, by numpy's dtype kind (strings come back as objects).
_TENSOR_KINDS = {"O": "string", "S": "string", "U": "string", "c": "complex", "b": "boolean"}
# TensorBoard event files are read a record at a time (memory bounded by the file's own size, through
# `_Bounded`); this bounds the time one takes. Images and histograms make large files: 8 GB is far above
# any run's scalars.
MAX_EVENT_FILE_BYTES = 8_000_000_000
# The longest first line read to tell a format (a W&B export's header names every metric).
MAX_HEADER_BYTES = 16_000_000
_TB_HINT = "pip install 'gatecfg[tensorboard]' (TensorBoard's own reader reads the event files)"


def _csv_cells(line: str) -> list[str]:
    """The cells of a first line read as CSV; none when it is no CSV (a carriage return inside, say)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return []


def sniff(path: str) -> Kind:
    """The format of a record file or folder, from what it holds (a folder's event files by their name)."""
    given = Path(path)
    if given.is_dir():
        # A run folder (`metrics/` in it), else event files, else a folder inside a run's `metrics/`: an
        # ancestor that is merely named `metrics` (`~/metrics/tb/run1`) makes no MLflow run.
        if (given / "metrics").is_dir():
            return "mlflow"
        if _event_files(given):
            return "tensorboard"
        if _inside_metrics(given) is not None:
            return "mlflow"
        raise RecordError.at(
            Location(path),
            "is a folder that holds neither an MLflow run (metrics/) nor TensorBoard event files",
            hint=RECORD_HINT,
        )
    with _open_record(path) as handle:
        head = handle.read(4096)
        if not _is_event_file(head) and not re.search(b"[\r\n]", head.lstrip(b"\xef\xbb\xbf \t\r\n")):
            # A first line longer than that (a W&B header of many metrics) is read whole: what it holds
            # decides the format.
            head += handle.readline(MAX_HEADER_BYTES)
    if _is_event_file(head):
        return "tensorboard"
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    first = _LINE_BREAK.split(text, maxsplit=1)[0].strip()
    if re.match(r"\[\s*[{\]]", text):  # an array of rows; a JSON Lines file holds objects, one a line
        return "wandb-json"
    if _MLFLOW_LINE.fullmatch(first):
        return "mlflow"
    # A header of names (no JSON value starts with a letter or `_`, `/`): a CSV, with `_step` or not.
    if re.match(r"[A-Za-z_/]", first) and len(_csv_cells(first)) >= 2:
        return "wandb-csv"
    return "jsonl"


def read(kind: Kind, path: str, builder: _Builder) -> None:
    if kind == "tensorboard":
        _tensorboard(path, builder)
    elif kind == "wandb-csv":
        _wandb_csv(path, builder)
    elif kind == "wandb-json":
        _wandb_json(path, builder)
    elif kind == "mlflow":
        _mlflow(path, builder)
    else:
        raise AssertionError(kind)


def _is_event_file(head: bytes) -> bool:
    """Whether a file's first bytes are a TFRecord whose first record names the event format: an 8-byte
    little-endian length, its 4-byte CRC, then the record, which holds `brain.Event:`. The length of a
    real first record is small; the first eight bytes of a text file (`{"_step"`) read as a length are
    above 2^56, so a JSON Lines file that mentions `brain.Event:` stays JSON Lines."""
    length = int.from_bytes(head[:8], "little")
    return len(head) >= 12 and 0 < length <= 1 << 20 and _TB_MARK in head[12 : 12 + length]


def _open_record(path: str) -> AbstractContextManager[BinaryIO]:
    """A record file, open in binary once it is known to be a regular file within the size a reader takes
    (`textio.open_user_file`); its problems as RecordErrors."""
    try:
        return open_user_file(
            Path(path), path, what="record file", limit=MAX_EVENT_FILE_BYTES, hint=RECORD_HINT
        )
    except InputError as exc:
        raise RecordError(exc.problems) from None


def _event_files(folder: Path) -> list[Path]:
    # Not only regular files: a FIFO or device named like an event file is refused when it is read.
    return sorted(p for p in folder.rglob("*tfevents*") if not p.is_dir())


def _tensorboard(path: str, builder: _Builder) -> None:
    try:
        import tensorboard  # noqa: F401  # the extra; its reader's parts load where they are used
    except ImportError:
        raise RecordError.at(
            Location(path),
            "is a TensorBoard event record, and the tensorboard extra is not installed",
            hint=_TB_HINT,
        ) from None
    from tensorboard.util import tensor_util

    given = Path(path)
    files = [str(f) for f in _event_files(given)] if given.is_dir() else [path]
    for file in files:
        builder.add_file(file)
        for number, event in _events(file):
            for value in event.summary.value:
                location = Location(file, number)
                plugin = value.metadata.plugin_data.plugin_name
                if plugin != "scalars":
                    # A histogram, image or text under a gated metric's tag is no value it can judge: a
                    # point that is no number, an error there (and nothing where no gate reads the tag).
                    builder.add_point(value.tag, event.step, _Summary(plugin), location)
                    continue
                array = tensor_util.make_ndarray(value.tensor)
                if array.dtype.kind not in "iuf":
                    # A string, complex or boolean tensor under the scalars plugin: no number a gate reads.
                    raise RecordError.at(
                        location,
                        f"the scalar is a {_TENSOR_KINDS.get(array.dtype.kind, array.dtype.name)} tensor, "
                        "not a number",
                        dotted=value.tag,
                        hint="log the metric as a float (add_scalar / tf.summary.scalar of a number)",
                    )
                logged: object = float(array) if array.size == 1 else array.tolist()
                builder.add_point(value.tag, event.step, logged, location)


def _events(file: str) -> Iterator[tuple[int, Any]]:
    """Each event of a file with its record number, brought to today's form: a scalar is a tensor of the
    `scalars` plugin whether tf.summary, tensorboardX or torch wrote it (a float32 `simple_value`, or a
    tensor). TensorBoard's `EventFileLoader` does the same with these same parts, but stops without a word
    at a truncated or corrupt record, and a gate would judge part of a run."""
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

    with _open_record(file) as handle:  # a FIFO or device is refused here, before TensorBoard opens it
        reader = pywrap_tensorflow.PyRecordReader_New(file)
        # TensorBoard's reader reads as many bytes as a record's length field says, allocating them first:
        # a damaged or hostile length of 2^62 is a MemoryError. Through this handle a read stops at the
        # file's end, so such a record reads as truncated.
        reader.file_handle.close()
        reader.file_handle = _Bounded(handle, os.fstat(handle.fileno()).st_size)
        yield from _records(file, reader)


def _records(file: str, reader: Any) -> Iterator[tuple[int, Any]]:
    from google.protobuf.message import DecodeError
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors

    first_metadata: dict[str, Any] = {}  # per tag, as dataclass_compat keeps it across a run
    for number in itertools.count(1):
        try:
            reader.GetNext()
            event = event_pb2.Event.FromString(reader.record())
        except errors.OutOfRangeError:
            return
        except (errors.DataLossError, DecodeError) as exc:
            damage = "truncated" if "truncated" in str(exc) else "corrupt"
            raise RecordError.at(
                Location(file, number),
                f"event record {number} is {damage}",
                hint="a writer killed mid-write, or a damaged copy; the run's metrics are not all there",
            ) from None
        for migrated in dataclass_compat.migrate_event(data_compat.migrate_event(event), first_metadata):
            yield number, migrated


_SUMMARY_KINDS = {"histograms": "histogram", "images": "image", "audio": "audio", "text": "text"}


class _Summary:
    """A TensorBoard summary that is not a scalar, as a logged value: its text names what it is."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin

    def __repr__(self) -> str:
        kind = _SUMMARY_KINDS.get(self.plugin) or repr(self.plugin or "untyped")
        return f"a TensorBoard {kind} summary"


class _Bounded:
    """A binary file whose reads never ask for more than what is left of it."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self._handle = handle
        self._size = size

    def read(self, n: int) -> bytes:
        return self._handle.read(max(0, min(n, self._size - self._handle.tell())))

    def close(self) -> None:
        self._handle.close()


def _cell(text: str) -> object:
    """A CSV cell as the JSON value it spells (numbers, NaN, Infinity), else the text itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: `[[[[...`, nested past Python's limit
        return text


def _wandb_csv(path: str, builder: _Builder) -> None:
    text = read_record_text(path)
    builder.add_file(path)
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))  # any line ending
    try:
        _wandb_rows(path, reader, builder)
    except csv.Error as exc:
        # A field past csv's limit (131,072 characters) is no metric value, nor is a NUL.
        raise RecordError.at(
            Location(path, max(1, reader.line_num)),  # the lines read, the one that failed included
            f"malformed CSV: {exc}",
            hint="export the run's history again as CSV: one row per step, one number per cell",
        ) from None


def _wandb_rows(path: str, reader: Any, builder: _Builder) -> None:
    """The rows of a W&B history export, each cell paired with its column. Not csv.DictReader, which
    fills every missing cell of a short row and so costs rows x columns: a header of 200,000 columns
    above rows of one cell would keep `evaluate` busy for minutes over a 1.5 MB file."""
    header: list[str] = next(reader, [])
    first: dict[str, int] = {}
    for col, name in enumerate(header):
        if name in first:
            # A dict would keep the last column of the name: a regressed value could vanish.
            raise RecordError.at(
                Location(path, 1),
                f"column `{name}` appears twice in the header (columns {first[name] + 1} and {col + 1})",
                dotted=name,
                hint="a W&B history export names each metric once: export it again",
            )
        first[name] = col
    if "_step" not in first and "step" not in first:
        raise RecordError.at(
            Location(path, 1),
            f"is a CSV whose header has no `_step` column (it starts {shorten(', '.join(header))})",
            dotted="_step",
            hint="export the run's history from W&B (run page, Files or the API's run.history()) as CSV: "
            "a `_step` column and one column per metric",
        )
    for cells in reader:
        if not cells:
            continue  # a blank line
        location = Location(path, reader.line_num)
        if len(cells) > len(header):
            raise RecordError.at(
                location,
                f"the row has more cells than the header's {len(header)}",
                hint="export the run's history again: each row needs one cell per column",
            )
        # An empty cell is a metric not logged at this step (W&B histories are sparse).
        values = {key: _cell(cell) for key, cell in zip(header, cells, strict=False) if cell != ""}
        if "_step" not in values and "step" not in values:
            raise RecordError.at(
                location, "the row has no `_step`", dotted="_step", hint="every row needs its step"
            )
        builder.add_row(values, location)


def _wandb_json(path: str, builder: _Builder) -> None:
    text = read_record_text(path)
    builder.add_file(path)
    try:
        rows = JSON_DECODER.decode(text)
    except DuplicateKeyError as exc:
        raise RecordError.at(
            Location(path, _line_of(text, exc.key)),
            f"key {json.dumps(exc.key)} appears twice in one row",
            dotted=exc.key,
            hint="json would keep the last one and a logged value would vanish: export the history again",
        ) from None
    except json.JSONDecodeError as exc:
        raise RecordError.at(
            Location(path, exc.lineno, exc.colno),
            f"malformed JSON: {exc.msg}",
            hint='a W&B history export is a JSON array of rows, e.g. [{"_step": 0, "train/loss": 2.3}]',
        ) from None
    except (RecursionError, ValueError):
        raise RecordError.at(
            Location(path), "malformed JSON: nested too deeply or a number too long"
        ) from None
    for number, row in enumerate(rows, start=1):
        location = Location(path, number)
        if type(row) is not dict or not ("_step" in row or "step" in row):
            raise RecordError.at(
                location,
                f"record {number} is not a row with `_step`",
                hint='each element is a row of the history, e.g. {"_step": 3, "train/loss": 1.9}',
            )
        # pandas writes a metric not logged at a step as null: not a point, as an empty CSV cell. A null
        # step stays, and is refused as a step.
        builder.add_row({k: v for k, v in row.items() if v is not None or k in _STEP_KEYS}, location)


_STEP_KEYS = ("_step", "step")
_BETWEEN_ROWS = re.compile(r"[\s,]*")


def _line_of(text: str, key: str) -> int:
    """The line of the second `"key":` in the first row that repeats it (json gives no position): the rows
    are decoded again one by one; where the key is spelled with escapes, the line the row starts on."""
    pattern = re.compile(re.escape(json.dumps(key, ensure_ascii=False)) + r"\s*:")
    index = text.index("[") + 1
    while True:
        index = _BETWEEN_ROWS.match(text, index).end()  # type: ignore[union-attr]  # matches empty text
        try:
            _, index = JSON_DECODER.raw_decode(text, index)
        except DuplicateKeyError:
            found = list(itertools.islice(pattern.finditer(text, index), 2))
            return text.count("\n", 0, found[1].start() if len(found) == 2 else index) + 1
        except ValueError:
            return 1


def _inside_metrics(path: Path) -> Path | None:
    """The `metrics` folder of the MLflow run that `path` is in (a run folder holds `meta.yaml` beside
    `metrics/`), or None: a folder that is merely named `metrics` makes no run."""
    for parent in (path, *path.parents):
        if parent.name == "metrics" and (parent.parent / "meta.yaml").is_file():
            return parent
    return None


def _mlflow(path: str, builder: _Builder) -> None:
    """A run's metric files: `metrics/<key>` (a key with `/` is a subfolder), lines `timestamp value step`."""
    given = Path(path)
    root = given / "metrics" if (given / "metrics").is_dir() else _inside_metrics(given) or given.parent
    # Not only regular files: a FIFO or device in metrics/ is refused when it is read, not skipped.
    files = sorted(p for p in root.rglob("*") if not p.is_dir()) if given.is_dir() else [given]
    for file in files:
        shown = str(file)
        metric = file.relative_to(root).as_posix()
        builder.add_file(shown)
        for number, line in enumerate(_LINE_BREAK.split(read_record_text(shown)), start=1):
            if not line.strip():
                continue
            location = Location(shown, number)
            fields = line.split()
            if len(fields) not in (2, 3):
                raise RecordError.at(
                    location,
                    f"has {len(fields)} fields, not `timestamp value step`",
                    dotted=metric,
                    hint="an MLflow metric file has one `timestamp value step` line per logged point",
                )
            step: object = fields[2] if len(fields) == 3 else "0"  # MLflow reads a line without step as 0
            builder.add_point(metric, _integer(step), _number(fields[1]), location)


def _integer(text: object) -> object:
    try:
        return int(str(text))
    except ValueError:
        return text


def _number(text: str) -> object:
    try:
        return float(text)  # MLflow writes Python's repr: 0.5, nan, inf, -inf
    except ValueError:
        return text
