"""`python -m pipeline compile`: the Vertex AI PipelineJob JSON, written offline. Why: docs/internals.md."""

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
