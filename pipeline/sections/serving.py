"""The `serving` section: how a pushed model reaches TF Serving's traffic (rollout), the warm-up requests and the
serving gate before the push.
Why and sources: docs/serving.md."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.serving import prediction_image
from components.serving.canary_check import Rules
from components.serving.serving_gate import GateSettings
from components.serving.warmup import MAX_REQUESTS
from pipeline.sections.strings import MACHINE_RE, PROJECT_RE, REGION_RE, check
from trainer.config import Section, validate_uri

# projects/P/locations/R/endpoints/ID, or the numeric ID alone (then in vertex.project and vertex.region).
ENDPOINT_RE = re.compile(rf"^(projects/{PROJECT_RE.pattern[1:-1]}/locations/{REGION_RE.pattern[1:-1]}/endpoints/)?"
                         r"[0-9]{1,19}$")
# UploadModelRequest.model_id (model_service.proto): up to 63 of [a-z0-9_-], not starting with a digit or hyphen.
MODEL_ID_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")


class CheckSection(Section):
    """`python -m pipeline serving check`: when the canary's live metrics decide
    (components/serving/canary_check.py)."""
    # Nothing is decided before the canary has been out this long and answered this many requests.
    min_canary_minutes: float = Field(60.0, ge=0)
    min_requests: int = Field(200, ge=1)
    # Roll back when the canary's share of non-OK answers exceeds stable's by more than this (0.01: one point) ...
    max_error_rate_increase: float = Field(0.01, ge=0, le=1)
    # ... or its mean request latency is more than this many times stable's.
    max_latency_ratio: float = Field(1.5, ge=1)
    # Where the scrapes are recorded (`serving check --stable-url/--canary-url` writes them) and read, local or
    # gs://; empty: <pipeline.root>/serving_metrics (Config.serving_metrics_dir).
    metrics_dir: Optional[str] = None
    # Also decide as each run's first step, after the run lease and before the Snapshot, on the scrapes recorded
    # there (components/serving/canary_check_component.py): a run then starts from what the evidence says should serve.
    # Off in every shipped config: without a recorder of scrapes the step can only wait (docs/serving.md).
    before_run: bool = False
    # With serving.target vertex_endpoint the command reads Cloud Monitoring instead of scrapes: empty is
    # monitoring.googleapis.com with the application's default credentials; 127.0.0.1:PORT is a loopback stand-in
    # (plain gRPC, for tests).
    monitoring_endpoint: str = ""

    @field_validator("monitoring_endpoint")
    @classmethod
    def _monitoring(cls, v: str) -> str:
        if v and not re.match(r"^127\.0\.0\.1:[0-9]{1,5}$", v):
            raise ValueError(f"serving.check.monitoring_endpoint {v!r}: empty (monitoring.googleapis.com) or "
                             "127.0.0.1:PORT (a loopback stand-in)")
        return v

    @field_validator("metrics_dir")
    @classmethod
    def _metrics_dir(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, "serving.check.metrics_dir")

    def rules(self) -> Rules:
        return Rules(self.min_canary_minutes, self.min_requests, self.max_error_rate_increase, self.max_latency_ratio)


class VertexEndpointSection(Section):
    """serving.target vertex_endpoint: one Model Registry model, one existing endpoint
    (components/serving/vertex_endpoint.py)."""
    endpoint: str
    model_id: str                        # the registry model every push is a new version of
    display_name: Optional[str] = None   # default: pipeline.name
    # One of Vertex's prebuilt TensorFlow prediction containers, as the pinned client lists them
    # (google.cloud.aiplatform.constants.prediction.TF_CONTAINER_URIS; cloud.google.com/vertex-ai/docs/predictions/
    # pre-built-containers). Empty: tf2-cpu.2-15 from the registry nearest the endpoint's region
    # (components/serving/prediction_image.py). 2.15 is the newest Vertex lists; our models are exported by 2.16.
    image_uri: Optional[str] = None
    # An image whose TensorFlow is older than the exporter's is refused: the serving gate cannot load the model under
    # it here. True after you have loaded a model in that image yourself: the push then says it was not checked.
    accept_older_image_tf: bool = False
    machine_type: str = "n1-standard-2"
    canary_percent: int = Field(10, ge=1, le=99)  # the challenger's share while it is out; the champion keeps the rest
    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(1, ge=1)
    # Where the Vertex API calls go; empty: {region}-aiplatform.googleapis.com. http://127.0.0.1:PORT: the loopback
    # stand-in (pipeline/dryrun/vertex_endpoints.py), for tests and dry runs.
    api_endpoint: str = ""

    @field_validator("endpoint", mode="before")
    @classmethod
    def _endpoint(cls, v) -> str:
        v = str(v) if isinstance(v, int) else v  # YAML reads a bare id as a number
        return check(ENDPOINT_RE, v, "serving.vertex_endpoint.endpoint (projects/P/locations/R/endpoints/ID or ID)")

    @field_validator("model_id")
    @classmethod
    def _model_id(cls, v: str) -> str:
        return check(MODEL_ID_RE, v, "serving.vertex_endpoint.model_id (up to 63 of a-z 0-9 _ -, not a digit first)")

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        return check(MACHINE_RE, v, "serving.vertex_endpoint.machine_type")

    @field_validator("image_uri")
    @classmethod
    def _image(cls, v: Optional[str]) -> Optional[str]:
        from google.cloud.aiplatform.constants.prediction import TF_CONTAINER_URIS

        if v in (None, ""):
            return None
        if v not in TF_CONTAINER_URIS:
            raise ValueError(f"serving.vertex_endpoint.image_uri {v!r} is not one of Vertex's prebuilt TensorFlow "
                             f"prediction containers (e.g. {TF_CONTAINER_URIS[0]})")
        return v

    @field_validator("api_endpoint")
    @classmethod
    def _api(cls, v: str) -> str:
        if v and not re.match(r"^(http://127\.0\.0\.1:[0-9]{1,5}|[a-z0-9-]+-aiplatform\.googleapis\.com)$", v):
            raise ValueError(f"serving.vertex_endpoint.api_endpoint {v!r}: expected REGION-aiplatform.googleapis.com "
                             "or http://127.0.0.1:PORT (the stand-in)")
        return v

    @model_validator(mode="after")
    def _image_tf(self) -> "VertexEndpointSection":
        older = prediction_image.older_than_exporter(self.image_uri or prediction_image.default_uri("us-central1"))
        if older and not self.accept_older_image_tf:
            raise ValueError(f"serving.vertex_endpoint.image_uri: {older}. Serve with serving.target tf_serving "
                             "(infra/serving runs tensorflow/serving:2.16.1), or, once you have loaded a model in "
                             "that image yourself, set serving.vertex_endpoint.accept_older_image_tf: true")
        return self

    @model_validator(mode="after")
    def _replicas(self) -> "VertexEndpointSection":
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"serving.vertex_endpoint.max_replicas {self.max_replicas} is below min_replicas "
                             f"{self.min_replicas}")
        return self

    def target(self, vertex, model_name: str) -> dict:
        """The components/serving/vertex_endpoint.py Target's fields (JSON between the config and the Pusher). The
        project
        and region are the endpoint's resource name's; an endpoint given by id alone is in the vertex section's."""
        if "/" in self.endpoint:
            project, region = self.endpoint.split("/")[1], self.endpoint.split("/")[3]
            if vertex is not None and (vertex.project, vertex.region) != (project, region):
                raise ValueError(f"serving.vertex_endpoint.endpoint {self.endpoint} is not in vertex.project "
                                 f"{vertex.project} and vertex.region {vertex.region}")
        elif vertex is None:
            raise ValueError(f"serving.vertex_endpoint.endpoint {self.endpoint!r} is an id: name the endpoint in "
                             "full (projects/P/locations/R/endpoints/ID) or add the vertex section")
        else:
            project, region = vertex.project, vertex.region
        return dict(project=project, region=region, endpoint=f"projects/{project}/locations/{region}/endpoints/"
                    f"{self.endpoint.rsplit('/', 1)[-1]}", model_id=self.model_id,
                    display_name=self.display_name or model_name,
                    image_uri=self.image_uri or prediction_image.default_uri(region),
                    accept_older_image_tf=self.accept_older_image_tf, machine_type=self.machine_type,
                    canary_percent=self.canary_percent, min_replicas=self.min_replicas,
                    max_replicas=self.max_replicas, api_endpoint=self.api_endpoint)


