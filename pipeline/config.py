"""The one typed configuration that flows from the CLI to every component. Why: docs/internals.md."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from components.data.snapshot.missing_values import DEFAULT_TOKENS
from components.data.snapshot.spans import DEFAULT_READY_MARKER, validate_marker, validate_selection
from components.data.snapshot.store import DIGEST_RE
from pipeline.endpoints import parse_endpoint
from pipeline.errors import ConfigError
from pipeline.sections.kubeflow import KubeflowSection
from pipeline.sections.predict import InferenceSection, PredictSection
from pipeline.sections.serving import ServingSection
from pipeline.sections.slices import SliceSettings
from pipeline.sections.vertex import DataflowSection, VertexSection
from trainer import pod
from trainer.budget import STEP_BUDGET
from trainer.config import Section, TrainerConfig, validate_uri
from trainer.feature_config import FeatureConfig
from trainer.tuning import Range, TuningConfig

REPO_ROOT = Path(__file__).resolve().parent.parent

# Vertex pipeline names and TFX pipeline names must satisfy both services.
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


class PipelineSection(Section):
    name: str = "penguin-tpu"
    # Relative local paths are resolved against the repo root, so a run works
    # from any working directory.
    root: str = "output"
    enable_cache: bool = True
    # A run that finds another running on the same root waits this long for it,
    # then refuses (exit 5); 0 refuses at once (pipeline/local/lock.py).
    lock_wait_seconds: float = Field(3600, ge=0)
    # On Vertex and Kubeflow no process lives through a run to heartbeat its gs:// run lease: its first task
    # takes it, its Pusher renews it (and heartbeats it while pushing), its exit handler releases it
    # (pipeline/dag/run_lease.py). So it must outlast the longest stretch without a renewal, from the start
    # through training to the push; a run that outlives it may lose the lease to a waiting run: its Pusher
    # then fails (LeaseLost) and pushes nothing. A waiting run takes a lease over at once when the holder's
    # backend says its run is over (components/coordination/job_state.py), so the ttl only bounds how long a dead holder
    # blocks when the backend can't answer: 6 h, so a daily schedule's next run is never lost to one. Raise it
    # for trainings longer than that. Local runs heartbeat theirs (components/coordination/lease.py).
    run_lease_ttl_seconds: float = Field(21600, gt=0)
    # Where compile, submit, schedule and preflight send the pipeline: Vertex AI Pipelines
    # (the vertex section) or a self-hosted Kubeflow Pipelines 2.x (the kubeflow section).
    # `run` always runs here.
    target: Literal["vertex", "kubeflow"] = "vertex"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                f"{v!r} must be lower-case letters, digits and '-', starting with a letter, at most 63 chars")
        return v

    @field_validator("root")
    @classmethod
    def _root(cls, v: str) -> str:
        return validate_uri(v, "pipeline.root")

    @property
    def root_uri(self) -> str:
        return resolve(self.root)

    @property
    def pipeline_root(self) -> str:
        return join(self.root_uri, "pipeline_root", self.name)

    @property
    def metadata_path(self) -> str:
        return join(self.root_uri, "metadata", f"{self.name}.sqlite")

    @property
    def serving_dir(self) -> str:
        return join(self.root_uri, "serving_model", self.name)

    @property
    def analyzer_cache_root(self) -> str:
        # Under the pipeline root: with Dataflow, Beam's workers write the cache entries, and their
        # account may write only there (infra/terraform/iam.tf). No TFX node is named so.
        return join(self.pipeline_root, "analyzer_cache")


class DataSection(Section):
    # A directory of CSV files with a header row.
    input_dir: str = "data/penguins"
    # A curated, reviewed schema; when empty, SchemaGen infers one from the data.
    schema_file: Optional[str] = "schema/penguins.pbtxt"
    # CSV cells equal to one of these are missing values (an empty cell always is);
    # the snapshot stores them as empty cells. [] turns this off.
    missing_values: list[str] = list(DEFAULT_TOKENS)
    # Deterministic hash split of the rows (CsvExampleGen hashes each example) into train (the Trainer fits on
    # it), eval (it picks the exported step) and test (the Evaluator's metrics and blessing, seen by nothing
    # else), as train_buckets : eval_buckets : test_buckets; 80/10/10 by default (pipeline/dag/splits.py).
    train_buckets: int = Field(8, ge=1, le=100)
    eval_buckets: int = Field(1, ge=1, le=100)
    test_buckets: int = Field(1, ge=1, le=100)
    # Span layout (input_dir holds span-<N>/ or YYYY-MM-DD/ directories): which spans
    # a run trains on, all | latest | window(k), chosen when the run starts
    # (components/data/snapshot/spans.py). Empty: input_dir is one flat directory of CSVs.
    spans: Optional[str] = None
    # With spans: a span counts only once this file is in it (the producer writes it last; the
    # Hadoop/Beam convention); until then the run summary lists it as waiting. null: every span counts.
    span_ready_marker: Optional[str] = DEFAULT_READY_MARKER
    # A run with nothing new to train on exits after its Snapshot (exit 4) instead of retraining: with spans,
    # no span newer than (or changed since) those the model serving now was trained on; flat, the same content;
    # either way the same training config and schema (components/data/snapshot/newness.py, docs/retraining.md).
    skip_when_no_new_span: bool = True
    # With spans: Transform keeps each span's analysis (means, vocabularies, ...) under
    # <pipeline root>/analyzer_cache and a run analyzes only the spans no earlier run did
    # (components/transform.py). Off by default: it pays only from about a million rows
    # per span (docs/retraining.md, `make bench` part 5).
    analyzer_cache: bool = False

    @field_validator("spans")
    @classmethod
    def _spans(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_selection(v)

    @field_validator("span_ready_marker")
    @classmethod
    def _marker(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_marker(v)

    @field_validator("input_dir", "schema_file")
    @classmethod
    def _paths(cls, v: Optional[str], info) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, f"data.{info.field_name}")


LOCAL_BEAM_RUNNER = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
REQUIREMENTS_FILE = "requirements.lock"  # in the repo root and in the image's WORKDIR (infra/docker)


class BeamSection(Section):
    # in_memory: one process, no worker start-up; right for small data.
    # multi_processing: scales with cores for large local data.
    direct_running_mode: Literal["in_memory", "multi_threading", "multi_processing"] = "in_memory"
    direct_num_workers: int = Field(1, ge=0, le=256)  # 0 means "one per core"
    extra_args: list[str] = []

    @property
    def args(self) -> list[str]:
        # Name the runner: Beam's DirectRunner first tries Prism, which downloads
        # a binary (fails offline, costing seconds per component, and elsewhere
        # silently runs a different runner). The FnApiRunner is what
        # DirectRunner falls back to for batch pipelines like ours.
        # Naming the workers' requirements (the venv this process runs in was
        # built from the lock) stops TFX from building a throwaway tfx sdist
        # for them before every Beam component (~1 s each); local runners
        # never stage it, so it is never read. A name, not this checkout's path:
        # compiled into a Vertex or Kubeflow spec, a path would be the compiling
        # machine's (absent in the image) and part of every Beam task's cache key.
        return [
            f"--runner={LOCAL_BEAM_RUNNER}",
            f"--requirements_file={REQUIREMENTS_FILE}",
            f"--direct_running_mode={self.direct_running_mode}",
            f"--direct_num_workers={self.direct_num_workers}",
            # Construction-time checks of TFX's and TFT's own Beam graphs (a few
            # thousand transforms in Transform), not of our data: ~10% of their CPU.
            "--no_pipeline_type_check",
            *self.extra_args,
        ]


class EvaluatorSection(SliceSettings):
    """The gate on the task's main metric (trainer/tasks.py: accuracy for multiclass,
    auc for binary, rmse for regression); the slices and their gates: pipeline/sections/slices.py."""
    # The candidate must be better than the trivial model on the test split (accuracy of always the majority
    # class, AUC 0.5, RMSE of always the mean; components/evaluation/trivial.py) and within these bounds, where
    # set (a bound laxer than the trivial model's value is raised to it) ...
    lower_bound: Optional[float] = None
    upper_bound: Optional[float] = None
    # ... and may not be worse than the model serving now by more than this.
    max_regression: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> "EvaluatorSection":
        if self.lower_bound is not None and self.upper_bound is not None and self.lower_bound > self.upper_bound:
            raise ValueError(f"lower_bound {self.lower_bound} is above upper_bound {self.upper_bound}")
        return self


# The Evaluator's change threshold is loosened by this much so that a
# candidate exactly as good as the baseline passes.
CHANGE_EPSILON = 1e-10


class SnapshotSection(Section):
    # Where content-addressed snapshots of data.input_dir are kept (local or
    # gs://); empty: <pipeline.root>/snapshots.
    root: Optional[str] = None
    # Pin a run to a published snapshot instead of snapshotting data.input_dir
    # (`run --snapshot <digest>`).
    digest: Optional[str] = None

    @field_validator("root")
    @classmethod
    def _root(cls, v: Optional[str]) -> Optional[str]:
        return None if v in (None, "") else validate_uri(v, "snapshot.root")

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: Optional[str]) -> Optional[str]:
        if v in (None, ""):
            return None
        if not DIGEST_RE.match(v):
            raise ValueError("must be a full snapshot digest: 64 lower-case hex characters")
        return v


class DataGateSection(Section):
    # ExampleValidator anomaly kinds (tensorflow_metadata AnomalyInfo.Type
    # names, e.g. SCHEMA_NEW_COLUMN) that do not stop the run.
    tolerated_anomalies: list[str] = []

    @field_validator("tolerated_anomalies")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        from tensorflow_metadata.proto.v0 import anomalies_pb2

        unknown = sorted(set(v) - set(anomalies_pb2.AnomalyInfo.Type.keys()))
        if unknown:
            raise ValueError(f"unknown anomaly kinds {unknown}; expected names of "
                             "tensorflow_metadata AnomalyInfo.Type such as SCHEMA_NEW_COLUMN")
        return v


class DriftGateSection(Section):
    """Newest span vs the serving model's training data (components/data/drift_gate.py)."""
    enabled: bool = True
    # Jensen-Shannon divergence for numeric features, L-infinity distance for categorical ones (TFDV),
    # as the features section resolves them; the label by its task. Unused columns are not gated.
    numeric_threshold: float = Field(0.3, gt=0, le=1)
    categorical_threshold: float = Field(0.2, gt=0, le=1)
    # Per-feature thresholds, overriding the two above.
    thresholds: dict[str, float] = {}
    # Features whose drift a person reviewed and accepts for this run (e.g. --set drift_gate.accepted='[x]').
    accepted: list[str] = []

    def as_json(self) -> str:
        import json

        return json.dumps({"numeric": self.numeric_threshold, "categorical": self.categorical_threshold,
                           "features": self.thresholds}, sort_keys=True)


