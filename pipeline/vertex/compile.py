"""`python -m pipeline compile`: the Vertex AI PipelineJob JSON, written offline.

KubeflowV2DagRunner only serialises the DAG: components name their functions
by import path (the code is in the image), so nothing is uploaded and no
cloud API is called. The DAG has no resolver (the baseline is the ServingModel
task); InfraValidator and most resolver strategies would fail here.

TFX writes a `Cond` as the same trigger condition on every task in it; the
spec written here has those tasks in one sub-DAG task that carries the
condition, the form the KFP SDK compiles `dsl.If` into (condition_group.py
says why). TFX gives every task the same caching option; the spec written here has each
task's option set by pipeline/vertex/cache_rule.py instead (tasks that read
mutable state never cached), and submit and schedule send it unchanged.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional

from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError
from pipeline.vertex import cache_rule, condition_group

DEFAULT_OUTPUT = "output/vertex/pipeline.json"


def compile_pipeline(config: Config, output: str | os.PathLike = DEFAULT_OUTPUT) -> Path:
    """Write the PipelineJob JSON for `config` to `output` and return its path."""
    if config.vertex is None:
        raise ConfigError("compile needs a vertex section in the config (see configs/vertex.yaml)")
    out = output_path(output, ".json")
    job = compile_job(config, config.vertex.pipeline_image)
    out.write_text(json.dumps(job, sort_keys=True))
    return out


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

    from pipeline.dag import run_lease
    from pipeline.pipeline import create_pipeline

    with tempfile.TemporaryDirectory() as tmp:
        runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
            config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
                default_image=image, default_commands=commands, use_pipeline_spec_2_1=spec_2_1),
            output_dir=tmp, output_filename="pipeline_job.json")
        # The run takes the root's lease in its first task; the exit handler releases it (pipeline/dag/run_lease.py).
        runner.set_exit_handler(run_lease.exit_handler(config))
        runner.run(create_pipeline(config, run_lease=True), write_out=True)
        job = json.loads((Path(tmp) / "pipeline_job.json").read_text())
    condition_group.group_conditions(job["pipelineSpec"])
    cache_rule.apply(job["pipelineSpec"], config.pipeline.enable_cache)
    return job


def cmd_compile(config: Config, args) -> int:
    out = compile_pipeline(config, args.output)
    spec = json.loads(out.read_text())
    tasks = dict(cache_rule.dag_tasks(spec["pipelineSpec"]))
    print(f"wrote {out} ({len(tasks)} tasks, image {config.vertex.pipeline_image})")
    cached = sorted(name for name, task in tasks.items() if cache_rule.caching_enabled(task))
    print(f"cache: looked up when the inputs repeat: {', '.join(cached) or 'none (pipeline.enable_cache is false)'}")
    for name, task in sorted(tasks.items()):
        reason = cache_rule.never_cached(spec["pipelineSpec"], task)
        if reason:
            print(f"cache: runs every time: {name} ({reason})")
    return EXIT_OK
