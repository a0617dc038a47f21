"""The `kubeflow` section of the config: where the KFP 2.x API server is and as whom we call it.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator, model_validator

from pipeline.endpoints import parse_endpoint
from pipeline.sections.strings import EnvName, Experiment, Image, K8sServiceAccount, Namespace, ServiceAccount
from trainer.config import Section, validate_uri


class Resources(Section):
    """What one task's pod asks for and may use: CPU cores and memory in GB, as the pipeline spec's
    PipelineContainerSpec.ResourceSpec has them (api/v2alpha1/pipeline_spec.proto; the KFP SDK's
    set_cpu_request & co. write the same fields). None: not set."""
    cpu_request: Optional[float] = Field(None, gt=0, le=256)
    cpu_limit: Optional[float] = Field(None, gt=0, le=256)
    memory_request: Optional[float] = Field(None, gt=0, le=4096)
    memory_limit: Optional[float] = Field(None, gt=0, le=4096)

    @model_validator(mode="after")
    def _request_within_limit(self) -> "Resources":
        # Kubernetes refuses a pod whose request exceeds its limit (core/v1 validation: "must be less than or
        # equal to ... limit"): caught here, not by the run's first pod.
        for kind in ("cpu", "memory"):
            request, limit = getattr(self, f"{kind}_request"), getattr(self, f"{kind}_limit")
            if request is not None and limit is not None and request > limit:
                raise ValueError(f"{kind}_request {request:g} is above {kind}_limit {limit:g}")
        return self


# Each pod of the open-source backend downloads every input artifact before its executor starts
# (backend/src/v2/component/launcher_v2.go, downloadArtifacts), so the Beam steps and the Trainer hold their
# data in memory and on disk; sizes for the bundled datasets with room, to be raised for yours.
DEFAULT_RESOURCES = {
    "default": Resources(cpu_request=0.5, memory_request=1, memory_limit=4),
    **{name: Resources(cpu_request=1, memory_request=4, memory_limit=8)
       for name in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")},
    "Trainer": Resources(cpu_request=2, memory_request=4, memory_limit=16),
}


class KubeflowSection(Section):
    """A KFP 2.x API server (open-source backend) that runs the compiled pipeline."""
    # The API server's base URL, e.g. https://kfp.example.com or, through
    # `kubectl port-forward svc/ml-pipeline -n kubeflow 8888:8888`, http://127.0.0.1:8888.
    host: str
    # The profile namespace runs and recurring runs go to (multi-user KFP); single-user
    # installs use "kubeflow".
    namespace: Namespace = "kubeflow"
    # The experiment runs are filed under (created if missing); empty: the pipeline name.
    experiment: Optional[Experiment] = None
    # The pipeline image (TFX 1.16 + this project, infra/docker/Dockerfile) every step runs.
    pipeline_image: Image
    # The Kubernetes service account the run's pods use; bound to a Google service account
    # with Workload Identity for gs:// (infra/kubeflow/). Empty: KFP's default (pipeline-runner).
    service_account: Optional[K8sServiceAccount] = None
    # The Google service account that Kubernetes account acts as (infra/kubeflow's output google_service_account):
    # preflight asks Policy Troubleshooter whether it may do what the run does (the bucket, and each enabled
    # option's calls). Empty: not checked.
    google_service_account: Optional[ServiceAccount] = None
    # Bearer token for the API server: read from this file, or from this environment
    # variable, at call time. Neither: no Authorization header (a port-forward).
    token_file: Optional[str] = None
    token_env: Optional[EnvName] = None
    # CA bundle for an API server with a private certificate.
    ssl_ca_cert: Optional[str] = None
    # The API server as the run's own pods reach it, and the projected service-account token they send (multi-user
    # Kubeflow; infra/kubeflow/ mounts it): the run lease asks it whether the run holding the lease is over, and
    # the exit handler how the run ended. A missing token file is sent as no token (single-user).
    in_cluster_host: str = "http://ml-pipeline.kubeflow.svc.cluster.local:8888"
    in_cluster_token_file: str = "/var/run/secrets/kubeflow/pipelines/token"
    # Requests and limits per task (its id: Transform, Trainer, ...) or `default`, over DEFAULT_RESOURCES: each
    # field set here replaces that one field. Compiled into each executor's resources (pipeline/kubeflow/compile.py).
    resources: dict[str, Resources] = {}

    def resources_of(self, task: str) -> Resources:
        """DEFAULT_RESOURCES' default, then its entry for the task, then ours for all, then ours for the task."""
        merged: dict = {}
        for layer in (DEFAULT_RESOURCES, self.resources):
            for key in ("default", task):
                merged.update((layer.get(key) or Resources()).model_dump(exclude_none=True))
        return Resources(**merged)

    @field_validator("experiment", "service_account", "google_service_account", "token_env", mode="before")
    @classmethod
    def _empty_is_unset(cls, v):
        return None if v == "" else v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        parse_endpoint(v, "kubeflow.host", bare_host=False)
        return v.rstrip("/")

    @field_validator("in_cluster_host")
    @classmethod
    def _in_cluster_host(cls, v: str) -> str:
        parse_endpoint(v, "kubeflow.in_cluster_host", bare_host=False, in_cluster=True)
        return v.rstrip("/")

    @field_validator("in_cluster_token_file")
    @classmethod
    def _pod_path(cls, v: str) -> str:
        if not v.startswith("/") or ".." in v.split("/") or any(c.isspace() for c in v):
            raise ValueError(f"kubeflow.in_cluster_token_file {v!r}: an absolute path in the pod, without '..'")
        return v

    @field_validator("token_file", "ssl_ca_cert")
    @classmethod
    def _local_file(cls, v: Optional[str], info) -> Optional[str]:
        if v in (None, ""):
            return None
        field = f"kubeflow.{info.field_name}"
        if v.startswith("gs://"):
            raise ValueError(f"{field}: must be a file on this machine, not {v!r}")
        return validate_uri(v, field)

    @model_validator(mode="after")
    def _one_token_source(self) -> "KubeflowSection":
        if self.token_file and self.token_env:
            raise ValueError("set one of kubeflow.token_file and kubeflow.token_env, not both")
        return self

    @property
    def multi_user(self) -> bool:
        """Runs go to a profile namespace of multi-user Kubeflow: any namespace but standalone KFP's `kubeflow`
        (preflight fails a multi-user server left at `kubeflow`)."""
        return self.namespace != "kubeflow"

    def experiment_name(self, pipeline_name: str) -> str:
        return self.experiment or pipeline_name
