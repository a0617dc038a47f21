"""Vertex's cache rule across dry runs: pipeline/spec/cache_rule.py's key, a local index of results.
Why and sources: docs/internals.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from pipeline.dryrun.driver import TaskOutputs
from pipeline.spec.cache_rule import cache_key, fingerprint
from pipeline.spec.model import Task


def task_fingerprint(task: Task, executor_input: dict[str, Any]) -> str:
    container = task.container
    inputs, outputs = executor_input.get("inputs", {}), executor_input.get("outputs", {})
    declared = task.component.get("outputDefinitions", {}).get("parameters", {})
    output_types = {k: v.get("parameterType") or v.get("type", "") for k, v in declared.items()}
    key = cache_key(
        input_artifact_names={k: [a.get("name", "") for a in v.get("artifacts", [])]
                              for k, v in inputs.get("artifacts", {}).items()},
        input_parameter_values=inputs.get("parameterValues", {}),
        output_artifacts={k: {"type": v["artifacts"][0]["type"], "metadata": v["artifacts"][0].get("metadata")}
                          for k, v in outputs.get("artifacts", {}).items()},
        output_parameter_types=output_types,
        image=container.get("image", ""), command=container.get("command", []), args=container.get("args", []))
    return fingerprint(key)


class CacheIndex:
    """fingerprint -> the outputs of the execution that produced them, one JSON file each."""

    def __init__(self, directory: Path, pipeline: str):
        self.directory = directory / pipeline

    def lookup(self, key: str) -> Optional[tuple[TaskOutputs, str]]:
        """The recorded outputs and the job that produced them, if any."""
        path = self.directory / f"{key}.json"
        if not path.exists():
            return None
        entry = json.loads(path.read_text())
        return TaskOutputs(entry["artifacts"], entry["parameters"]), entry["job"]

    def store(self, key: str, outputs: TaskOutputs, job_id: str, task: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        entry = {"job": job_id, "task": task, "artifacts": outputs.artifacts, "parameters": outputs.parameters}
        (self.directory / f"{key}.json").write_text(json.dumps(entry, indent=1))
