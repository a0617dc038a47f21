"""One task of a dry run, as Vertex Pipelines executes it.

A resolver task runs its artifact queries (artifacts.py). A container task
gets its ExecutorInput (invocation.py); if its trigger condition is false
there, it is skipped without an execution (condition.py); a pre-cache-check
driver, if the spec has one (file-based ExampleGen), runs first and its
results join the inputs;
then Vertex's cache rule decides (cache.py): a hit hands on the recorded
outputs, a miss runs the container's command as a local process and reads
its ExecutorOutput. Every execution is recorded (record.py).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from pipeline.config import REPO_ROOT
from pipeline.runs.progress import _CACHED, _FINISHED, _RUNNING
from pipeline.vertex.cache_rule import caching_enabled
from pipeline.vertex.dryrun import artifacts, condition, invocation
from pipeline.vertex.dryrun.artifacts import ArtifactIndex
from pipeline.vertex.dryrun.bucket import BucketMap
from pipeline.vertex.dryrun.cache import CacheIndex, task_fingerprint
from pipeline.vertex.dryrun.invocation import TaskOutputs
from pipeline.vertex.dryrun.record import Recorder
from pipeline.vertex.dryrun.spec import Job, SpecError, Task, artifact_class, producer

log = logging.getLogger(__name__)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")


@dataclasses.dataclass
class RunContext:
    """What the tasks of one run share."""
    job: Job
    task_names: set[str]
    bucket: BucketMap
    index: ArtifactIndex
    cache: CacheIndex
    recorder: Recorder
    env: dict[str, str]          # the environment of every task process
    logs: Path                   # this run's task logs
    local_beam_args: list[str]
    say: Callable[[str], None]

    def producer(self, ref: str, field: str) -> str:
        return producer(ref, self.task_names, field, [])


@dataclasses.dataclass
class TaskResult:
    name: str
    state: str                   # ran | cached | failed | skipped
    outputs: Optional[TaskOutputs] = None
    log: Optional[Path] = None
    error: str = ""


def run_task(task: Task, ctx: RunContext, outputs: dict[str, TaskOutputs]) -> TaskResult:
    """Run one task; a SpecError (something in the spec that cannot be executed) ends the run, naming the task."""
    log.info(_RUNNING, task.name)  # the record TFX's launcher logs; runs.progress prints it
    try:
        result = _resolver(task, ctx, outputs) if "resolver" in task.executor else _container(task, ctx, outputs)
    except SpecError as e:
        raise SpecError(f"task {task.name}: {e}") from None
    if result.state in ("ran", "cached"):
        log.info(_FINISHED, task.name)
    return result


def _resolver(task: Task, ctx: RunContext, outputs: dict[str, TaskOutputs]) -> TaskResult:
    inputs = {}
    for key, source in task.spec.get("inputs", {}).get("artifacts", {}).items():
        ref = source["taskOutputArtifact"]
        name = ctx.producer(ref["producerTask"], task.field("inputs.artifacts", key))
        inputs[key] = outputs[name].artifacts[ref["outputArtifactKey"]]
    resolved, lines = artifacts.resolve(task, inputs, ctx.index, ctx.job.spec["pipelineInfo"]["name"])
    execution = ctx.recorder.start(task.name, "Resolver", {})
    for line in lines:
        ctx.say(f"    {line}")
    ctx.recorder.finish(execution, "ran", inputs, resolved, {"vertex_job": ctx.job.job_id})
    return TaskResult(task.name, "ran", TaskOutputs(resolved, {}))


def _container(task: Task, ctx: RunContext, outputs: dict[str, TaskOutputs]) -> TaskResult:
    args = invocation.arguments(task, ctx.job, outputs, ctx.producer)
    # As Vertex lays it out: <pipeline root>/<job>/<task>_<unique id>/ (output artifacts and executor_output.json).
    root = ctx.job.runtime["gcsOutputDirectory"].rstrip("/")
    task_root = f"{root}/{ctx.job.job_id}/{task.name}_{uuid.uuid4().hex[:8]}"
    executor_input = invocation.executor_input(task, args, outputs, task_root, ctx.index.new_name, ctx.producer)
    try:
        runs = condition.holds(task, executor_input)
    except condition.ConditionError as e:  # the driver fails, and so does the task
        ctx.say(f"  {task.name} FAILED: triggerPolicy.condition {condition.condition(task)!r}: {e}")
        return TaskResult(task.name, "failed", error=f"triggerPolicy.condition: {e}")
    if not runs:
        ctx.say(f"  {task.name} skipped: its triggerPolicy.condition is false: {condition.condition(task)}")
        return TaskResult(task.name, "skipped")
    task_log = ctx.logs / f"{task.name}.log"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    task_log.write_text("")
    execution = ctx.recorder.start(task.name, _kind(task), args)
    inputs = {k: v.get("artifacts", []) for k, v in executor_input["inputs"].get("artifacts", {}).items()}
    try:
        return _execute(task, ctx, execution, executor_input, inputs, task_log)
    except SpecError:
        ctx.recorder.finish(execution, "failed", inputs, {}, {"vertex_job": ctx.job.job_id})
        raise


def _execute(task: Task, ctx: RunContext, execution, executor_input: dict[str, Any], inputs: dict,
             task_log: Path) -> TaskResult:
    """The pre-cache-check driver, the cache lookup, and on a miss the container."""
    pre = task.container.get("lifecycle", {}).get("preCacheCheck")
    if pre is not None:
        failure = _process(task, ctx, "container.lifecycle.preCacheCheck", pre, executor_input, task_log)
        if failure:
            return _failed(task, ctx, execution, inputs, task_log, f"pre-cache-check driver: {failure}")
        _apply_driver(executor_input, ctx.bucket)
    key = task_fingerprint(task, executor_input)
    hit = ctx.cache.lookup(key) if caching_enabled(task.spec) else None
    if hit is not None:
        cached, source_job = hit
        ctx.recorder.finish(execution, "cached", inputs, cached.artifacts,
                            {"cache_fingerprint": key, "vertex_job": ctx.job.job_id, "cached_from": source_job})
        log.info(_CACHED, execution.id)
        return TaskResult(task.name, "cached", cached, task_log)
    _make_output_dirs(executor_input, ctx.bucket)
    failure = _process(task, ctx, "container", task.container, executor_input, task_log)
    if failure:
        return _failed(task, ctx, execution, inputs, task_log, failure)
    produced = invocation.read_outputs(task, ctx.bucket.to_local(executor_input), ctx.bucket.to_gcs)
    ctx.index.add(produced.artifacts, ctx.job.spec["pipelineInfo"]["name"], ctx.job.job_id, task.name)
    ctx.recorder.finish(execution, "ran", inputs, produced.artifacts,
                        {"cache_fingerprint": key, "vertex_job": ctx.job.job_id})
    if caching_enabled(task.spec):
        ctx.cache.store(key, produced, ctx.job.job_id, task.name)
    return TaskResult(task.name, "ran", produced, task_log)


def _kind(task: Task) -> str:
    args = task.container.get("args", [])
    return args[args.index("--executor_class_path") + 1] if "--executor_class_path" in args else task.name


def _process(task: Task, ctx: RunContext, where: str, container: dict[str, Any], executor_input: dict[str, Any],
             task_log: Path) -> str:
    """Run one of the task's commands as a local process; '' on success, else why it failed."""
    local_input = ctx.bucket.to_local(executor_input)
    command = invocation.command_line(task, where, container.get("command", []), container.get("args", []),
                                      local_input, ctx.job.job_id,
                                      ctx.bucket.local(ctx.job.runtime["gcsOutputDirectory"]), ctx.local_beam_args)
    env = {**ctx.env, **{e["name"]: e.get("value", "") for e in task.container.get("env", [])}}
    Path(local_input["outputs"]["outputFile"]).parent.mkdir(parents=True, exist_ok=True)
    with open(task_log, "a") as out:
        out.write(f"$ {where}: {' '.join(command[:4])} ...\n")
        out.flush()
        code = subprocess.run(command, env=env, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    if code == 0:
        return ""
    lines = task_log.read_text(errors="replace").splitlines()
    cause = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), lines[-1] if lines else "")
    return f"{task.executor_field(where, 'command')} exited with status {code}: {cause}"


