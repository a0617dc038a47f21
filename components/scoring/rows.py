"""A CSV file's rows as chunks to score: serialized tf.Examples as TF Serving clients send them, the kept
cells, and the rows that cannot be scored with their line numbers and the reason."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional, Sequence

from tfx_bsl.coders import example_coder

from components.data import csv_examples
from components.scoring.columns import Columns, ColumnType

_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclasses.dataclass
class Chunk:
    """Consecutive rows of one file: those to score, in file order, and those rejected."""
    file: int                    # the file's index among the inputs
    index: int                   # the chunk's index in its file
    lines: list[int]             # each scored row's line number
    keep: list[list[bytes]]      # each scored row's kept cells, as in the file
    examples: list[bytes]        # each scored row as a serialized tf.Example
    rejects: list[tuple[int, str]]  # (line number, reason)


def _bad_cell(cell: bytes, kind: ColumnType) -> Optional[str]:
    """Why `cell` is not a value of `kind`, as TFX's CSV decoder types cells (csv_decoder._InferValueType)."""
    try:
        if kind == ColumnType.INT:
            return None if _INT64[0] <= int(cell) <= _INT64[1] else "is outside int64"
        float(cell)
        return None
    except ValueError:
        return "is not an integer" if kind == ColumnType.INT else "is not a number"


def _column_problems(cells: Sequence[bytes], kind: ColumnType, required: bool) -> dict[int, str]:
    """{row: what is wrong} for one column's cells; a column whose cells all parse costs one pass."""
    problems: dict[int, str] = {}
    if required:
        problems.update((i, "is empty, and the model needs a value") for i, c in enumerate(cells) if not c)
    if kind == ColumnType.STRING:
        return problems
    parse = int if kind == ColumnType.INT else float
    try:
        values = [parse(c) for c in cells if c]
        if kind != ColumnType.INT or all(_INT64[0] <= v <= _INT64[1] for v in values):
            return problems
    except ValueError:
        pass
    for i, cell in enumerate(cells):
        if cell and (why := _bad_cell(cell, kind)):
            problems.setdefault(i, why)
    return problems


def score_rows(file: int, index: int, lines: Sequence[int], records: list[list[bytes]], width: int,
               columns: Columns, inputs: list[int], keep: list[int],
               encoder: example_coder.RecordBatchToExamplesEncoder) -> Chunk:
    """The chunk of `records` (cells of a file whose header has `width` columns, at `inputs` and `keep`)."""
    rejects: dict[int, str] = {}
    for i, record in enumerate(records):
        if len(record) != width:
            rejects[i] = f"{len(record)} cells, the header has {width}"
    good = [i for i in range(len(records)) if i not in rejects] if rejects else range(len(records))
    tokens = frozenset(columns.missing_values)
    cells = [[b"" if records[i][p] in tokens else records[i][p] for i in good] for p in inputs]
    for name, column in zip(columns.inputs, cells):
        for j, why in _column_problems(column, columns.types[name], name in columns.required).items():
            row = good[j]
            if row not in rejects:
                rejects[row] = f"{name}: {column[j].decode('utf-8', 'replace')!r} {why}" if column[j] else \
                    f"{name}: {why}"
    if rejects:
        bad = {j for j, i in enumerate(good) if i in rejects}
        cells = [[c for j, c in enumerate(column) if j not in bad] for column in cells]
        good = [i for i in good if i not in rejects]
    rows = [list(row) for row in zip(*cells)] if good else []
    examples = csv_examples.encode(rows, columns.inputs, columns.types, encoder) if rows else []
    return Chunk(file, index, [lines[i] for i in good], [[records[i][p] for p in keep] for i in good],
                 examples, sorted((lines[i], why) for i, why in rejects.items()))


def read_chunks(path: str, file: int, header: Sequence[str], columns: Columns, chunk_rows: int,
                encoder: example_coder.RecordBatchToExamplesEncoder) -> Iterator[Chunk]:
    """The file's rows after its header, `chunk_rows` at a time (blank lines skipped, as TFX skips them)."""
    inputs, keep = columns.positions(header, path)
    lines: list[int] = []
    records: list[list[bytes]] = []
    index = 0
    for numbers, block in csv_examples.numbered_records(path):
        for number, record in zip(numbers, block):
            if record:
                lines.append(number)
                records.append(record)
        while len(records) >= chunk_rows:
            yield score_rows(file, index, lines[:chunk_rows], records[:chunk_rows], len(header), columns,
                             inputs, keep, encoder)
            del lines[:chunk_rows], records[:chunk_rows]
            index += 1
    if records or index == 0:
        yield score_rows(file, index, lines, records, len(header), columns, inputs, keep, encoder)
