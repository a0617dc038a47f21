"""How many evaluated examples each slice holds, counted before TFMA runs so that the slice gates apply only to
slices with enough of them (components/evaluation/slicing.py). Rows are decoded as TFX's Evaluator reads them
(tfx_bsl's schema-less tf.Example decoder) and keyed as TFMA's slicer keys them, so the counts are TFMA's
example_count per slice; the Evaluator checks that they are, after TFMA ran. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from typing import Iterable, Iterator, Optional, Sequence, Union

from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

Value = Union[str, int, float]
# A slice as TFMA keys it: (column, value) pairs sorted by column (tfma slicer_lib.SingleSliceSpec.generate_slices);
# () is the overall slice.
SliceKey = tuple[tuple[str, Value], ...]
BATCH_ROWS = 4096


@dataclasses.dataclass
class Counts:
    """What one pass over the evaluated split found."""
    rows: int = 0
    # Columns tuple (sorted) -> slice key -> examples; the columns of the slices asked for.
    slices: dict[tuple[str, ...], Counter] = dataclasses.field(default_factory=dict)
    # Columns whose values were not all kept because there were more than the limit: column -> values seen by then.
    too_many: dict[str, int] = dataclasses.field(default_factory=dict)
    # Columns present in no row of the split.
    absent: set[str] = dataclasses.field(default_factory=set)
    # The numeric range of one column (the regression label), when asked for.
    low: Optional[float] = None
    high: Optional[float] = None

    def values(self, column: str) -> int:
        """Distinct values of a single column counted (more than the limit if in too_many)."""
        return self.too_many.get(column) or len(self.slices.get((column,), ()))


def split_files(examples: Sequence[types.Artifact], splits: Sequence[str]) -> list[str]:
    """The TFRecord files of the split(s) the Evaluator reads (TFX's executor: every file in the split's dir)."""
    files = []
    for split in splits:
        for uri in artifact_utils.get_split_uris(list(examples), split):
            files.extend(sorted(fileio.glob(os.path.join(uri, "*"))))
    return files


def record_batches(files: list[str]) -> Iterator:
    """pyarrow RecordBatches of the tf.Examples in `files`, decoded without a schema, as TFX's Evaluator does."""
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()
    for path in files:
        compression = "GZIP" if path.endswith(".gz") else ""
        for batch in tf.data.TFRecordDataset(path, compression_type=compression).batch(BATCH_ROWS):
            yield decoder.DecodeBatch(batch.numpy().tolist())


def _value(column: str, v) -> Value:
    if isinstance(v, bytes):
        try:  # as TFMA's slicer: text, and a value that is not UTF-8 is an error naming the column
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"column {column!r} has a value that is not UTF-8 text ({v[:40]!r}): "
                             "it can't name a slice") from None
    return v


def count(batches: Iterable, slices: Sequence[Sequence[str]], limited: Sequence[str] = (), limit: int = 0,
          numeric_range: Optional[str] = None) -> Counts:
    """Examples per slice for every slice of `slices` (each a list of columns; [] the overall slice). Each column of
    `limited` (a single-column slice of `slices`) stops being counted at more than `limit` distinct values.
    numeric_range: a column whose lowest and highest value to record."""
    wanted = sorted({tuple(sorted(s)) for s in slices if s})
    counts = Counts(slices={cols: Counter() for cols in wanted})
    columns = sorted({c for cols in wanted for c in cols} | ({numeric_range} if numeric_range else set()))
    present: set[str] = set()
    for batch in batches:
        counts.rows += batch.num_rows
        names = set(batch.schema.names)
        present |= names & set(columns)
        cells = {c: batch.column(c).to_pylist() for c in columns if c in names}
        if numeric_range in cells:
            _widen(counts, (v for row in cells[numeric_range] if row for v in row))
        for cols in wanted:
            if cols not in counts.slices or not all(c in cells for c in cols):
                continue  # a column absent from a batch's every row gives none of its rows a slice
            tally = counts.slices[cols]
            for row in zip(*(cells[c] for c in cols)):
                if all(len(vs) == 1 for vs in row if vs is not None) and None not in row:
                    tally[tuple((c, _value(c, vs[0])) for c, vs in zip(cols, row))] += 1
                elif None not in row and all(row):
                    # Several values in a cell: one slice per combination of distinct values, as TFMA's slicer.
                    for combo in itertools.product(*({_value(c, v) for v in vs} for c, vs in zip(cols, row))):
                        tally[tuple(zip(cols, combo))] += 1
            if len(cols) == 1 and cols[0] in limited and len(tally) > limit:
                counts.too_many[cols[0]] = len(tally)
                del counts.slices[cols]
    counts.absent = set(columns) - present
    return counts


def _widen(counts: Counts, values: Iterable) -> None:
    for v in values:
        if isinstance(v, (int, float)) and v == v:  # not NaN
            counts.low = v if counts.low is None else min(counts.low, v)
            counts.high = v if counts.high is None else max(counts.high, v)


def label(key: SliceKey) -> str:
    """A slice as the summary, the report and history name it: `island=Biscoe, sex=female`; `overall`."""
    return ", ".join(f"{c}={v}" for c, v in key) if key else "overall"
