"""The KFP pipeline spec both targets share: TFX's KubeflowV2 compile of the DAG, regrouped and given its cache rule."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional

from components.data.snapshot.component import NEW_DATA_KEY, SNAPSHOT_KEY
from components.data.snapshot.newness import NEW_SPAN
from pipeline.config import Config
from pipeline.dag import run_lease
from pipeline.dag.pipeline import SNAPSHOT_ID, create_pipeline
from pipeline.errors import ConfigError
from pipeline.spec import cache_rule, condition_group

# The DAG's one condition (pipeline/dag/conditions.py: the Snapshot found something new), in TFX's compiled
# form and as the Snapshot's output parameter the group task reads.
DECISION = condition_group.Decision(producer=SNAPSHOT_ID, artifact=SNAPSHOT_KEY, prop=NEW_SPAN,
                                    parameter=NEW_DATA_KEY)


def output_path(output: str | os.PathLike, suffix: str) -> Path:
    """The file to write, its directory made; a directory given as the file is a config error."""
    out = Path(output)
    if out.exists() and out.is_dir():
        raise ConfigError(f"-o {str(out)!r} is a directory; give a file name such as {out / ('pipeline' + suffix)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def compile_job(config: Config, image: str, commands: Optional[list[str]] = None, spec_2_1: bool = False) -> dict:
    """TFX's KubeflowV2 compile of the DAG (the PipelineJob JSON), then the condition regrouped and each task's
    caching set by the rule. Both targets' compiles are this one (pipeline/kubeflow/compile.py sets the rest)."""
    from tfx import v1 as tfx


    with tempfile.TemporaryDirectory() as tmp:
        runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
            config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
                default_image=image, default_commands=commands, use_pipeline_spec_2_1=spec_2_1),
            output_dir=tmp, output_filename="pipeline_job.json")
        # The run takes the root's lease in its first task; the exit handler releases it (pipeline/dag/run_lease.py).
        runner.set_exit_handler(run_lease.exit_handler(config))
        runner.run(create_pipeline(config, run_lease=True), write_out=True)
        job = json.loads((Path(tmp) / "pipeline_job.json").read_text())
    condition_group.group_conditions(job["pipelineSpec"], DECISION)
    cache_rule.apply(job["pipelineSpec"], config.pipeline.enable_cache)
    return job
