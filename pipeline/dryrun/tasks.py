"""One task of a dry run: its driver (driver.py), then for a container its launcher (launcher.py).
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from pipeline.dryrun import driver, launcher
from pipeline.dryrun.bucket import BucketMap
from pipeline.dryrun.cache import CacheIndex, task_fingerprint
from pipeline.dryrun.driver import Scope, TaskOutputs
from pipeline.dryrun.record import Recorder
from pipeline.errors import SpecError
from pipeline.local.progress import CACHED_RECORD, FINISHED_RECORD, RUNNING_RECORD
from pipeline.spec import condition
from pipeline.spec.backends import Backend
from pipeline.spec.cache_rule import caching_enabled
from pipeline.spec.model import Job, Task

log = logging.getLogger(__name__)

RAN, CACHED, FAILED, NOT_TRIGGERED, NOT_STARTED = "ran", "cached", "failed", "not triggered", "not started"


@dataclasses.dataclass
class RunContext:
    """What the tasks of one run share."""
    job: Job
    backend: Backend
    bucket: BucketMap
    cache: CacheIndex
    recorder: Recorder
    env: dict[str, str]          # the environment of every task process
    logs: Path                   # this run's task logs
    local_beam_args: list[str]
    resource_prefix: str         # projects/<p>/locations/<r>/metadataStores/default
    say: Callable[[str], None]


@dataclasses.dataclass
class TaskResult:
    name: str
    state: str                   # ran | cached | failed | not triggered | not started
    outputs: Optional[TaskOutputs] = None
    log: Optional[Path] = None
    error: str = ""
    inputs: Optional[dict[str, Any]] = None   # a DAG task's resolved inputs, for its own tasks

    @property
    def succeeded(self) -> bool:
        return self.state in (RAN, CACHED)


def drive_dag_task(task: Task, ctx: RunContext, scope: Scope) -> TaskResult:
    """A DAG task's driver: its inputs and condition (driver/dag.go); run.py runs its tasks if it triggers."""
    parameters, artifacts = driver.resolve_inputs(task, scope)
    executor_input = driver.dag_input(parameters, artifacts)
    outcome = _condition(task, ctx, executor_input)
    if outcome is not None:
        return outcome
    return TaskResult(task.name, RAN, TaskOutputs({}, {}), inputs={"parameters": parameters, "artifacts": artifacts})


def run_container_task(task: Task, ctx: RunContext, scope: Scope) -> TaskResult:
    """A container task from its driver to its published outputs."""
    log.info(RUNNING_RECORD, task.name)  # the record TFX's launcher logs; runs.progress prints it
    parameters, artifacts = driver.resolve_inputs(task, scope)
    # As Vertex lays it out: <pipeline root>/<job>/<task>_<unique id>/ (output artifacts and executor_output.json).
    root = ctx.job.runtime["gcsOutputDirectory"].rstrip("/")
    task_root = f"{root}/{ctx.job.job_id}/{task.name}_{uuid.uuid4().hex[:8]}"
    executor_input = driver.container_input(task, parameters, artifacts, task_root, ctx.resource_prefix,
                                            ctx.backend)
    outcome = _condition(task, ctx, executor_input)
    if outcome is not None:
        return outcome
    task_log = ctx.logs / f"{task.name}.log"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    task_log.write_text("")
    execution = ctx.recorder.start(task.name, task.executor_class_path or task.name, parameters)
    try:
        result = _launch(task, ctx, execution, executor_input, artifacts, task_log)
    except SpecError:
        ctx.recorder.finish(execution, FAILED, artifacts, {}, {"vertex_job": ctx.job.job_id})
        raise
    if result.succeeded:
        log.info(FINISHED_RECORD, task.name)
    return result


def _condition(task: Task, ctx: RunContext, executor_input: dict[str, Any]) -> Optional[TaskResult]:
    """None when the task goes on; its result when its condition is false or fails to evaluate."""
    try:
        if driver.triggers(task, executor_input):
            return None
    except condition.ConditionError as e:  # the driver fails, and so does the task
        ctx.say(f"  {task.name} FAILED: triggerPolicy.condition {task.condition!r}: {e}")
        return TaskResult(task.name, FAILED, error=f"triggerPolicy.condition: {e}")
    ctx.say(f"  {task.name} not triggered: its triggerPolicy.condition is false: {task.condition}")
    return TaskResult(task.name, NOT_TRIGGERED)


def _launch(task: Task, ctx: RunContext, execution, executor_input: dict[str, Any], inputs: dict,
            task_log: Path) -> TaskResult:
    """The pre-cache-check hook, the cache lookup, and on a miss the container."""
    pre = task.container.get("lifecycle", {}).get("preCacheCheck")
    if pre is not None and "preCacheCheck" in ctx.backend.lifecycle_hooks:
        failure = _process(task, ctx, "container.lifecycle.preCacheCheck", pre, executor_input, task_log)
        if failure:
            return _failed(task, ctx, execution, inputs, task_log, f"pre-cache-check hook: {failure}")
        updates = driver.pre_cache_updates(ctx.bucket.to_local(executor_input))
        driver.apply_pre_cache_updates(executor_input, ctx.bucket.to_gcs(updates))
    key = task_fingerprint(task, executor_input)
    hit = ctx.cache.lookup(key) if caching_enabled(task.spec) else None
    if hit is not None:
        cached, source_job = hit
        ctx.recorder.finish(execution, CACHED, inputs, cached.artifacts,
                            {"cache_fingerprint": key, "vertex_job": ctx.job.job_id, "cached_from": source_job})
        log.info(CACHED_RECORD, execution.id)
        return TaskResult(task.name, CACHED, cached, task_log)
    launcher.make_output_dirs(executor_input, ctx.bucket.local, ctx.backend.launcher_outputs)
    failure = _process(task, ctx, "container", task.container, executor_input, task_log)
    if failure:
        return _failed(task, ctx, execution, inputs, task_log, failure)
    produced = launcher.read_outputs(task, ctx.bucket.to_local(executor_input), ctx.bucket.to_gcs,
                                     ctx.backend.launcher_outputs)
    ctx.recorder.finish(execution, RAN, inputs, produced.artifacts,
                        {"cache_fingerprint": key, "vertex_job": ctx.job.job_id})
    if caching_enabled(task.spec):
        ctx.cache.store(key, produced, ctx.job.job_id, task.name)
    return TaskResult(task.name, RAN, produced, task_log)


def _process(task: Task, ctx: RunContext, where: str, container: dict[str, Any], executor_input: dict[str, Any],
             task_log: Path) -> str:
    local_input = ctx.bucket.to_local(executor_input)
    command = launcher.command_line(task, where, container, local_input, ctx.job.job_id,
                                    ctx.bucket.local(ctx.job.runtime["gcsOutputDirectory"]), ctx.local_beam_args)
    env = {**ctx.env, **{e["name"]: e.get("value", "") for e in task.container.get("env", [])}}
    Path(local_input["outputs"]["outputFile"]).parent.mkdir(parents=True, exist_ok=True)
    return launcher.run_process(task, where, command, env, task_log)


def _failed(task: Task, ctx: RunContext, execution, inputs: dict, task_log: Path, error: str) -> TaskResult:
    ctx.recorder.finish(execution, FAILED, inputs, {}, {"vertex_job": ctx.job.job_id})
    ctx.say(f"  {task.name} FAILED: {error}\n  log: {task_log}")
    return TaskResult(task.name, FAILED, None, task_log, error)
