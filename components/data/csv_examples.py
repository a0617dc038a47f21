"""CSV files to hash-split, serialized tf.Examples: what TFX's CsvExampleGen writes, in record batches.
Why and sources: docs/internals.md."""

from __future__ import annotations

import bisect
import functools
import hashlib
import io
import posixpath
from typing import Any, Iterable, Iterator, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam import coders
from apache_beam.io import tfrecordio
from apache_beam.io.filesystem import CompressionTypes
from tfx import types
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs as specs
from tfx.utils import io_utils, proto_utils
from tfx_bsl.coders import csv_decoder, example_coder

from components.errors import CsvInputError

ColumnType = csv_decoder.ColumnType
BATCH_ROWS = 10_000
_BLOCK_BYTES = 16 << 20
_NOT_PLAIN = (b'"', b"\r", b"\0")  # what Python's csv module treats specially
# A cell of at most this many characters that parses as an int is within int64 (|x| < 10**18).
_SURELY_INT64 = 18
_ARROW_TYPES = {ColumnType.INT: pa.int64(), ColumnType.FLOAT: pa.float32(), ColumnType.STRING: pa.large_binary()}
_PARSE = {ColumnType.INT: int, ColumnType.FLOAT: float}  # a STRING cell's value is its bytes


def check_configs(input_config: example_gen_pb2.Input, output_config: example_gen_pb2.Output,
                  output_data_format: int, output_file_format: int) -> None:
    """Refuse, by name, what this ExampleGen does not do (TFX's CsvExampleGen does)."""
    problems = []
    if len(input_config.splits) != 1:
        problems.append(f"{len(input_config.splits)} input splits (this takes one and hash-splits it)")
    if len(output_config.split_config.splits) < 1:
        problems.append("no output split_config (this hash-splits its input)")
    if output_config.split_config.partition_feature_name:
        problems.append(f"partition_feature_name {output_config.split_config.partition_feature_name!r} "
                        "(this splits by the whole example's hash)")
    if output_data_format != example_gen_pb2.FORMAT_TF_EXAMPLE:
        problems.append(f"output_data_format {output_data_format} (this writes tf.Examples)")
    if output_file_format != example_gen_pb2.FORMAT_TFRECORDS_GZIP:
        problems.append(f"output_file_format {output_file_format} (this writes gzipped TFRecords)")
    if problems:
        raise NotImplementedError("the snapshot ExampleGen does not support " + "; ".join(problems) +
                                  ": use TFX's CsvExampleGen for that")


def read_batches(path: str, column_names: Sequence[str], batch_rows: int = BATCH_ROWS
                 ) -> Iterator[list[list[bytes]]]:
    """The file's records after its header, in cells as TFX's reader and parser make them, `batch_rows` a list.

    A block with no quote, carriage return or NUL is split on newlines and
    commas, which is what Python's csv module makes of such lines; any other
    block goes line by line through TFX's own reader and parser.
    """
    width, rows, number = len(column_names), [], 0
    for records in _records(path):
        lengths = set(map(len, records))
        if lengths - {width, 0}:
            at = next(i for i, r in enumerate(records) if len(r) not in (width, 0))
            raise CsvInputError(f"{path}: record {number + at + 1} after the header has {len(records[at])} cells, "
                                f"the header {width} ({','.join(column_names)})")
        number += len(records)
        rows.extend(r for r in records if r) if 0 in lengths else rows.extend(records)  # TFX skips blank lines
        while len(rows) >= batch_rows:
            yield rows[:batch_rows]
            del rows[:batch_rows]
    if rows:
        yield rows


def _records(path: str) -> Iterator[list[list[bytes]]]:
    """The file's records after its header, a block's at a time, each a list of cells ([] for a blank line)."""
    for _, records in numbered_records(path):
        yield records


