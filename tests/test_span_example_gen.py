"""The span ExampleGen writes exactly TFX's CsvExampleGen's examples and splits, each span in its own files."""

from __future__ import annotations

import collections
import csv
import json
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.data import csv_examples, span_example_gen
from components.data.snapshot import store
from pipeline.config import REPO_ROOT

PENGUINS = REPO_ROOT / "data" / "penguins" / "penguins.csv"
SPLITS = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
    example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=3),
    example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1)]))


def write_spans(source: Path, rows_per_span: dict[str, slice]) -> Path:
    """Spans cut from the bundled penguins CSV (NA already means missing to the snapshot)."""
    with PENGUINS.open() as f:
        header, *rows = list(csv.reader(f))
    for name, part in rows_per_span.items():
        (source / name).mkdir(parents=True, exist_ok=True)
        with (source / name / "data.csv").open("w", newline="") as f:
            csv.writer(f).writerows([header, *rows[part]])
    return source


def snapshot(source: Path, root: Path) -> store.Manifest:
    return store.create(str(source), str(root), spans=tuple(sorted(p.name for p in source.iterdir())),
                        missing_values=("NA",))


def run_example_gen(executor, manifest: store.Manifest, out: Path) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    executor.Do({}, {"examples": [examples]}, {
        "input_base": manifest.data_uri,
        "input_config": proto_utils.proto_to_json(example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*/*")])),
        "output_config": proto_utils.proto_to_json(SPLITS),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE})
    return examples


def records(pattern: str) -> collections.Counter:
    files = tf.io.gfile.glob(pattern)
    # Canonical bytes: a feature map serializes in no fixed order.
    return collections.Counter(tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
                               for r in tf.data.TFRecordDataset(files, compression_type="GZIP"))


@pytest.fixture(scope="module")
def three_spans(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spans")
    manifest = snapshot(write_spans(tmp / "source", {"span-1": slice(0, 120), "span-2": slice(120, 240),
                                                     "span-3": slice(240, None)}), tmp / "snapshots")
    ours = run_example_gen(span_example_gen.Executor(), manifest, tmp / "ours")
    theirs = run_example_gen(csv_executor.Executor(), manifest, tmp / "theirs")
    return manifest, ours, theirs


def test_same_examples_in_the_same_splits_as_tfx_csv_example_gen(three_spans):
    _, ours, theirs = three_spans
    assert json.loads(ours.split_names) == json.loads(theirs.split_names) == ["train", "eval"]
    for split in ("train", "eval"):
        mine = records(f"{ours.uri}/Split-{split}/*")
        assert mine == records(f"{theirs.uri}/Split-{split}/*")
        assert sum(mine.values()) > 50
    assert ours.get_string_custom_property("payload_format") == theirs.get_string_custom_property("payload_format")


def test_each_spans_rows_are_in_files_of_their_own(three_spans):
    manifest, ours, _ = three_spans
    shards = span_example_gen.span_shards(ours)
    assert [s["span"] for s in shards] == ["span-1", "span-2", "span-3"]
    rows = {s["span"]: sum(sum(records(f"{ours.uri}/Split-{split}/{s['prefix']}*").values())
                           for split in ("train", "eval")) for s in shards}
    assert rows == {"span-1": 120, "span-2": 120, "span-3": 344 - 240}
    assert len({s["key"] for s in shards}) == 3


def test_a_spans_key_changes_with_its_content_only(tmp_path, three_spans):
    manifest, ours, _ = three_spans
    source = write_spans(tmp_path / "source", {"span-2": slice(120, 240), "span-3": slice(240, 300),
                                               "span-4": slice(0, 10)})
    changed = run_example_gen(span_example_gen.Executor(), snapshot(source, tmp_path / "snapshots"), tmp_path / "out")
    before = {s["span"]: s["key"] for s in span_example_gen.span_shards(ours)}
    after = {s["span"]: s["key"] for s in span_example_gen.span_shards(changed)}
    assert after["span-2"] == before["span-2"]
    assert after["span-3"] != before["span-3"]


def test_a_spans_key_changes_with_the_code_that_parses_csv(tmp_path, three_spans, monkeypatch):
    manifest, ours, _ = three_spans
    edited = tmp_path / "csv_examples.py"
    edited.write_bytes(Path(csv_examples.__file__).read_bytes() + b"# an edit\n")
    monkeypatch.setattr(csv_examples, "__file__", str(edited))
    again = run_example_gen(span_example_gen.Executor(), manifest, tmp_path / "out")
    before = {s["span"]: s["key"] for s in span_example_gen.span_shards(ours)}
    after = {s["span"]: s["key"] for s in span_example_gen.span_shards(again)}
    assert before.keys() == after.keys() and all(after[span] != before[span] for span in before)


def test_a_data_dir_without_a_snapshot_manifest_is_a_clear_error(tmp_path):
    write_spans(tmp_path / "data", {"span-1": slice(0, 10)})
    fake = store.Manifest(digest="0" * 64, source_uri="", created="", files=(), uri=str(tmp_path), spans=())
    with pytest.raises(span_example_gen.SpanLayoutError, match="no .*manifest.json"):
        run_example_gen(span_example_gen.Executor(), fake, tmp_path / "out")
