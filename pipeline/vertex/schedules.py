"""`python -m pipeline schedule create|list|pause|resume|delete`: scheduled
retraining through Vertex AI pipeline schedules. (docs/internals.md)"""

from __future__ import annotations

import re
import sys

from pipeline.cloud.cron import parse_time, validate_cron
from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError, VertexError

_SCHEDULE_ID_RE = re.compile(r"^([0-9]+|projects/[a-z0-9-]+/locations/[a-z0-9-]+/schedules/[0-9]+)$")


def _schedule_id(value: str | None, action: str) -> str:
    if not value:
        raise ConfigError(f"schedule {action} needs a schedule id (see `schedule list`)")
    if not _SCHEDULE_ID_RE.match(value):
        raise ConfigError(f"schedule {value!r}: expected a numeric schedule id or its full resource name "
                          "(see `schedule list`)")
    return value


def schedule_settings(cron: str | None, start_time: str | None, end_time: str | None,
                      max_concurrent_runs: int, max_run_count: int | None = None) -> tuple[str, str | None, str | None]:
    """Checked cron and RFC 3339 UTC start/end; a ConfigError names the flag that is wrong."""
    cron = validate_cron(cron)
    start, end = parse_time(start_time, "--start-time"), parse_time(end_time, "--end-time")
    if start and end and end <= start:
        raise ConfigError(f"--end-time {end_time!r} is not after --start-time {start_time!r}")
    if max_concurrent_runs < 1:
        raise ConfigError(f"--max-concurrent-runs {max_concurrent_runs}: must be at least 1")
    if max_run_count is not None and max_run_count < 1:
        raise ConfigError(f"--max-run-count {max_run_count}: must be at least 1 (leave it out for no limit)")
    return cron, start, end


def create(config: Config, template: str, display_name: str, cron: str, start: str | None = None,
           end: str | None = None, max_concurrent_runs: int = 1, max_run_count: int | None = None,
           enable_caching: bool | None = None):
    """Create a schedule from checked settings (see schedule_settings)."""
    from google.api_core import exceptions as gexc

    from pipeline.vertex.client import build_job, check_bucket, describe_api_error

    check_bucket(config)
    # Every scheduled run uses the template compiled now; re-create the schedule after a change.
    # Its per-task caching (cache_rule.py) is what makes each run read the data afresh.
    job = build_job(config, template, enable_caching)
    try:
        return job.create_schedule(
            cron=cron, display_name=display_name, start_time=start, end_time=end,
            max_concurrent_run_count=max_concurrent_runs, max_run_count=max_run_count,
            service_account=config.vertex.service_account)
    except gexc.GoogleAPICallError as e:
        raise VertexError(describe_api_error(e, "creating the schedule", config)) from None


def describe(schedule) -> str:
    s = schedule.gca_resource
    next_run = s.next_run_time.isoformat() if s.next_run_time else "-"
    return (f"{s.name.rsplit('/', 1)[-1]}  {s.display_name}  {s.state.name}  cron={s.cron!r}  "
            f"max_concurrent={s.max_concurrent_run_count}  next_run={next_run}")


def cmd_schedule(config: Config, args) -> int:
    from google.api_core import exceptions as gexc

    from pipeline.cloud.cache_override import cache_override_note
    from pipeline.vertex.client import describe_api_error, init_client
    from pipeline.vertex.compile import compile_pipeline
    from pipeline.vertex.preflight import ensure

    aiplatform = init_client(config, args.api_endpoint)
    if args.action == "create":
        # Checked before the compile, which takes seconds.
        cron, start, end = schedule_settings(args.cron, args.start_time, args.end_time,
                                             args.max_concurrent_runs, args.max_run_count)
        template = compile_pipeline(config, args.output)
        ensure(config, template, args.preflight_endpoint, args.skip_preflight, args.cache)
        if note := cache_override_note(args.cache):
            print(note, file=sys.stderr)
        schedule = create(config, template, args.display_name or f"{config.pipeline.name}-retraining",
                          cron, start, end, args.max_concurrent_runs, args.max_run_count, args.cache)
        print(f"created {describe(schedule)}")
        return EXIT_OK
    try:
        if args.action == "list":
            schedules = aiplatform.PipelineJobSchedule.list()
            for schedule in schedules:
                print(describe(schedule))
            if not schedules:
                print(f"no schedules in {config.vertex.project}/{config.vertex.region}")
            return EXIT_OK
        schedule = aiplatform.PipelineJobSchedule.get(_schedule_id(args.schedule, args.action))
        {"pause": schedule.pause, "resume": schedule.resume, "delete": schedule.delete}[args.action]()
    except gexc.GoogleAPICallError as e:
        raise VertexError(describe_api_error(e, f"schedule {args.action}", config)) from None
    print(f"{args.action}d schedule {schedule.resource_name}")
    return EXIT_OK
