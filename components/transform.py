"""Transform with fixed-size input batches, so its analyzers give bit-identical results on a rerun.

TFX's Transform lets Beam's BatchElements size the input batches adaptively,
from how long recent batches took. Batch boundaries then change from run to
run, the float sums inside tft.mean / tft.var are grouped differently, and the
last bits of every scaled feature (and so of the trained weights) differ
between two runs on the same data. A fixed batch size takes the timing out.
"""

from __future__ import annotations

from typing import Any, Optional

from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import types
from tfx.components.transform import executor as transform_executor
from tfx.components.transform.component import Transform
from tfx.dsl.components.base import executor_spec

ANALYZER_BATCH_SIZE = 1000


class _FixedBatchProcessor(transform_executor.TransformProcessor):
    def _GetDesiredBatchSize(self, data_format: int, schema: schema_pb2.Schema) -> Optional[int]:
        return super()._GetDesiredBatchSize(data_format, schema) or ANALYZER_BATCH_SIZE


class Executor(transform_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        # TFX's Do instantiates the module-level TransformProcessor by name and
        # offers no hook for the batch size, so swap it for the length of this call.
        # Executors run one at a time per process, so nothing else sees the swap.
        stock = transform_executor.TransformProcessor
        transform_executor.TransformProcessor = _FixedBatchProcessor
        try:
            super().Do(input_dict, output_dict, exec_properties)
        finally:
            transform_executor.TransformProcessor = stock


class DeterministicTransform(Transform):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
