"""Scored chunks as CSV or JSONL lines, and the files they become: one per input file, rows in its order."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Iterable, Optional, Sequence

import numpy as np
from apache_beam.io.filesystems import FileSystems

from components.scoring.rows import Chunk
from trainer import tasks

FORMATS = ("csv", "jsonl")
LINE = "line"  # the row's line number in its input file
REJECT_COLUMNS = ("file", "line", "reason")
REJECTS_FILE = "rejects.csv"


@dataclasses.dataclass(frozen=True)
class Layout:
    """The output's columns: the line number, the kept columns, then each serving output's columns (a 2-D
    output has one per class: `probability_<class>` for the probabilities, in the label vocabulary's order)."""
    keep: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[str, ...]], ...]  # (serving output, its columns)
    format: str = "csv"
    # The names of class_id 0 and 1 (a binary task on a string label): a class_name column follows class_id.
    id_names: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return [LINE, *self.keep, *(c for _, names in self.outputs for c in names)]

    def header(self) -> bytes:
        return _csv([self.columns]) if self.format == "csv" else b""

    def lines(self, chunk: Chunk, outputs: dict[str, np.ndarray]) -> bytes:
        if not chunk.lines:
            return b""
        values = [chunk.lines, *([c.decode("utf-8", "replace") for c in col] for col in zip(*chunk.keep))]
        if self.id_names:
            outputs = {**outputs, tasks.CLASS_NAME: np.array([n.encode() for n in self.id_names],
                                                             dtype=object)[outputs[tasks.CLASS_ID]]}
        for key, names in self.outputs:
            out = outputs[key]
            values.extend(out[:, i] for i in range(len(names))) if out.ndim == 2 else values.append(out)
        if self.format == "csv":
            return _csv(zip(*(_text(v) for v in values)))
        columns = self.columns
        return "".join(json.dumps(dict(zip(columns, row))) + "\n"
                       for row in zip(*(_json(v) for v in values))).encode()


def layout_of(output_dims: dict, keep: Sequence[str], class_names: Optional[Sequence[str]], format: str,
              id_names: Sequence[str] = ()) -> Layout:
    """The layout for a serving signature's outputs ({key: dims}, scoring/model.output_dims); `id_names`: what
    class_id 0 and 1 mean, for a class_name column the signature does not return (binary)."""
    named = bool(id_names) and tasks.CLASS_ID in output_dims and tasks.CLASS_NAME not in output_dims
    dims_of = {**output_dims, **({tasks.CLASS_NAME: output_dims[tasks.CLASS_ID]} if named else {})}
    outputs = []
    for key, dims in sorted(dims_of.items()):
        if len(dims) == 2:
            width = dims[1]
            names = [f"probability_{c}" for c in class_names] if key == tasks.PROBABILITIES and class_names \
                else [f"{key}_{i}" for i in range(width)]
            outputs.append((key, tuple(names)))
        else:
            outputs.append((key, (key,)))
    layout = Layout(tuple(keep), tuple(outputs), format, tuple(id_names) if named else ())
    clash = sorted({c for c in layout.columns if layout.columns.count(c) > 1})
    if clash:
        raise ValueError(f"predict.keep: {', '.join(clash)} is also an output column; keep it under another name")
    return layout


def _text(values) -> list[str]:
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "f":
            return np.char.mod("%.9g", values).tolist()  # 9 digits: every float32 exactly
        if values.dtype.kind in "SO":
            return [v.decode("utf-8", "replace") for v in values]
        return values.astype(str).tolist()
    return list(map(str, values))


def _json(values) -> list:
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "f":
            return values.astype(np.float64).tolist()  # the float32 values exactly
        if values.dtype.kind in "SO":
            return [v.decode("utf-8", "replace") for v in values]
        return values.tolist()
    return list(values)


def _csv(rows: Iterable[Sequence]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode()


def reject_lines(path: str, chunk: Chunk) -> bytes:
    return _csv((path, line, reason) for line, reason in chunk.rejects)


def part_name(chunk: Chunk, kind: str) -> str:
    """A chunk's part file: names sort in file and chunk order."""
    return f"{chunk.file:06d}-{chunk.index:09d}.{kind}"


def concatenate(target: str, head: bytes, parts: Sequence[str]) -> None:
    """`head` then every part's bytes, in order, into `target` (local or gs://); reads a part at a time."""
    with FileSystems.create(target) as out:
        out.write(head)
        for part in parts:
            with FileSystems.open(part) as f:
                while block := f.read(16 << 20):
                    out.write(block)


def reject_header() -> bytes:
    return _csv([REJECT_COLUMNS])
