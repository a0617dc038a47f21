"""A local run imports nothing of Vertex: google-cloud-aiplatform and kfp cost seconds
of every `python -m pipeline run` (and of every test that runs the pipeline); nor any of
our cloud targets, their shared spec or the dry run (pipeline/vertex, kubeflow, spec, dryrun)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# In a fresh interpreter: import the local runner, build the local DAG and
# compile it to the IR that LocalDagRunner runs; then import `tfx.v1`, to show
# that the check would see the Vertex libraries if they were there.
_PROBE = """
import json, sys
from pipeline import cli
from pipeline.config import load_config
from pipeline.local.runner import run_local
from pipeline.dag.pipeline import create_pipeline
from tfx.dsl.compiler.compiler import Compiler

cli.build_parser().parse_args(["run"])
config = load_config("configs/local.yaml", ["pipeline.root=" + sys.argv[1]])
Compiler().compile(create_pipeline(config, metadata_path=config.pipeline.metadata_path))
local = sorted(sys.modules)
from tfx import v1
json.dump({"local": local, "with_tfx_v1": sorted(sys.modules)}, sys.stdout)
"""


_CLOUD_PACKAGES = ("vertex", "kubeflow", "spec", "dryrun")


def _vertex_modules(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] == "kfp" or m.startswith("google.cloud.aiplatform")]


def test_local_runner_and_local_pipeline_import_no_vertex_libraries(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", _PROBE, str(tmp_path)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    modules = json.loads(result.stdout)
    local = modules["local"]
    assert "pipeline.local.runner" in local and "tfx.components.transform.executor" in local
    assert not _vertex_modules(local), (
        f"the local path imports {_vertex_modules(local)[:5]}...: import TFX from its defining modules "
        "(tfx.components, tfx.orchestration, ...), not `tfx.v1`, whose extensions pull in aiplatform and kfp")
    ours = [m for m in local if m.split(".")[:2] in (["pipeline", p] for p in _CLOUD_PACKAGES)]
    assert not ours, f"the local path imports {ours}: they are the cloud targets' and the dry run's"
    # Not vacuous: `tfx.v1` brings both.
    vertex = _vertex_modules(modules["with_tfx_v1"])
    assert "google.cloud.aiplatform" in vertex and "kfp" in vertex