def _make_output_dirs(executor_input: dict[str, Any], bucket: BucketMap) -> None:
    """GCS has no directories to create; the mapped bucket has. Made as TFX's own launcher makes them
    (outputs_utils.make_output_dirs): the directory of an artifact, the parent of a value artifact's file."""
    from tfx.types.value_artifact import ValueArtifact

    for key, items in executor_input["outputs"].get("artifacts", {}).items():
        for artifact in items.get("artifacts", []):
            path = Path(bucket.local(artifact["uri"]))
            cls = artifact_class(artifact["type"], f"outputs.artifacts.{key}")
            (path.parent if issubclass(cls, ValueArtifact) else path).mkdir(parents=True, exist_ok=True)


def _apply_driver(executor_input: dict[str, Any], bucket: BucketMap) -> None:
    """What Vertex does with a pre-cache-check driver's ExecutorOutput before the cache lookup."""
    parameters, metadata = invocation.driver_updates(bucket.to_local(executor_input))
    executor_input["inputs"].setdefault("parameterValues", {}).update(bucket.to_gcs(parameters))
    for key, values in metadata.items():
        for artifact in executor_input["outputs"]["artifacts"].get(key, {}).get("artifacts", []):
            artifact.setdefault("metadata", {}).update(bucket.to_gcs(values))


def _failed(task: Task, ctx: RunContext, execution, inputs: dict, task_log: Path, error: str) -> TaskResult:
    ctx.recorder.finish(execution, "failed", inputs, {}, {"vertex_job": ctx.job.job_id})
    ctx.say(f"  {task.name} FAILED: {error}\n  log: {task_log}")
    return TaskResult(task.name, "failed", None, task_log, error)
