"""`python -m pipeline compile`: the Vertex AI PipelineJob JSON, written offline.

KubeflowV2DagRunner only serialises the DAG: components name their functions
by import path (the code is in the image), so nothing is uploaded and no
cloud API is called. The DAG has no resolver (the baseline is the ServingModel
task); InfraValidator and most resolver strategies would fail here.

TFX writes a `Cond` as the same trigger condition on every task in it; the
spec written here has those tasks in one sub-DAG task that carries the
condition, the form the KFP SDK compiles `dsl.If` into (condition_group.py
says why). TFX gives every task the same caching option; the spec written here has each
task's option set by pipeline/spec/cache_rule.py instead (tasks that read
mutable state never cached), and submit and schedule send it unchanged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError
from pipeline.spec import cache_rule
from pipeline.spec.compile import compile_job, output_path

DEFAULT_OUTPUT = "output/vertex/pipeline.json"


def compile_pipeline(config: Config, output: str | os.PathLike = DEFAULT_OUTPUT) -> Path:
    """Write the PipelineJob JSON for `config` to `output` and return its path."""
    if config.vertex is None:
        raise ConfigError("compile needs a vertex section in the config (see configs/vertex.yaml)")
    out = output_path(output, ".json")
    job = compile_job(config, config.vertex.pipeline_image)
    out.write_text(json.dumps(job, sort_keys=True))
    return out


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