_TOPIC_RE = re.compile(r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$")


class NotifySection(Section):
    """Who hears how a run ended (components/coordination/notify.py): locally at the end of `run`, on Vertex and
    Kubeflow from
    the exit handler. A failure to notify is logged; it never fails the run."""
    # projects/<project>/topics/<topic> (infra/terraform creates `pipeline-runs`).
    pubsub_topic: Optional[str] = None
    # An https URL that takes a POST of the message's JSON (plain http only to this machine).
    webhook_url: Optional[str] = None
    # all: every run; failure: only runs that did not succeed.
    on: Literal["all", "failure"] = "all"

    @field_validator("pubsub_topic")
    @classmethod
    def _topic(cls, v: Optional[str]) -> Optional[str]:
        if v in (None, ""):
            return None
        if not _TOPIC_RE.match(v):
            raise ValueError(f"{v!r} is not a Pub/Sub topic name (projects/<project>/topics/<topic>)")
        return v

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, v: Optional[str]) -> Optional[str]:
        if v in (None, ""):
            return None
        parse_endpoint(v, "notify.webhook_url", bare_host=False)
        return v

    @property
    def enabled(self) -> bool:
        return bool(self.pubsub_topic or self.webhook_url)


class Config(Section):
    pipeline: PipelineSection = PipelineSection()
    data: DataSection = DataSection()
    beam: BeamSection = BeamSection()
    trainer: TrainerConfig = TrainerConfig()
    # The dataset: label, task and features (trainer/feature_config.py, docs/data.md).
    # Required to build the pipeline; optional here so config-only tools load without it.
    features: Optional[FeatureConfig] = None
    evaluator: EvaluatorSection = EvaluatorSection()
    # Present only to tune the trainer's hyperparameters before training (trainer/tuning.py, docs/tuning.md).
    tuning: Optional[TuningConfig] = None
    # Present only when the pipeline targets Vertex AI (configs/vertex.yaml).
    vertex: Optional[VertexSection] = None
    dataflow: Optional[DataflowSection] = None
    # Present only when pipeline.target is kubeflow (configs/kubeflow.yaml).
    kubeflow: Optional[KubeflowSection] = None
    snapshot: SnapshotSection = SnapshotSection()
    data_gate: DataGateSection = DataGateSection()
    drift_gate: DriftGateSection = DriftGateSection()
    notify: NotifySection = NotifySection()
    # How a push reaches TF Serving's traffic, and the serving gate before it (docs/serving.md).
    serving: ServingSection = ServingSection()
    predict: PredictSection = PredictSection()
    inference: InferenceSection = InferenceSection()

    @property
    def snapshots_root(self) -> str:
        return resolve(self.snapshot.root) if self.snapshot.root else join(self.pipeline.root_uri, "snapshots")

    @property
    def serving_metrics_dir(self) -> str:
        """Where `serving check` records TF Serving's scrapes and decides on them (serving.check.metrics_dir)."""
        metrics_dir = self.serving.check.metrics_dir
        return resolve(metrics_dir) if metrics_dir else join(self.pipeline.root_uri, "serving_metrics")

    @model_validator(mode="after")
    def _cross_checks(self) -> "Config":
        # With trainer.train_steps (a step budget), an empty eval_every_steps is the step budget's (trainer/budget.py).
        eval_every = self.trainer.eval_every_steps or STEP_BUDGET["eval_every_steps"]
        if self.trainer.train_steps is not None and eval_every > self.trainer.train_steps:
            raise ValueError(
                f"trainer.eval_every_steps ({eval_every}{'' if self.trainer.eval_every_steps else ', the default'}) "
                f"exceeds trainer.train_steps ({self.trainer.train_steps})")
        steps = self.tuning.search_space.get("train_steps") if self.tuning else None
        if steps is not None and self.trainer.max_passes is not None:
            raise ValueError(f"tuning.space.train_steps gives each trial a step budget, and trainer.max_passes "
                             f"({self.trainer.max_passes:g}) a pass budget: search one, or leave max_passes empty")
        if steps is not None and min(steps.values if not isinstance(steps, Range) else [steps.min]) < eval_every:
            raise ValueError(f"tuning.space.train_steps goes below trainer.eval_every_steps "
                             f"({eval_every}): such a trial would never evaluate")
        if self.data.analyzer_cache and not self.data.spans:
            raise ValueError("data.analyzer_cache keeps one cache entry per span: it needs data.spans")
        if self.dataflow is not None and self.dataflow.enabled and self.vertex is None:
            raise ValueError("dataflow needs a vertex section (project, region, image, service account)")
        if self.dataflow is not None and self.vertex is not None:
            self.dataflow.check_workers(self.vertex.region)
        self._check_target()
        endpoint = self.serving.endpoint_target(self.vertex, self.pipeline.name)  # checks project and region
        if endpoint and not endpoint["api_endpoint"].startswith("http://") and not self.pipeline.serving_dir.startswith(
                "gs://"):  # Vertex reads a model's artifact_uri from Cloud Storage only
            raise ValueError(f"serving.target vertex_endpoint uploads each version from the serving dir: "
                             f"{self.pipeline.serving_dir} must be gs://")
        remote = "vertex" if self.vertex is not None else "kubeflow" if self.kubeflow is not None else None
        if remote:
            # Remote workers see only GCS: a local path would be the compiling machine's. (KFP's
            # default MinIO store is not supported: TFX reads s3:// only with tensorflow-io, tfx#4537.)
            for field, value in (("pipeline.root", self.pipeline.root), ("data.input_dir", self.data.input_dir),
                                 ("data.schema_file", self.data.schema_file),
                                 ("trainer.checkpoint_dir", self.trainer.checkpoint_dir),
                                 ("inference.input_dir", self.inference.input_dir)):
                if value is not None and not value.startswith("gs://"):
                    raise ValueError(f"{field} must be a gs:// URI when the {remote} section is set (got {value!r})")
            if pod.is_remote(self.trainer.tpu):
                raise ValueError(f"trainer.tpu={self.trainer.tpu!r} names a TPU pod, which the {remote} Trainer "
                                 f"does not drive: it trains on its worker pool's own TPU host (trainer.tpu: local). "
                                 f"Train on a pod with python -m trainer ({pod.POD_DOCS})")
        return self

    def _check_target(self) -> None:
        if self.kubeflow is not None and self.pipeline.target != "kubeflow":
            raise ValueError("a kubeflow section is set but pipeline.target is "
                             f"{self.pipeline.target!r}; set pipeline.target: kubeflow")
        if self.pipeline.target == "kubeflow":
            if self.kubeflow is None:
                raise ValueError("pipeline.target is kubeflow but there is no kubeflow section "
                                 "(host, pipeline_image, ...; see configs/kubeflow.yaml)")
            if self.vertex is not None or self.dataflow is not None:
                # Both change the DAG (Trainer CustomJob, Dataflow), which KFP clusters don't run.
                raise ValueError("pipeline.target is kubeflow: remove the vertex and dataflow sections "
                                 "(the Trainer and Beam run in the pipeline's pods)")


