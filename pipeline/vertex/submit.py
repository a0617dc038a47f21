"""`python -m pipeline submit`: compile, preflight, check the bucket, start a Vertex AI PipelineJob, and
optionally follow it to the end. (docs/internals.md)"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Optional

from pipeline.cloud.cache_override import cache_override_note
from pipeline.cloud.follow import follow
from pipeline.config import Config
from pipeline.errors import EXIT_FAILED, EXIT_OK, VertexError
from pipeline.vertex.client import build_job, check_bucket, describe_api_error, init_client

CONSOLE = "https://console.cloud.google.com/vertex-ai"


@dataclass(frozen=True)
class Submitted:
    resource_name: str
    job_id: str
    console_url: str


def console_url(config: Config, job_id: str) -> str:
    return f"{CONSOLE}/locations/{config.vertex.region}/pipelines/runs/{job_id}?project={config.vertex.project}"


def submit(config: Config, template: str, enable_caching: Optional[bool] = None,
           job_id: Optional[str] = None) -> Submitted:
    from google.api_core import exceptions as gexc

    check_bucket(config)
    job = build_job(config, template, enable_caching, job_id)
    try:
        job.submit(service_account=config.vertex.service_account)
    except gexc.GoogleAPICallError as e:
        raise VertexError(describe_api_error(e, "creating the pipeline job", config)) from None
    return Submitted(job.resource_name, job.job_id, console_url(config, job.job_id))


_DONE_OK = "PIPELINE_STATE_SUCCEEDED"
_DONE_BAD = ("PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")


def wait(config: Config, resource_name: str, poll_seconds: float = 30.0,
         report: Callable[[str], None] = print) -> bool:
    """Follow the job until it ends; report each state change; True if it succeeded."""
    from google.api_core import exceptions as gexc
    from google.cloud import aiplatform

    def read() -> tuple[str, str]:
        try:
            resource = aiplatform.PipelineJob.get(resource_name).gca_resource
        except gexc.GoogleAPICallError as e:
            raise VertexError(describe_api_error(e, f"reading {resource_name}", config)) from None
        return resource.state.name, resource.error.message

    return follow(read, _DONE_OK, _DONE_BAD, poll_seconds, report)


def cmd_submit(config: Config, args) -> int:
    from pipeline.vertex.compile import compile_pipeline
    from pipeline.vertex.preflight import ensure

    init_client(config, args.api_endpoint)
    template = compile_pipeline(config, args.output)
    ensure(config, template, args.preflight_endpoint, args.skip_preflight, args.cache)
    if note := cache_override_note(args.cache):
        print(note, file=sys.stderr)
    job = submit(config, template, enable_caching=args.cache, job_id=args.job_id)
    print(f"submitted {job.resource_name}\nconsole: {job.console_url}")
    if args.wait and not wait(config, job.resource_name, args.poll_seconds):
        return EXIT_FAILED
    return EXIT_OK
