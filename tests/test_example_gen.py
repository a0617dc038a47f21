"""ExampleGen on the snapshot artifact (components/data/example_gen.py) writes what TFX's CsvExampleGen and its
driver write on the snapshot's data dir, and no spec it compiles to has a driver hook."""

from __future__ import annotations

import json

import pytest
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen.csv_example_gen import executor as csv_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from components.data import example_gen, span_example_gen
from components.data.snapshot import store
from components.data.snapshot.component import SNAPSHOT_KEY, DatasetSnapshot
from components.errors import SnapshotError
from tests.test_span_example_gen import SPLITS, records, snapshot, write_spans

SPAN_LAYOUT = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*/*")])


def _props(input_config: example_gen_pb2.Input) -> dict:
    return {"input_config": proto_utils.proto_to_json(input_config), "output_config": proto_utils.proto_to_json(SPLITS),
            "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
            "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP}


def _artifact(manifest: store.Manifest, tmp_path) -> DatasetSnapshot:
    """The DatasetSnapshot as the Snapshot step writes it: the manifest in its URI, its directory a property."""
    artifact = DatasetSnapshot()
    artifact.uri = str(tmp_path / "snapshot-artifact")
    artifact.set_string_custom_property("snapshot_uri", manifest.uri)
    return artifact


def _examples(path) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(path)
    return examples


@pytest.mark.parametrize("ours, theirs", [(example_gen.Executor, csv_executor.Executor),
                                          (example_gen.SpanExecutor, span_example_gen.Executor)],
                         ids=["csv", "span"])
def test_same_examples_and_properties_as_tfx_example_gen_and_its_driver(tmp_path, ours, theirs):
    manifest = snapshot(write_spans(tmp_path / "source", {"span-1": slice(0, 150), "span-2": slice(150, None)}),
                        tmp_path / "snapshots")
    mine = _examples(tmp_path / "ours")
    ours().Do({SNAPSHOT_KEY: [_artifact(manifest, tmp_path)]}, {"examples": [mine]}, _props(SPAN_LAYOUT))

    # TFX's way: its FileBasedDriver resolves the exec properties and sets the output's, then the executor.
    tfx_props = example_gen_driver.FileBasedDriver(None).resolve_exec_properties(
        {**_props(SPAN_LAYOUT), "input_base": manifest.data_uri}, None, None)
    reference = _examples(tmp_path / "theirs")
    example_gen_driver.update_output_artifact(tfx_props, reference.mlmd_artifact)
    theirs().Do({}, {"examples": [reference]}, tfx_props)

    assert json.loads(mine.split_names) == json.loads(reference.split_names) == ["train", "eval"]
    for split in ("train", "eval"):
        assert records(f"{mine.uri}/Split-{split}/*") == records(f"{reference.uri}/Split-{split}/*")
        assert sum(records(f"{mine.uri}/Split-{split}/*").values()) > 50
    # span, input_fingerprint, payload and file format, span_shards: every custom property TFX's way sets.
    assert {k: mine.get_custom_property(k) for k in mine.mlmd_artifact.custom_properties} == \
        {k: reference.get_custom_property(k) for k in reference.mlmd_artifact.custom_properties}
    assert mine.get_int_custom_property(example_gen_utils.SPAN_PROPERTY_NAME) == 0
    assert "split:single_split,num_files:2," in mine.get_string_custom_property(
        example_gen_utils.FINGERPRINT_PROPERTY_NAME)


def test_a_snapshot_without_its_directory_is_named(tmp_path):
    artifact = DatasetSnapshot()
    artifact.uri = str(tmp_path / "bare")
    with pytest.raises(SnapshotError, match=r"bare has no snapshot_uri property"):
        example_gen.Executor().Do({SNAPSHOT_KEY: [artifact]}, {"examples": [_examples(tmp_path / "out")]},
                                  _props(SPAN_LAYOUT))


def test_no_driver_and_no_example_gen_subclass():
    """TFX's Vertex compiler attaches a preCacheCheck hook to FileBasedExampleGen subclasses; the open-source
    KFP backend never runs it. The compiled specs are checked in tests/test_vertex_compile.py."""
    from tfx.components.example_gen.component import FileBasedExampleGen
    from tfx.dsl.components.base.base_driver import BaseDriver

    for component in (example_gen.SnapshotExampleGen, example_gen.SpanSnapshotExampleGen):
        assert not issubclass(component, FileBasedExampleGen)
        assert component.DRIVER_CLASS is BaseDriver