def resolve(uri: str) -> str:
    """Make a local relative path absolute against the repo root; leave gs:// alone."""
    if uri.startswith("gs://") or os.path.isabs(uri):
        return uri
    return str(REPO_ROOT / uri)


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def _parse_override(item: str) -> tuple[list[str], Any]:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected section.key=value")
    # YAML parsing gives the natural types: 200 -> int, [8, 8] -> list, true -> bool.
    return key.split("."), yaml.safe_load(raw) if raw else ""


def load_config(path: str | os.PathLike | None = None, overrides: list[str] = ()) -> Config:
    """Load a YAML config, apply `section.key=value` overrides, validate everything."""
    values: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist")
        values = yaml.safe_load(p.read_text()) or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
    for item in overrides:
        keys, value = _parse_override(item)
        node = values
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {k!r} is not a section")
        node[keys[-1]] = value
    try:
        return Config.model_validate(values)
    except ValidationError as e:
        raise ConfigError(_format_errors(e, path)) from None


def _format_errors(e: ValidationError, path) -> str:
    where = f" in {path}" if path else ""
    lines = [f"invalid configuration{where}:"]
    for err in e.errors():
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown setting"
        lines.append(f"  {field}: {msg} (got {err.get('input')!r})")
    return "\n".join(lines)
