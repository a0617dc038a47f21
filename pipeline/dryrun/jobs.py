"""The job a backend gets from submit: Vertex's PipelineJob body, or the run kfp.Client creates."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.config import Config
from pipeline.spec.model import Job


def submitted_job(config: Config, template: Path) -> Job:
    """The body submit() would POST: built by client.build_job, offline (anonymous credentials, no call made)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.protobuf import json_format

    from pipeline.vertex.client import build_job

    aiplatform.init(project=config.vertex.project, location=config.vertex.region, credentials=AnonymousCredentials())
    job = build_job(config, str(template))
    # The public gca_resource refuses until the job exists on Vertex; _gca_resource is the request body.
    body = json_format.MessageToDict(job._gca_resource._pb)
    return Job(job.job_id, body["pipelineSpec"], body.get("runtimeConfig", {}))


def kubeflow_run(config: Config, template: Path) -> Job:
    """The run kfp.Client creates from a package `compile` wrote for pipeline.target kubeflow: the spec and its
    platform spec as they are, the pipeline root as its runtime config (pipeline/kubeflow/submit.py); ids like
    Vertex's, name and time."""
    from pipeline.kubeflow.compile import load_package

    name = f"{config.pipeline.name}-{time.strftime('%Y%m%d%H%M%S')}"
    spec, platform = load_package(template)
    return Job(name, spec, {"gcsOutputDirectory": config.pipeline.pipeline_root}, platform)
