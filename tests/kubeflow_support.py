"""Shared by the Kubeflow tests: one compiled package per test process, and a test config."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from pipeline.config import Config, load_config  # noqa: E402

KUBEFLOW_YAML = "configs/kubeflow.yaml"
BUCKET = "penguin-test-bucket"


def kubeflow_config(*overrides: str) -> Config:
    """configs/kubeflow.yaml with the test bucket."""
    return load_config(KUBEFLOW_YAML, [f"pipeline.root=gs://{BUCKET}/root", *overrides])


@functools.lru_cache(maxsize=None)
def compiled_package(*overrides: str) -> Path:
    """Compile once per process and override set; compiling takes seconds."""
    from pipeline.kubeflow.compile import compile_pipeline

    out = Path(tempfile.mkdtemp(prefix="kubeflow-spec-")) / "pipeline.yaml"
    return compile_pipeline(kubeflow_config(*overrides), out)
