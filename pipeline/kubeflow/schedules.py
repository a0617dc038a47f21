"""`python -m pipeline schedule create|list|pause|resume|delete` with `pipeline.target: kubeflow`:
KFP recurring runs through kfp.Client, in the configured experiment. (docs/internals.md)"""

from __future__ import annotations

import re
import sys

from pipeline.cloud.cron import parse_time, validate_cron
from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError
from pipeline.kubeflow.client import call, make_client

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# The API server's bound (api_converter.go, toModelJob: "at least 1 and at most 10").
MAX_CONCURRENCY = 10


def kfp_cron(cron: str | None) -> str:
    """A checked five-field unix cron as robfig/cron v1.2.0 reads it (seconds first)."""
    text = validate_cron(cron)
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ConfigError(f"--cron {cron!r}: Kubeflow Pipelines' scheduler takes no time zone (robfig/cron v1.2.0); "
                          "give the time in the scheduler's zone (UTC on a default install)")
    fields = text.split()
    for item in fields[4].split(","):
        if "7" in item.split("/")[0].split("-"):
            raise ConfigError(f"--cron {cron!r}: Kubeflow Pipelines numbers days of the week 0-6 (Sunday is 0)")
    return " ".join(["0", *fields])


def settings(args) -> tuple[str, str | None, str | None]:
    cron = kfp_cron(args.cron)
    start, end = parse_time(args.start_time, "--start-time"), parse_time(args.end_time, "--end-time")
    if start and end and end <= start:
        raise ConfigError(f"--end-time {args.end_time!r} is not after --start-time {args.start_time!r}")
    if not 1 <= args.max_concurrent_runs <= MAX_CONCURRENCY:
        raise ConfigError(f"--max-concurrent-runs {args.max_concurrent_runs}: Kubeflow Pipelines takes "
                          f"1-{MAX_CONCURRENCY}")
    if args.max_run_count is not None:
        raise ConfigError("--max-run-count: Kubeflow Pipelines recurring runs have no run limit; use --end-time")
    return cron, start, end


def _experiment_id(config: Config, client, create: bool) -> str | None:
    kf = config.kubeflow
    name = kf.experiment_name(config.pipeline.name)
    if create:
        return call(config, f"creating experiment {name}",
                    lambda: client.create_experiment(name=name, namespace=kf.namespace)).experiment_id
    try:
        return call(config, f"reading experiment {name}",
                    lambda: client.get_experiment(experiment_name=name, namespace=kf.namespace)).experiment_id
    except ValueError:  # kfp.Client: "No experiment is found with name ..."
        return None


def describe(job) -> str:
    cron = job.trigger.cron_schedule.cron if job.trigger and job.trigger.cron_schedule else "-"
    return (f"{job.recurring_run_id}  {job.display_name}  {job.status or '-'}  cron={cron!r}  "
            f"max_concurrency={job.max_concurrency}")


def _recurring_run_id(value: str | None, action: str) -> str:
    if not value:
        raise ConfigError(f"schedule {action} needs a recurring run id (see `schedule list`)")
    if not _UUID_RE.match(value):
        raise ConfigError(f"schedule {value!r}: expected a KFP recurring run id (a UUID, see `schedule list`)")
    return value


def cmd_schedule(config: Config, args) -> int:
    from pipeline.cloud.cache_override import cache_override_note
    from pipeline.kubeflow.compile import with_caching
    from pipeline.kubeflow.preflight import ensure
    from pipeline.kubeflow.submit import package_for

    kf = config.kubeflow
    if args.action == "create":
        cron, start, end = settings(args)  # checked before the compile, which takes seconds
        ensure(config, args.skip_preflight, args.preflight_endpoint)
        package = with_caching(package_for(config, args), args.cache)
        if note := cache_override_note(args.cache):
            print(note, file=sys.stderr)
        client = make_client(config)
        experiment_id = _experiment_id(config, client, create=True)
        # Every run uses the spec compiled now; re-create the recurring run after a change.
        job = call(config, "creating the recurring run", lambda: client.create_recurring_run(
            experiment_id=experiment_id, job_name=args.display_name or f"{config.pipeline.name}-retraining",
            cron_expression=cron, start_time=start, end_time=end, max_concurrency=args.max_concurrent_runs,
            no_catchup=True, pipeline_package_path=str(package), enabled=True,
            pipeline_root=config.pipeline.pipeline_root, enable_caching=None,
            service_account=kf.service_account))
        print(f"created {describe(job)}")
        return EXIT_OK
    if getattr(args, "api_endpoint", None):
        raise ConfigError("--api-endpoint is for Vertex AI; with pipeline.target kubeflow the API server is "
                          "kubeflow.host")
    job_id = None if args.action == "list" else _recurring_run_id(args.schedule, args.action)
    client = make_client(config)
    if args.action == "list":
        experiment_id = _experiment_id(config, client, create=False)
        jobs, token = [], ""
        while experiment_id:
            page = call(config, "listing recurring runs", lambda token=token: client.list_recurring_runs(
                experiment_id=experiment_id, page_token=token, page_size=100))
            jobs += page.recurring_runs or []
            token = page.next_page_token
            if not token:
                break
        for job in jobs:
            print(describe(job))
        if not jobs:
            print(f"no recurring runs in experiment {kf.experiment_name(config.pipeline.name)} ({kf.host})")
        return EXIT_OK
    action = {"pause": client.disable_recurring_run, "resume": client.enable_recurring_run,
              "delete": client.delete_recurring_run}[args.action]
    call(config, f"schedule {args.action} {job_id}", lambda: action(recurring_run_id=job_id))
    print(f"{args.action}d recurring run {job_id}")
    return EXIT_OK
