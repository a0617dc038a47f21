"""`python -m pipeline dryrun`: compile as submit does, then run the job here as Vertex would.
Why and sources: docs/internals.md."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional, TextIO

from components.coordination.run_lease import OWNER_PLACEHOLDER, RUN_LEASE_ID
from components.gcs import bucket_of
from pipeline.config import REPO_ROOT, Config, DataSection, resolve
from pipeline.dryrun import DEFAULT_DIR, forkserver, gcs_emulator
from pipeline.dryrun.bucket import BucketMap, local_view
from pipeline.dryrun.cache import CacheIndex
from pipeline.dryrun.driver import Scope, root_scope, run_placeholders
from pipeline.dryrun.job_board import JobBoard
from pipeline.dryrun.jobs import kubeflow_run, submitted_job
from pipeline.dryrun.launcher import uses_dataflow
from pipeline.dryrun.record import Recorder
from pipeline.dryrun.tasks import FAILED, NOT_STARTED, RunContext, TaskResult, drive_dag_task, run_container_task
from pipeline.dryrun.training import workers
from pipeline.dryrun.training.customjob import VertexEmulator
from pipeline.dryrun.view import endpoint_stand_in
from pipeline.errors import ConfigError, PipelineFailed, RunLocked
from pipeline.local.progress import run_logging
from pipeline.runs.report import write_report
from pipeline.runs.summary import RunSummary, exit_code, format_summary, summarize
from pipeline.spec import model, rules
from pipeline.spec.backends import BACKENDS, KUBEFLOW, VERTEX, Backend, multi_user
from pipeline.spec.model import Dag, Job, Pipeline, exit_task, in_order

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RunResult:
    job_id: str
    tasks: list[TaskResult]
    summary: Optional[RunSummary]
    custom_jobs: list[workers.JobRun]

    def task(self, name: str) -> TaskResult:
        return next(t for t in self.tasks if t.name == name)

    @property
    def cache_hits(self) -> list[str]:
        return [t.name for t in self.tasks if t.state == "cached"]


@dataclasses.dataclass
class DryRun:
    bucket: BucketMap
    local_config: Config         # the config with its gs:// root mapped: what the summary and report read
    service_dir: Path
    runs: list[RunResult]


def dry_run(config: Config, local_dir: str | os.PathLike = DEFAULT_DIR, runs: int = 1,
            stream: Optional[TextIO] = None, template: Optional[Path] = None,
            backend: Optional[Backend] = None, fresh_processes: bool = False) -> DryRun:
    """Compile (unless `template`, a spec compiled earlier, is given), then run the job `runs` times as `backend`
    (default: the config's pipeline.target) would; raises SpecError before any task runs if the spec breaks one
    of its rules (rules.py), PipelineFailed on a failed task. Task processes are forked from a fork server
    (forkserver/) unless `fresh_processes`."""
    stream = stream or sys.stdout
    backend = backend or BACKENDS[config.pipeline.target]
    if getattr(config, backend.name) is None:
        raise ConfigError(f"dryrun --backend {backend.name} needs a {backend.name} section in the config "
                          f"(see configs/{backend.name}.yaml)")
    if backend.name == KUBEFLOW.name and config.kubeflow.multi_user:
        backend = multi_user(backend)
    if runs < 1:
        raise ConfigError(f"--runs {runs}: at least one run")
    if template is not None and not Path(template).is_file():
        raise ConfigError(f"--spec {template}: no such file (write one with `python -m pipeline compile`)")
    if template is not None and config.serving.target == "vertex_endpoint" and \
            not config.serving.vertex_endpoint.api_endpoint:
        raise ConfigError("--spec with serving.target vertex_endpoint: the dry run compiles the spec itself, to "
                          "point the Pusher at its endpoint stand-in (view.py); drop --spec")
    if config.serving.check.before_run and config.serving.target == "vertex_endpoint" and \
            not config.serving.check.monitoring_endpoint:
        raise ConfigError("serving.check.before_run with serving.target vertex_endpoint: the run's first step reads "
                          "the endpoint's Cloud Monitoring series, which a dry run can't reach and has no stand-in "
                          "for; set serving.check.monitoring_endpoint to a loopback stand-in (127.0.0.1:PORT) or "
                          "turn before_run off for the dry run")
    bucket = BucketMap(resolve(str(local_dir)))
    service_dir = bucket.root.parent / backend.name / config.pipeline.name
    with contextlib.ExitStack() as services:
        config = services.enter_context(endpoint_stand_in(config, bucket.root.parent, stream))
        template = template or _compile(config, backend, service_dir)
        local_config = local_view(config, bucket)
        _seed(config, bucket, stream)
        result = DryRun(bucket, local_config, service_dir, [])
        # The run lease and the version claims get GCS semantics from fake-gcs-server (gcs_emulator.py).
        gcs_env = services.enter_context(gcs_emulator.shared(bucket.root.parent,
                                                             [bucket_of(config.pipeline.root_uri)]))
        services.enter_context(forkserver.serving(template, service_dir / "forkserver.log", stream,
                                                  fresh=fresh_processes))
        for _ in range(runs):
            result.runs.append(_one_run(config, local_config, template, bucket, service_dir, stream, backend,
                                        gcs_env))
    return result


def _compile(config: Config, backend: Backend, service_dir: Path) -> Path:
    """The spec as that target's `compile` writes it."""
    if backend.name == KUBEFLOW.name:
        from pipeline.kubeflow.compile import compile_pipeline as compile_kubeflow

        return compile_kubeflow(config, service_dir / "pipeline.yaml")
    from pipeline.vertex.compile import compile_pipeline

    return compile_pipeline(config, service_dir / "pipeline.json")


def _submitted(config: Config, template: Path, backend: Backend) -> Job:
    """The job as the backend gets it: Vertex's PipelineJob body, or the run kfp.Client creates."""
    return kubeflow_run(config, template) if backend.name == KUBEFLOW.name else submitted_job(config, template)


def _seed(config: Config, bucket: BucketMap, stream: TextIO) -> None:
    bundled = DataSection()
    for uri, source in ((config.data.input_dir, bundled.input_dir), (config.data.schema_file, bundled.schema_file)):
        if uri and bucket.seed(uri, Path(resolve(source))):
            stream.write(f"seeded {uri} (at {bucket.local(uri)}) with the bundled {source}\n")


def _one_run(config: Config, local_config: Config, template: Path, bucket: BucketMap, service_dir: Path,
             stream: TextIO, backend: Backend, gcs_env: dict[str, str]) -> RunResult:
    started = time.monotonic()
    job = _submitted(config, template, backend)
    (service_dir / "logs").mkdir(parents=True, exist_ok=True)
    while not _claim_job_id(service_dir / "logs" / job.job_id):
        # Job ids are <name>-<time in seconds>; Vertex refuses a second job of the same id. Claimed with
        # mkdir, so two dry runs started together on one directory never share one (nor a run lease owner).
        time.sleep(0.2)
        job = _submitted(config, template, backend)
    pipeline = model.read(job.spec, job.platform)
    rules.enforce(pipeline, backend)
    logs = service_dir / "logs" / job.job_id
    _announce(config, job.job_id, pipeline, bucket, backend, stream)
    os.makedirs(os.path.dirname(local_config.pipeline.metadata_path), exist_ok=True)
    log_file = str(service_dir / "logs" / f"{job.job_id}.log")
    results: list[TaskResult] = []

    def say(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()
        log.info("%s", text)

    settings = workers.Settings({**_task_env(), **gcs_env}, logs, bucket.local, say, REPO_ROOT)
    # Only Vertex has a training service (the Trainer's CustomJob); on Kubeflow the Trainer runs in its task.
    # Its trust files per job: a dry run started together on this directory has its own CA.
    board = JobBoard(service_dir / "jobs")
    training = VertexEmulator(config.vertex.project, config.vertex.region, service_dir / "emulator" / job.job_id,
                              lambda name, job_body: workers.start(name, job_body, settings), say, board) \
        if backend.name == VERTEX.name else contextlib.nullcontext(NO_TRAINING_SERVICE)
    with run_logging(log_file, stream), training as emulator:
        # CustomJob replicas, too, reach Google only through the emulator, never with the user's credentials.
        settings.env.update(emulator.env)
        recorder = Recorder(local_config.pipeline.metadata_path, config.pipeline.name, bucket.to_local)
        recorder.start_run(job.job_id)
        ctx = RunContext(job, backend, bucket, CacheIndex(service_dir / "cache", config.pipeline.name), recorder,
                         settings.env, logs, config.beam.args,
                         f"projects/{config.vertex.project}/locations/{config.vertex.region}/metadataStores/default"
                         if backend.name == VERTEX.name else f"namespaces/{config.kubeflow.namespace}", say)
        placeholders = run_placeholders(job, backend, ctx.resource_prefix)
        board.start(job.job_id, placeholders[OWNER_PLACEHOLDER])
        _run_dag(pipeline, pipeline.root, root_scope(job, placeholders), ctx, results,
                 lambda result, parent: board.task(job.job_id, result.name, parent, result.state, result.error))
        board.end(job.job_id, not any(r.state == FAILED for r in results))
        jobs = [run for run, _ in emulator.jobs.values()]
        summary = _summarize(local_config, job.job_id, log_file, results, stream, time.monotonic() - started)
    # The task that failed first, not the DAG tasks that failed because of it.
    failed = sorted((r for r in results if r.state == FAILED), key=lambda r: r.error == DAG_FAILED)
    busy = next((_busy(r) for r in failed if r.name == RUN_LEASE_ID), None)
    if busy:
        raise RunLocked(busy)
    if failed:
        raise PipelineFailed(f"dry run {job.job_id}: {failed[0].name} failed: {failed[0].error}\n"
                             f"log: {failed[0].log}" + "".join(f"\n{e}" for e in emulator.errors)
                             + "".join(f"\nCustomJob {j.name}: {j.error}" for j in jobs if j.error))
    return RunResult(job.job_id, results, summary, jobs)


def _claim_job_id(logs: Path) -> bool:
    try:
        logs.mkdir()
    except FileExistsError:
        return False
    return True


def _run_dag(pipeline: Pipeline, dag: Dag, scope: Scope, ctx: RunContext, results: list[TaskResult],
             board: Callable[[TaskResult, str], None], parent: str = "") -> bool:
    """Run a DAG's tasks upstream first; whether every task that started succeeded.

    A task starts only when all its upstream tasks succeeded (the default trigger strategy,
    api/v2alpha1/pipeline_spec.proto TriggerPolicy: "a task will only be tested for the condition when
    the strategy is met"; open-source backend: Argo `depends` on `<upstream>.Succeeded`,
    argocompiler/dag.go, depends). A task whose condition is false is not triggered and
    its downstream tasks never start; a DAG task's own tasks run only when it triggers.
    """
    first = len(results)
    for task in in_order(dag):
        # An exit task starts once its upstream tasks completed, succeeded or not (rules.py, exit-task).
        waiting = [u for u in task.upstream if u not in (scope.states if exit_task(task) else scope.outputs)]
        if waiting:
            states = {r.name: r.state for r in results}
            ctx.say(f"  {task.name} not started: it needs " + ", ".join(f"{u} ({states.get(u)})" for u in waiting))
            results.append(TaskResult(task.name, NOT_STARTED))
            board(results[-1], parent)
            continue
        if task.kind == "dag":
            result = drive_dag_task(task, ctx, scope)
            results.append(result)
            if result.succeeded:
                inner = scope.inner(result.inputs["parameters"], result.inputs["artifacts"])
                if not _run_dag(pipeline, pipeline.sub_dag(task), inner, ctx, results, board, task.name):
                    result.state, result.error = FAILED, DAG_FAILED
        else:
            result = run_container_task(task, ctx, scope)
            results.append(result)
        board(result, parent)
        if result.succeeded:
            scope.outputs[task.name] = result.outputs
        scope.states[task.name] = ctx.backend.final_state(result.state != FAILED)
    return not any(r.state == FAILED for r in results[first:])


DAG_FAILED = "a task of its DAG failed"


def _busy(result: TaskResult) -> Optional[str]:
    """The run lease task's refusal (another run holds the root, components/coordination/lease.py LeaseBusy) from its
    log;
    None when it failed for another reason."""
    text = result.log.read_text(errors="replace") if result.log and result.log.exists() else ""
    found = [line.split("LeaseBusy: ", 1)[-1].strip() for line in text.splitlines() if "LeaseBusy: " in line]
    return found[-1] if found else None


@dataclasses.dataclass(frozen=True)
class _NoTrainingService:
    env: dict = dataclasses.field(default_factory=dict)
    jobs: dict = dataclasses.field(default_factory=dict)
    errors: tuple = ()


NO_TRAINING_SERVICE = _NoTrainingService()


# Its sitecustomize makes each task process exit without re-walking its heap (see there).
TASK_SITE = Path(__file__).resolve().parent / "task_site"


def _task_env() -> dict[str, str]:
    """This environment for every task process, with the project on the path as in the image (PYTHONPATH)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(TASK_SITE), str(REPO_ROOT), path) if p),
            "PYTHONUNBUFFERED": "1"}


def _announce(config: Config, job_id: str, pipeline: Pipeline, bucket: BucketMap, backend: Backend,
              stream: TextIO) -> None:
    tasks = list(pipeline.tasks())
    lines = [f"dry run of {backend.title} PipelineJob {job_id}: {len(tasks)} tasks, every rule of the spec "
             f"checked ({len(rules.RULES)} rules), run here one at a time in DAG order",
             f"  gs://<bucket>/... is mapped to {bucket.root}/<bucket>/...",
             "  container images are not pulled: each task's command runs in this environment"]
    dataflow = [t.name for t in tasks if t.kind == "container" and uses_dataflow(t.container.get("args", []))]
    if dataflow:
        lines.append(f"  BEAM: the DataflowRunner args of {', '.join(dataflow)} are replaced by local Beam args: "
                     f"{' '.join(config.beam.args)}")
    stream.write("\n".join(lines) + "\n")


def _summarize(local_config: Config, job_id: str, log_file: str, results: list[TaskResult], stream: TextIO,
               seconds: float) -> Optional[RunSummary]:
    try:
        summary = summarize(local_config.pipeline.metadata_path, local_config.pipeline.name, job_id)
    except LookupError:
        return None
    stream.write(format_summary(summary, local_config, log_file) + "\n")
    hits = [r.name for r in results if r.state == "cached"]
    stream.write(f"cache hits: {', '.join(hits) if hits else 'none'}\n")
    try:
        report = write_report(local_config, summary=summary)
    except Exception as e:  # noqa: BLE001 - a broken report must not hide the run's own outcome
        log.exception("writing the run report failed")
        report = f"not written ({type(e).__name__}: {e})"
    stream.write(f"report:    {report}\ndry run took {seconds:.1f}s\n")
    return summary


def cmd_dryrun(config: Config, args) -> int:
    result = dry_run(config, args.local_dir or DEFAULT_DIR, args.runs, template=Path(args.spec) if args.spec else None,
                     backend=BACKENDS[args.backend] if args.backend else None,
                     fresh_processes=args.fresh_processes)
    return exit_code(result.runs[-1].summary)
