"""The `predict` and `inference` sections: batch scoring as a command and as a pipeline step (docs/predict.md)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from pipeline.errors import ConfigError
from trainer.config import Section, validate_uri


class PredictSection(Section):
    """`python -m pipeline predict` and the pipeline's BulkInferrer step."""
    # Columns copied from each input row to its prediction (ids); null: the features.ignore columns.
    keep: Optional[list[str]] = None
    # csv, or jsonl (one JSON object per row).
    format: Literal["csv", "jsonl"] = "csv"
    # Rows per serving_default call (a chunk is read, encoded and scored together).
    chunk_rows: int = Field(4096, ge=1, le=1_000_000)
    # beam: this project's Beam job (locally, or on Dataflow with --runner dataflow). vertex, a Vertex
    # BatchPredictionJob, is not implemented (docs/predict.md says why Dataflow came first).
    backend: Literal["beam", "vertex"] = "beam"

    def check_backend(self) -> None:
        if self.backend == "vertex":
            raise ConfigError(
                "predict.backend: vertex (a Vertex BatchPredictionJob) is not implemented; use backend beam, "
                "on Dataflow with `predict --runner dataflow` (docs/predict.md, 'At scale')")


class InferenceSection(Section):
    """Set input_dir and the pipeline scores it after the Pusher with the model just pushed, or the one
    serving when nothing was pushed (components/bulk_inferrer.py). With data.spans, it has spans too and
    only spans not scored before are scored."""
    input_dir: Optional[str] = None

    @field_validator("input_dir")
    @classmethod
    def _path(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, "inference.input_dir")