class ServingSection(Section):
    # direct: a push serves at once under the label `stable`; canary: it is added under `canary` while `stable` keeps
    # serving, until `python -m pipeline serving promote` (or rollback). The first push of a root is stable either
    # way. configs/local.yaml keeps direct (docs/serving.md says why), the cloud configs choose canary.
    rollout: Literal["direct", "canary"] = "direct"
    # Warm-up requests (assets.extra/tf_serving_warmup_requests): this many eval rows, one request each; the
    # serving gate replays them in a TensorFlow-only process. TF Serving reads at most 1000.
    warmup_requests: int = Field(8, ge=1, le=MAX_REQUESTS)
    # The slowest replayed request (after one untimed pass that pays TF's lazy initialisation) must answer within this.
    max_latency_ms: float = Field(1000.0, gt=0)
    # The probe process as a whole: importing TensorFlow, loading the model, both passes.
    gate_timeout_seconds: float = Field(300.0, gt=0)
    check: CheckSection = CheckSection()
    # The poll interval of the model servers that read models.config, the file with the labels (TF Serving's
    # --model_config_file_poll_wait_seconds): a label moved onto a version they have not loaded is then two writes
    # this far apart (list the version, then move the label: TF Serving applies labels before it loads,
    # components/serving/model_config.py onto_unloaded). 0: no server reads models.config; the ones infra/serving
    # runs read the label-free track files (stable.config, canary.config).
    model_config_poll_seconds: float = Field(0.0, ge=0, le=3600)
    # tf_serving: the serving dir and its model config files alone. vertex_endpoint: also each pushed version to the
    # Model Registry and the endpoint below (components/serving/vertex_endpoint.py).
    target: Literal["tf_serving", "vertex_endpoint"] = "tf_serving"
    vertex_endpoint: Optional[VertexEndpointSection] = None

    @model_validator(mode="after")
    def _target(self) -> "ServingSection":
        if self.target == "vertex_endpoint" and self.vertex_endpoint is None:
            raise ValueError("serving.target vertex_endpoint needs a serving.vertex_endpoint section "
                             "(endpoint, model_id)")
        return self

    def endpoint_target(self, vertex, model_name: str) -> Optional[dict]:
        """The Vertex endpoint target's fields with target vertex_endpoint, else None; `vertex`: the vertex section."""
        if self.target != "vertex_endpoint":
            return None
        return self.vertex_endpoint.target(vertex, model_name)

    def gate_settings(self, model_name: str, drop_features: tuple[str, ...], vertex=None) -> GateSettings:
        return GateSettings(model_name=model_name, warmup_requests=self.warmup_requests,
                            max_latency_ms=self.max_latency_ms, timeout_seconds=self.gate_timeout_seconds,
                            drop_features=drop_features, rollout=self.rollout,
                            model_config_poll_seconds=self.model_config_poll_seconds,
                            vertex_endpoint=self.endpoint_target(vertex, model_name))
