"""`python -m pipeline schedule create|list|pause|resume|delete`: scheduled
retraining through Vertex AI pipeline schedules.

The cron expression and the start/end times are checked here, before any
request, so a typo is reported against the flag rather than as a server error.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError, VertexError

# (name, lowest, highest, names accepted instead of numbers)
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_FIELDS = [("minute", 0, 59, []), ("hour", 0, 23, []), ("day of month", 1, 31, []),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS)]
_ITEM_RE = re.compile(r"^(\*|(?P<lo>[0-9A-Za-z]+)(-(?P<hi>[0-9A-Za-z]+))?)(/(?P<step>[0-9]+))?$")
_SCHEDULE_ID_RE = re.compile(r"^([0-9]+|projects/[a-z0-9-]+/locations/[a-z0-9-]+/schedules/[0-9]+)$")


def validate_cron(cron: str | None) -> str:
    """Vertex's cron: five unix fields, optionally prefixed by TZ= or CRON_TZ= and an IANA zone."""
    if not cron or not cron.strip():
        raise ConfigError("schedule create needs --cron, e.g. --cron '0 3 * * 1' (03:00 UTC every Monday)")
    text = cron.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        zone, _, text = text.partition(" ")
        zone = zone.split("=", 1)[1]
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"--cron {cron!r}: unknown time zone {zone!r} (use an IANA name like Europe/Berlin)"
                              ) from None
    fields = text.split()
    if len(fields) != 5:
        raise ConfigError(f"--cron {cron!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                          f"got {len(fields)}")
    for value, (name, lo, hi, names) in zip(fields, _FIELDS):
        for item in value.split(","):
            _check_item(cron, item, name, lo, hi, names)
    return cron.strip()


def _check_item(cron: str, item: str, name: str, lo: int, hi: int, names: list[str]) -> None:
    m = _ITEM_RE.match(item)
    if not m:
        raise ConfigError(f"--cron {cron!r}: {name} item {item!r} is not *, N, N-M or */S")

    def number(token: str) -> int:
        if token.upper() in names:
            return names.index(token.upper()) + lo
        if not token.isdigit() or not lo <= int(token) <= hi:
            raise ConfigError(f"--cron {cron!r}: {name} {token!r} is outside {lo}-{hi}")
        return int(token)

    if m["lo"] is not None:
        first = number(m["lo"])
        if m["hi"] is not None and number(m["hi"]) < first:
            raise ConfigError(f"--cron {cron!r}: {name} range {item!r} runs backwards")
    if m["step"] is not None and not 1 <= int(m["step"]) <= hi:
        raise ConfigError(f"--cron {cron!r}: {name} step in {item!r} must be 1-{hi}")


def parse_time(value: str | None, flag: str) -> str | None:
    """An ISO 8601 time with zone (or Z) as the RFC 3339 UTC string Vertex expects."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected ISO 8601 like 2027-01-31T06:00:00Z") from None
    if when.tzinfo is None:
        raise ConfigError(f"{flag} {value!r}: give a time zone (Z or +01:00) so the time is unambiguous")
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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

    from pipeline.vertex.client import cache_override_note, describe_api_error, init_client
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
