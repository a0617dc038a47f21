"""The `kubeflow` section of the config: where the KFP 2.x API server is and as whom we call it.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Optional

from pydantic import field_validator, model_validator

from pipeline.endpoints import parse_endpoint
from pipeline.sections.strings import EnvName, Experiment, Image, K8sServiceAccount, Namespace
from trainer.config import Section, validate_uri


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
    # Bearer token for the API server: read from this file, or from this environment
    # variable, at call time. Neither: no Authorization header (a port-forward).
    token_file: Optional[str] = None
    token_env: Optional[EnvName] = None
    # CA bundle for an API server with a private certificate.
    ssl_ca_cert: Optional[str] = None

    @field_validator("experiment", "service_account", "token_env", mode="before")
    @classmethod
    def _empty_is_unset(cls, v):
        return None if v == "" else v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        parse_endpoint(v, "kubeflow.host", bare_host=False)
        return v.rstrip("/")

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

    def experiment_name(self, pipeline_name: str) -> str:
        return self.experiment or pipeline_name
