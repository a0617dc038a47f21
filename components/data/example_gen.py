"""ExampleGen that reads the DatasetSnapshot artifact: TFX's CsvExampleGen's output, with the snapshot as its input.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Any, Optional

from tfx import types
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.example_gen import utils as example_gen_utils
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, component_spec, standard_artifacts, standard_component_specs

from components.data import csv_examples, span_example_gen
from components.data.snapshot.component import SNAPSHOT_KEY, DatasetSnapshot, snapshot_dir
from components.data.snapshot.store import DATA_DIR

_SPEC = standard_component_specs.FileBasedExampleGenSpec
INPUT_BASE = standard_component_specs.INPUT_BASE_KEY


class SnapshotExampleGenSpec(types.ComponentSpec):
    """TFX's FileBasedExampleGenSpec with the snapshot artifact in place of the input_base parameter."""

    PARAMETERS = {k: v for k, v in _SPEC.PARAMETERS.items() if k != INPUT_BASE}
    INPUTS = {SNAPSHOT_KEY: component_spec.ChannelParameter(type=DatasetSnapshot)}
    OUTPUTS = dict(_SPEC.OUTPUTS)


def with_input_base(input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> dict[str, Any]:
    """The execution properties TFX's CsvExampleGen executor would get from its driver: input_base (here
    the snapshot's data dir), the resolved input_config, span, version and input_fingerprint."""
    snapshot = artifact_utils.get_single_instance(input_dict[SNAPSHOT_KEY])
    props = {**exec_properties, INPUT_BASE: f"{snapshot_dir(snapshot)}/{DATA_DIR}"}
    # TFX's driver, for its resolution alone: that touches neither MLMD nor the pipeline/component info.
    return example_gen_driver.FileBasedDriver(None).resolve_exec_properties(props, None, None)


class _FromSnapshot:
    """Mixed in before a TFX ExampleGen executor: it runs on the snapshot's data dir."""

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        props = with_input_base(input_dict, exec_properties)
        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        example_gen_driver.update_output_artifact(props, examples.mlmd_artifact)
        super().Do(input_dict, output_dict, props)


class Executor(_FromSnapshot, csv_examples.Executor):
    """TFX's CsvExampleGen's examples and layout."""


class SpanExecutor(_FromSnapshot, span_example_gen.Executor):
    """The span ExampleGen's executor: each span's rows in files of their own (data.analyzer_cache)."""


class SnapshotExampleGen(base_beam_component.BaseBeamComponent):
    SPEC_CLASS = SnapshotExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, snapshot: types.BaseChannel, input_config: Optional[example_gen_pb2.Input] = None,
                 output_config: Optional[example_gen_pb2.Output] = None):
        # TFX's FileBasedExampleGen defaults (tfx/components/example_gen/component.py).
        input_config = input_config or example_gen_utils.make_default_input_config()
        output_config = output_config or example_gen_utils.make_default_output_config(input_config)
        super().__init__(SnapshotExampleGenSpec(
            snapshot=snapshot, input_config=input_config, output_config=output_config,
            output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
            output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
            examples=types.Channel(type=standard_artifacts.Examples)))


class SpanSnapshotExampleGen(SnapshotExampleGen):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(SpanExecutor)
