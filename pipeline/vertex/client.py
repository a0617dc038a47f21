"""The Vertex AI client set-up and what submit and schedule share: the bucket
check, the PipelineJob built from config, and errors a person can act on. (docs/internals.md)"""

from __future__ import annotations

import re
from typing import Optional

from pipeline.cloud.credentials import application_default, endpoint_credentials
from pipeline.config import Config
from pipeline.errors import ConfigError, VertexError


def init_client(config: Config, api_endpoint: Optional[str] = None):
    """aiplatform.init for config's project/region over REST; returns the aiplatform module."""
    if config.vertex is None:
        raise ConfigError("this command needs a vertex section in the config (see configs/vertex.yaml)")
    from google.cloud import aiplatform

    # ADC read here: without any, a clear error instead of google-auth's traceback at the first call.
    aiplatform.init(project=config.vertex.project, location=config.vertex.region,
                    credentials=endpoint_credentials(api_endpoint, "--api-endpoint") or application_default(),
                    api_endpoint=api_endpoint, api_transport="rest")
    return aiplatform


def describe_api_error(e: Exception, action: str, config: Config, needs: Optional[str] = None) -> str:
    """One line a person can act on, for the errors Vertex and GCS really return.

    `needs` says which permission a 403 is about; by default the Vertex ones.
    """
    from google.api_core import exceptions as gexc

    # REST errors start with "POST https://...: "; the server's own words are what matter.
    message = re.sub(r"^(GET|POST|PATCH|PUT|DELETE) \S+: ", "", getattr(e, "message", None) or str(e))
    project = config.vertex.project
    if isinstance(e, gexc.PermissionDenied | gexc.Forbidden):
        needs = needs or (f"roles/aiplatform.user on project {project} and roles/iam.serviceAccountUser "
                          f"on {config.vertex.service_account}")
        return f"{action}: permission denied (403): {message}; the caller needs {needs} (see infra/terraform)"
    if isinstance(e, gexc.ResourceExhausted | gexc.TooManyRequests):
        return (f"{action}: quota exhausted (429): {message}; retry later or request more quota for "
                f"{config.vertex.region} in the console (IAM & Admin > Quotas)")
    if isinstance(e, gexc.NotFound):
        return f"{action}: not found (404): {message}"
    if isinstance(e, gexc.Unauthenticated):
        return f"{action}: not authenticated (401): {message}; run `gcloud auth application-default login`"
    if isinstance(e, gexc.GoogleAPICallError):
        return f"{action}: {type(e).__name__} ({e.code}): {message}"
    return f"{action}: {message}"


def check_bucket(config: Config) -> None:
    """Fail early and clearly if the pipeline root's bucket is missing or unreadable.

    aiplatform would otherwise create a bucket itself, in its own default
    location and without our settings, and only log it when that fails.
    """
    from google.api_core import exceptions as gexc
    from google.cloud import storage

    bucket = config.pipeline.root_uri[len("gs://"):].split("/", 1)[0]
    try:
        found = storage.Client(project=config.vertex.project).lookup_bucket(bucket)
    except gexc.GoogleAPICallError as e:
        raise VertexError(describe_api_error(
            e, f"checking bucket gs://{bucket}", config,
            needs=f"storage.buckets.get on gs://{bucket} (roles/storage.legacyBucketReader)")) from None
    if found is None:
        raise VertexError(f"bucket gs://{bucket} (pipeline.root) does not exist; create it with infra/terraform "
                          "(see docs/vertex.md) or fix pipeline.root")


def build_job(config: Config, template: str, enable_caching: Optional[bool] = None, job_id: Optional[str] = None,
              credentials=None):
    """The PipelineJob for a compiled template, with everything from config; what submit and schedules
    send, and what preflight checks.

    `enable_caching` None keeps each task's compiled caching option (the rule
    in cache_rule.py); True or False makes aiplatform overwrite every task's,
    Snapshot's and the ServingModel's included. `credentials` None: aiplatform.init's (ADC).
    """
    from google.cloud import aiplatform

    try:
        return aiplatform.PipelineJob(
            display_name=config.pipeline.name, template_path=str(template), job_id=job_id,
            pipeline_root=config.pipeline.pipeline_root,
            parameter_values=dict(config.vertex.parameter_values) or None,
            enable_caching=enable_caching,
            labels=dict(config.vertex.labels) or None,
            project=config.vertex.project, location=config.vertex.region, credentials=credentials)
    except ValueError as e:
        # e.g. a parameter value whose name the compiled pipeline does not declare.
        raise ConfigError(f"vertex.parameter_values / labels rejected: {e}") from None
