"""Transform with fixed-size input batches, so its analyzers give bit-identical results on a rerun.

TFX's Transform lets Beam's BatchElements size the batches adaptively, from
how long recent batches took. Batch boundaries then change from run to run,
the float sums inside tft.mean / tft.var are grouped differently, and the
last bits of every scaled feature (and so of the trained weights) differ
between two runs on the same data. A fixed batch size removes the timing from
the result.
"""

from __future__ import annotations

from typing import Optional

from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import v1 as tfx
from tfx.components.transform import executor as transform_executor
from tfx.dsl.components.base import executor_spec

ANALYZER_BATCH_SIZE = 1000


class Executor(transform_executor.Executor):
    def _GetDesiredBatchSize(self, data_format: int, schema: schema_pb2.Schema) -> Optional[int]:
        return super()._GetDesiredBatchSize(data_format, schema) or ANALYZER_BATCH_SIZE


class DeterministicTransform(tfx.components.Transform):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
