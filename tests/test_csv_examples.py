"""The batch ExampleGen (components/data/csv_examples.py) writes the examples TFX's CsvExampleGen writes, in the same
splits: on penguins, taxi, generated rows and a file of CSV's awkward cases."""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils
from tfx_bsl.coders import csv_decoder

from bench.data_generator import write_dataset
from components.data import csv_examples
from pipeline.config import REPO_ROOT, DataSection, load_config
from pipeline.dag.splits import split_output
from tests.test_span_example_gen import SPLITS, records

BEAM_ARGS = load_config(REPO_ROOT / "configs" / "local.yaml").beam.args
FLAT = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*")])

# Cells Python's csv module and TFX's type rule treat specially, each in a column of its own kind.
AWKWARD = '''\
id,mixed,floaty,big,quoted,empty_col,spaced
1,7,1.5,12,"a, with comma",," 3"
2,x,2,9223372036854775807,"two
lines",,4
3,,-0.0,123456789012345678901,"say ""hi""",,5

4,8,1e3,1,plain,,"6"
5,,inf,2,"",, 7
6,9,.5,3,ünïcode,,8
'''


def _run(executor_class, input_base: Path, out: Path, input_config=FLAT, splits=SPLITS) -> standard_artifacts.Examples:
    # The local run's Beam settings: without them Beam's DirectRunner first tries to download Prism.
    executor = executor_class(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=BEAM_ARGS))
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    executor.Do({}, {"examples": [examples]}, {
        "input_base": str(input_base),
        "input_config": proto_utils.proto_to_json(input_config),
        "output_config": proto_utils.proto_to_json(splits),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP})
    return examples


def _records(pattern: str) -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern), compression_type="GZIP")]


def _same_as_csv_example_gen(input_base: Path, tmp_path: Path, min_rows: int, splits=SPLITS) -> dict[str, int]:
    """Ours and TFX's CsvExampleGen write the same examples in each split; {split: rows}."""
    ours = _run(csv_examples.Executor, input_base, tmp_path / "ours", splits=splits)
    theirs = _run(csv_executor.Executor, input_base, tmp_path / "theirs", splits=splits)
    assert ours.split_names == theirs.split_names
    rows = {}
    for split in (s.name for s in splits.split_config.splits):
        # TFX writes SerializeToString(), whose feature order changes from process to process: compared canonical.
        canonical = records(f"{ours.uri}/Split-{split}/data_tfrecord-*.gz")
        assert canonical == records(f"{theirs.uri}/Split-{split}/*")
        mine = _records(f"{ours.uri}/Split-{split}/data_tfrecord-*.gz")
        assert collections.Counter(mine) == canonical  # written deterministically already
        rows[split] = len(mine)
    assert sum(rows.values()) >= min_rows
    for key in ("payload_format", "file_format"):
        assert ours.get_string_custom_property(key) == theirs.get_string_custom_property(key)
    return rows


def _copy(source: Path, to: Path) -> Path:
    to.mkdir(parents=True)
    (to / source.name).write_bytes(source.read_bytes())
    return to


def test_penguins_as_csv_example_gen_makes_them(tmp_path):
    # The raw file: NA cells make its numeric columns strings, as they do for TFX.
    _same_as_csv_example_gen(_copy(REPO_ROOT / "data" / "penguins" / "penguins.csv", tmp_path / "in"), tmp_path, 344)


def test_taxi_as_csv_example_gen_makes_them(tmp_path):
    # Empty cells in int and float columns, long strings, an all-integer float column.
    _same_as_csv_example_gen(_copy(REPO_ROOT / "data" / "taxi" / "data.csv", tmp_path / "in"), tmp_path, 15_000)


def test_generated_shards_as_csv_example_gen_makes_them_in_the_configured_shares(tmp_path):
    """The pipeline's default split (train, eval, test 8:1:1, pipeline/dag/splits.py): the same rows in each split
    as TFX's CsvExampleGen puts there, in the configured shares, and the same again on a second run."""
    write_dataset(tmp_path / "in", 3_000, seed=3, shards=3)
    default = DataSection()
    assert (default.train_buckets, default.eval_buckets, default.test_buckets) == (8, 1, 1)
    config = load_config(REPO_ROOT / "configs" / "local.yaml", [  # it sets 3:1:1 for penguins' 344 rows
        f"data.{name}={getattr(default, name)}" for name in ("train_buckets", "eval_buckets", "test_buckets")])
    rows = _same_as_csv_example_gen(tmp_path / "in", tmp_path, 3_000, split_output(config))
    assert list(rows) == ["train", "eval", "test"] and sum(rows.values()) == 3_000
    # A hash split: each row falls in a split with its share's chance; 4 standard deviations either way.
    for split, share in {"train": 0.8, "eval": 0.1, "test": 0.1}.items():
        assert abs(rows[split] - 3_000 * share) <= 4 * (3_000 * share * (1 - share)) ** 0.5, rows
    again = _run(csv_examples.Executor, tmp_path / "in", tmp_path / "again", splits=split_output(config))
    for split in rows:
        assert _records(f"{again.uri}/Split-{split}/*.gz") == _records(f"{tmp_path}/ours/Split-{split}/*.gz")


