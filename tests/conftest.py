import os

# Must be set before anything imports TensorFlow (TFX 1.16 needs Keras 2).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import io  # noqa: E402

import pytest  # noqa: E402

from pipeline.config import Config, load_config  # noqa: E402


def local_config(root, *overrides: str) -> Config:
    """The shipped local config, writing everything under `root`, with a short training budget."""
    return load_config("configs/local.yaml", [f"pipeline.root={root}", *overrides])


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory):
    """One real LocalDagRunner run on the bundled data, shared by the e2e tests."""
    from pipeline.local_runner import run_local

    root = tmp_path_factory.mktemp("pipeline")
    config = local_config(root)
    out = io.StringIO()
    summary = run_local(config, stream=out)
    return config, summary, out.getvalue()
