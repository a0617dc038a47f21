"""Shared by the Vertex tests: one compiled spec per test process, and a test config."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from pipeline.config import Config, load_config  # noqa: E402

VERTEX_YAML = "configs/vertex.yaml"
BUCKET = "penguin-test-bucket"
PROJECT = "test-project"
PIPELINE_SA = f"penguin-pipeline@{PROJECT}.iam.gserviceaccount.com"
DATAFLOW_SA = f"penguin-dataflow@{PROJECT}.iam.gserviceaccount.com"


def vertex_config(*overrides: str) -> Config:
    """configs/vertex.yaml in a test project and bucket."""
    return load_config(VERTEX_YAML, [
        f"vertex.project={PROJECT}", f"pipeline.root=gs://{BUCKET}/root",
        f"vertex.service_account={PIPELINE_SA}", f"dataflow.service_account={DATAFLOW_SA}", *overrides])


@functools.lru_cache(maxsize=None)
def compiled_template(*overrides: str) -> Path:
    """Compile once per process and override set; compiling takes seconds."""
    from pipeline.vertex.compile import compile_pipeline

    out = Path(tempfile.mkdtemp(prefix="vertex-spec-")) / "pipeline.json"
    return compile_pipeline(vertex_config(*overrides), out)


def task_executor(spec: dict, task: str) -> dict:
    """The container spec of one task in a compiled PipelineJob JSON."""
    pipeline_spec = spec["pipelineSpec"]
    component = pipeline_spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]
    executor = pipeline_spec["components"][component]["executorLabel"]
    return pipeline_spec["deploymentSpec"]["executors"][executor]["container"]