def numbered_records(path: str) -> Iterator[tuple[Sequence[int], list[list[bytes]]]]:
    """`_records` with each record's first line number in the file (the header is line 1)."""
    parse = csv_decoder._CSVRecordReader(",")  # noqa: SLF001 - TFX's parser
    pending = csv_executor._CsvLineBuffer()  # noqa: SLF001 - TFX's joining of a quoted cell's lines
    with beam.io.filesystems.FileSystems.open(path) as f:  # as TFX's reader opens it
        f.readline()  # the header
        rest, line, start = b"", 2, 2  # the next block's first line; the pending record's first line
        while True:
            block = f.read(_BLOCK_BYTES)
            data = rest + block
            if not data:
                break
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if not cut:
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
            try:
                data.decode("utf-8")  # TFX decodes every line; bad UTF-8 fails there as here
            except UnicodeDecodeError as e:
                raise CsvInputError(f"{path}: not UTF-8 ({e})") from None
            lines = data.split(b"\n")
            if lines[-1] == b"":
                lines.pop()
            if pending.is_empty() and not any(c in data for c in _NOT_PLAIN):
                yield range(line, line + len(lines)), [cells.split(b",") if cells else [] for cells in lines]
                line += len(lines)
                continue
            records, numbers = [], []
            for i, text in enumerate(lines):
                if pending.is_empty():
                    start = line + i
                pending.write(text.decode("utf-8") + ("\n" if i < len(lines) - 1 or data.endswith(b"\n") else ""))
                if pending.is_complete_line():
                    records.append(parse.ReadLine(pending.read()))
                    numbers.append(start)
            line += len(lines)
            yield numbers, records
    if not pending.is_empty():
        raise CsvInputError(f"{path}: a quoted cell is not closed before the end of the file")


def column_type(cells: Iterable[bytes], known: Optional[ColumnType] = None) -> Optional[ColumnType]:
    """The highest of `known` and TFX's type of each cell; None when there is neither."""
    level = known
    for value in set(cells):
        if level == ColumnType.STRING:
            break
        if level == ColumnType.FLOAT and value and len(value) <= _SURELY_INT64:
            # At FLOAT only a STRING cell changes the type; a short cell is one iff float() refuses it.
            try:
                float(value)
            except ValueError:
                level = ColumnType.STRING
            continue
        t = csv_decoder._InferValueType(value)  # noqa: SLF001 - TFX's rule, reused
        if level is None or t > level:
            level = t
    return level


def merge_types(a: dict[str, ColumnType], b: dict[str, ColumnType]) -> dict[str, ColumnType]:
    return {name: max(t for t in (a.get(name), b.get(name)) if t is not None) for name in {*a, *b}}


class ColumnTypes(beam.CombineFn):
    """Column name -> TFX's type over every batch of every file; a column with only empty cells gets UNKNOWN."""

    def __init__(self, column_names: Sequence[str]):
        self._names = list(column_names)

    def create_accumulator(self) -> dict[str, ColumnType]:
        return {}

    def add_input(self, acc: dict[str, ColumnType], types: dict[str, ColumnType]) -> dict[str, ColumnType]:
        return merge_types(acc, types)

    def merge_accumulators(self, accs: Iterable[dict[str, ColumnType]]) -> dict[str, ColumnType]:
        result: dict[str, ColumnType] = {}
        for acc in accs:
            result = merge_types(result, acc)
        return result

    def extract_output(self, acc: dict[str, ColumnType]) -> dict[str, ColumnType]:
        return {name: acc.get(name, ColumnType.UNKNOWN) for name in self._names}


def types_of_file(path: str, column_names: Sequence[str]) -> dict[str, ColumnType]:
    """The columns' types over one file (names of columns with a type only)."""
    types: dict[str, Optional[ColumnType]] = {name: None for name in column_names}
    for rows in read_batches(path, column_names):
        for name, cells in zip(column_names, zip(*rows)):
            types[name] = column_type(cells, types[name])
    return {name: t for name, t in types.items() if t is not None and t != ColumnType.UNKNOWN}


