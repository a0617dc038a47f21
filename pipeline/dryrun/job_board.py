"""The dry runs' PipelineJobs as Vertex AI Pipelines reports them: each job's state and task details, kept in the
service directory so every dry run on it (other processes too) can GetPipelineJob any of them."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Optional

from google.cloud.aiplatform_v1.types import pipeline_job, pipeline_state

# Our task states (tasks.py) -> PipelineTaskDetail.State (aiplatform_v1 types/pipeline_job.py).
TASK_STATES = {"ran": "SUCCEEDED", "cached": "SUCCEEDED", "failed": "FAILED", "not triggered": "NOT_TRIGGERED",
               "not started": "CANCELLED", "running": "RUNNING"}
RUNNING, SUCCEEDED, FAILED = "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED"


class JobBoard:
    """One JSON file per job under `directory`, rewritten whole (os.replace) as the job's tasks end."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._lock = threading.Lock()

    def start(self, job_id: str, resource_name: str) -> None:
        self._write(job_id, {"name": resource_name, "state": RUNNING, "tasks": []})

    def task(self, job_id: str, name: str, parent: str, state: str, error: str = "") -> None:
        with self._lock:
            body = self._read(job_id)
            tasks = [t for t in body["tasks"] if t["task_name"] != name]
            tasks.append({"task_name": name, "parent": parent, "state": TASK_STATES[state], "error": error})
            body["tasks"] = tasks
            self._write(job_id, body)

    def end(self, job_id: str, succeeded: bool) -> None:
        with self._lock:
            body = self._read(job_id)
            body["state"] = SUCCEEDED if succeeded else FAILED
            self._write(job_id, body)

    def get(self, resource_name: str) -> Optional[pipeline_job.PipelineJob]:
        """The job as GetPipelineJob answers it, or None when no dry run here has that name."""
        job_id = resource_name.rsplit("/", 1)[-1]
        path = self.directory / f"{job_id}.json"
        if "/" in job_id or not path.is_file():
            return None
        body = json.loads(path.read_text())
        if body["name"] != resource_name:
            return None
        ids = {t["task_name"]: i + 1 for i, t in enumerate(body["tasks"])}
        details = [pipeline_job.PipelineTaskDetail(
            task_id=ids[t["task_name"]], parent_task_id=ids.get(t["parent"], 0), task_name=t["task_name"],
            state=pipeline_job.PipelineTaskDetail.State[t["state"]], error={"message": t["error"]} if t["error"]
            else None) for t in body["tasks"]]
        return pipeline_job.PipelineJob(name=body["name"], state=pipeline_state.PipelineState[body["state"]],
                                        job_detail=pipeline_job.PipelineJobDetail(task_details=details))

    def _read(self, job_id: str) -> dict:
        return json.loads((self.directory / f"{job_id}.json").read_text())

    def _write(self, job_id: str, body: dict) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{job_id}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(body, indent=1))
        os.replace(tmp, self.directory / f"{job_id}.json")