def test_awkward_csv_as_csv_example_gen_makes_it(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(AWKWARD, encoding="utf-8")
    _same_as_csv_example_gen(tmp_path / "in", tmp_path, 6)


def test_column_types_follow_tfx_rule_on_random_cells():
    """TFX's ColumnTypeInferrer and ours, over random mixes of cells that sit on the rule's edges."""
    cells = [b"", b"0", b"-7", b" 12", b"1_000", b"9223372036854775807", b"9223372036854775808",
             b"-9223372036854775809", b"1.5", b"1e5", b"nan", b"-inf", b"Infinity", b"1.5.1", b"abc", b".", b"+3"]
    rng = random.Random(0)
    for _ in range(400):
        column = [rng.choice(cells) for _ in range(rng.randint(1, 6))]
        inferrer = csv_decoder.ColumnTypeInferrer(["c"], skip_blank_lines=True)
        acc = inferrer.create_accumulator()
        for cell in column:
            acc = inferrer.add_input(acc, [cell])
        expected = inferrer.extract_output(acc)[0].type
        split = rng.randint(0, len(column))  # two batches, merged as the combiner merges them
        ours = csv_examples.column_type(column[split:], csv_examples.column_type(column[:split]))
        assert (ours if ours is not None else csv_decoder.ColumnType.UNKNOWN) == expected, column


def test_a_row_with_too_many_cells_is_named_with_its_file_and_record(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.csv").write_text("a,b\n1,2\n\n3,4,5\n")
    with pytest.raises(csv_examples.CsvInputError,
                       match=r"bad.csv: record 3 after the header has 3 cells, the header 2"):
        _run(csv_examples.Executor, tmp_path / "in", tmp_path / "out")


def test_an_unclosed_quote_is_named(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.csv").write_text('a,b\n1,"2\n3,4\n')
    with pytest.raises(csv_examples.CsvInputError, match=r"bad.csv: a quoted cell is not closed"):
        _run(csv_examples.Executor, tmp_path / "in", tmp_path / "out")


def test_files_with_different_headers_are_named(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "1.csv").write_text("a,b\n1,2\n")
    (tmp_path / "in" / "2.csv").write_text("a,c\n1,2\n")
    with pytest.raises(csv_examples.CsvInputError, match=r"2.csv has a different header from .*1.csv"):
        _run(csv_examples.Executor, tmp_path / "in", tmp_path / "out")


def test_what_it_does_not_do_is_refused_by_name():
    two_inputs = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="train", pattern="train/*"),
                                               example_gen_pb2.Input.Split(name="eval", pattern="eval/*")])
    by_feature = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(
        splits=SPLITS.split_config.splits, partition_feature_name="species"))
    with pytest.raises(NotImplementedError, match=r"2 input splits.*partition_feature_name 'species'.*"
                                                  r"output_file_format .*use TFX's CsvExampleGen"):
        csv_examples.check_configs(two_inputs, by_feature, example_gen_pb2.FORMAT_TF_EXAMPLE,
                                   example_gen_pb2.FORMAT_PARQUET)
    csv_examples.check_configs(FLAT, SPLITS, example_gen_pb2.FORMAT_TF_EXAMPLE, example_gen_pb2.FORMAT_TFRECORDS_GZIP)


def test_a_block_boundary_inside_a_quoted_cell(tmp_path, monkeypatch):
    """Blocks are read 16 MB at a time; here 7 bytes, so boundaries fall inside quoted, multi-line cells."""
    monkeypatch.setattr(csv_examples, "_BLOCK_BYTES", 7)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(AWKWARD, encoding="utf-8")
    rows = [r for batch in csv_examples.read_batches(str(tmp_path / "in" / "a.csv"), AWKWARD.splitlines()[0].split(","))
            for r in batch]
    reader = csv_executor._ReadCsvRecordsFromTextFile()
    parse = csv_decoder._CSVRecordReader(",")
    expected = [c for c in (parse.ReadLine(r) for r in reader.process(str(tmp_path / "in" / "a.csv"))) if c]
    assert rows == expected and len(rows) == 6