def encode(rows: list[list[bytes]], column_names: Sequence[str], types: dict[str, ColumnType],
           encoder: example_coder.RecordBatchToExamplesEncoder) -> list[bytes]:
    """The rows as deterministically serialized tf.Examples: features in name order.

    The C++ encoder writes a row's features in map order, so each column is
    encoded on its own and the rows are put together from those one-feature
    examples: a map serializes as its entries one after another, and an
    Example is `features` (field 1) holding `feature` (field 1) entries.
    """
    columns = dict(zip(column_names, zip(*rows)))
    entries = []
    for name in sorted(column_names):
        # A cell's entry depends on its value alone: encode each distinct value once.
        distinct = list(dict.fromkeys(columns[name]))
        one = encoder.encode(pa.RecordBatch.from_arrays([_list_array(distinct, types[name])], [name]))
        entry = dict(zip(distinct, map(_field_1_payload, one)))
        entries.append(list(map(entry.__getitem__, columns[name])))
    return [_field_1(b"".join(parts)) for parts in zip(*entries)]


def _field_1(payload: bytes) -> bytes:
    """`payload` as field 1 of a message (wire type 2: tag, varint length, bytes)."""
    n = len(payload)
    return (_FIELD_1_HEADS[n] if n < len(_FIELD_1_HEADS) else _field_1_head(n)) + payload


def _field_1_head(n: int) -> bytes:
    head = bytearray(b"\n")
    while n >= 0x80:
        head.append(n & 0x7F | 0x80)
        n >>= 7
    head.append(n)
    return bytes(head)


_FIELD_1_HEADS = tuple(_field_1_head(n) for n in range(1 << 14))  # examples are rarely longer


def _field_1_payload(message: bytes) -> bytes:
    """The payload of a message that is field 1 alone, as `_field_1` writes it."""
    start = 1
    while message[start] & 0x80:
        start += 1
    return message[start + 1:]


def _list_array(cells: Sequence[bytes], ctype: ColumnType) -> pa.Array:
    if ctype == ColumnType.UNKNOWN:
        return pa.nulls(len(cells), pa.large_list(pa.int64()))  # encodes as an empty Feature, as TFX's
    present = np.fromiter(map(bool, cells), dtype=bool, count=len(cells))
    values = cells if present.all() else [c for c in cells if c]
    if ctype in _PARSE:
        values = list(map(_PARSE[ctype], values))
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(present, out=offsets[1:])
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, _ARROW_TYPES[ctype]))


def split_of(record: bytes, buckets: Sequence[int]) -> int:
    """TFX's _PartitionFn on a serialized example: its sha256 modulo the buckets."""
    return bisect.bisect(buckets, int.from_bytes(hashlib.sha256(record).digest(), "big") % buckets[-1])


class _TypesOfFile(beam.DoFn):
    def __init__(self, column_names: Sequence[str]):
        self._names = list(column_names)

    def process(self, item: tuple[int, str]) -> Iterator[dict[str, ColumnType]]:
        yield types_of_file(item[1], self._names)


class _EncodeFile(beam.DoFn):
    """(group, path) -> (output index, serialized examples) per batch and split; output = split * groups + group."""

    def __init__(self, column_names: Sequence[str], buckets: Sequence[int], groups: int):
        self._names, self._buckets, self._groups = list(column_names), list(buckets), groups

    def setup(self):
        self._encoder = example_coder.RecordBatchToExamplesEncoder()
        self._split_of = functools.partial(split_of, buckets=self._buckets)

    def process(self, item: tuple[int, str], types: dict[str, ColumnType]) -> Iterator[tuple[int, list[bytes]]]:
        group, path = item
        for rows in read_batches(path, self._names):
            by_split: list[list[bytes]] = [[] for _ in self._buckets]
            records = encode(rows, self._names, types, self._encoder)
            for record, split in zip(records, map(self._split_of, records)):
                by_split[split].append(record)
            for split, records in enumerate(by_split):
                if records:
                    yield split * self._groups + group, records


class Executor(BaseExampleGenExecutor):
    """TFX's CsvExampleGen executor's output and layout (`Split-<split>/data_tfrecord-*.gz`), from record batches."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
        return csv_executor._CsvToExample  # noqa: SLF001 - only for TFX's own callers; Do below doesn't use it

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        input_config = proto_utils.json_to_proto(exec_properties[specs.INPUT_CONFIG_KEY], example_gen_pb2.Input())
        output_config = proto_utils.json_to_proto(exec_properties[specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output())
        check_configs(input_config, output_config,
                      exec_properties.get(specs.OUTPUT_DATA_FORMAT_KEY, example_gen_pb2.FORMAT_TF_EXAMPLE),
                      exec_properties.get(specs.OUTPUT_FILE_FORMAT_KEY, example_gen_pb2.FORMAT_TFRECORDS_GZIP))
        input_base = exec_properties[specs.INPUT_BASE_KEY]
        column_names, paths = csv_files(input_base, input_config.splits[0].pattern)
        groups, group_prefixes = self.layout(input_base, paths, exec_properties)
        examples = artifact_utils.get_single_instance(output_dict[specs.EXAMPLES_KEY])
        split_names = example_gen_utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)
        prefixes = [[posixpath.join(artifact_utils.get_split_uri([examples], split), prefix)
                     for prefix in group_prefixes] for split in split_names]
        with self._make_beam_pipeline() as pipeline:
            write_examples(pipeline, column_names, list(zip(groups, paths)), output_config.split_config, prefixes)
        examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(examples, write_split.to_file_format_str(example_gen_pb2.FORMAT_TFRECORDS_GZIP))
        self.annotate(examples)

    def layout(self, input_base: str, paths: list[str], exec_properties: dict[str, Any]
               ) -> tuple[list[int], list[str]]:
        """Each path's group and each group's file prefix: here all in one, named as TFX names it."""
        return [0] * len(paths), [write_split.DEFAULT_TF_RECORD_FILE_NAME]

    def annotate(self, examples: types.Artifact) -> None:
        """Properties a layout adds to the Examples artifact: none here."""


def csv_files(input_base: str, pattern: str) -> tuple[list[str], list[str]]:
    """The header all files matching `pattern` share, and their paths, sorted."""
    paths = sorted(fileio.glob(posixpath.join(input_base, pattern)))
    if not paths:
        raise CsvInputError(f"split pattern {pattern} matches no files under {input_base}")
    header = io_utils.load_csv_column_names(paths[0])
    for path in paths[1:]:
        if io_utils.load_csv_column_names(path) != header:
            raise CsvInputError(f"{path} has a different header from {paths[0]}")
    return header, paths


def write_examples(pipeline: beam.Pipeline, column_names: Sequence[str], files: Sequence[tuple[int, str]],
                   split_config: example_gen_pb2.SplitConfig, prefixes: Sequence[Sequence[str]]) -> None:
    """Each (group, path)'s examples to `prefixes[split][group]`-*.gz, hash-split by `split_config`."""
    groups = len(prefixes[0])
    buckets = [int(b) for b in np.cumsum([s.hash_buckets for s in split_config.splits])]
    types = beam.pvalue.AsSingleton(
        pipeline
        | "FilesForTypes" >> beam.Create(files)
        | "ColumnTypesOfFiles" >> beam.ParDo(_TypesOfFile(column_names))
        | "ColumnTypes" >> beam.CombineGlobally(ColumnTypes(column_names)))
    parts = (pipeline
             | "Files" >> beam.Create(files)
             | "ToExamples" >> beam.ParDo(_EncodeFile(column_names, buckets, groups), types)
             | "Partition" >> beam.Partition(lambda item, n: item[0], len(buckets) * groups))
    for split, per_group in enumerate(prefixes):
        for group, prefix in enumerate(per_group):
            _ = (parts[split * groups + group]
                 | f"Records[{split}][{group}]" >> beam.Values()
                 | f"Write[{split}][{group}]" >> beam.io.Write(_TFRecordBatchSink(prefix)))


class _TFRecordBatchSink(tfrecordio._TFRecordSink):  # noqa: SLF001 - Beam's TFRecord sink, a batch per element
    """Beam's WriteToTFRecord(prefix, file_name_suffix=".gz") for elements that are lists of records: one
    write per batch instead of a Beam element and a compressor call per record."""

    def __init__(self, prefix: str):
        super().__init__(prefix, coders.BytesCoder(), ".gz", 0, None, CompressionTypes.AUTO)

    def write_record(self, file_handle, records: list[bytes]) -> None:
        framed = io.BytesIO()
        for record in records:
            tfrecordio._TFRecordUtil.write_record(framed, record)  # noqa: SLF001 - the format's own framing
        file_handle.write(framed.getvalue())
