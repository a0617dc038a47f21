"""Shared by the Vertex tests: one compiled spec per test process, and a test config."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from pipeline.config import Config, load_config  # noqa: E402

VERTEX_YAML = "configs/vertex.yaml"
BUCKET = "penguin-test-bucket"
PROJECT = "test-project"
PIPELINE_SA = f"penguin-pipeline@{PROJECT}.iam.gserviceaccount.com"
DATAFLOW_SA = f"penguin-dataflow@{PROJECT}.iam.gserviceaccount.com"


def vertex_config(*overrides: str) -> Config:
    """configs/vertex.yaml in a test project and bucket."""
    return load_config(VERTEX_YAML, [
        f"vertex.project={PROJECT}", f"pipeline.root=gs://{BUCKET}/root",
        f"vertex.service_account={PIPELINE_SA}", f"dataflow.service_account={DATAFLOW_SA}", *overrides])


@functools.lru_cache(maxsize=None)
def compiled_template(*overrides: str) -> Path:
    """Compile once per process and override set; compiling takes seconds."""
    from pipeline.vertex.compile import compile_pipeline

    out = Path(tempfile.mkdtemp(prefix="vertex-spec-")) / "pipeline.json"
    return compile_pipeline(vertex_config(*overrides), out)


def pipeline_tasks(pipeline_spec: dict) -> dict:
    """The pipeline's tasks: in the `tfx-dag` sub-DAG the exit handler wraps them in (pipeline/dag/run_lease.py),
    and those in the condition group inside it (pipeline/spec/condition_group.py), the group's task too."""
    from pipeline.spec.condition_group import GROUP_COMPONENT, task_dag

    group = pipeline_spec["components"].get(GROUP_COMPONENT, {}).get("dag", {}).get("tasks", {})
    return {**task_dag(pipeline_spec)["tasks"], **group}


def task_executor(spec: dict, task: str) -> dict:
    """The container spec of one task in a compiled PipelineJob JSON."""
    from pipeline.spec.cache_rule import task_executor as executor

    pipeline_spec = spec["pipelineSpec"]
    return executor(pipeline_spec, pipeline_tasks(pipeline_spec)[task])["container"]


OBJECTS = f"//storage.googleapis.com/projects/_/buckets/{BUCKET}/objects/"
PROJECT_RESOURCE = f"//cloudresourcemanager.googleapis.com/projects/{PROJECT}"
IMAGES = "projects/my-gcp-project/locations/us-central1/repositories/penguin"
SUBNET = f"projects/{PROJECT}/regions/us-central1/subnetworks/penguin-dataflow"
TPU_V5E_QUOTA, TPU_V3_QUOTA = "custom_model_training_tpu_v5e", "custom_model_training_tpu_v3"


def _account(email: str) -> str:
    return f"//iam.googleapis.com/projects/{email.split('@')[1].split('.')[0]}/serviceAccounts/{email}"


def terraformed():
    """The project infra/terraform (main.tf, iam.tf, network.tf) builds, for configs/vertex.yaml in the test
    project, as tests/fake_google_apis.py serves it to preflight: its APIs are Terraform's list."""
    from tests.fake_google_apis import Project
    from tests.infra_support import load_terraform

    training_sa = vertex_config().vertex.training_service_account
    return Project(
        project=PROJECT,
        enabled_apis=set(load_terraform()["locals"]["apis"]),
        buckets={BUCKET: "US-CENTRAL1"},
        # A deployer: aiplatform.user, legacyBucketReader, serviceAccountUser on the pipeline account,
        # serviceusage.serviceUsageViewer.
        caller={"storage.buckets.get", "aiplatform.pipelineJobs.create", "aiplatform.schedules.create",
                "iam.serviceAccounts.actAs", "serviceusage.services.get", "serviceusage.quotas.get"},
        accounts={PIPELINE_SA, training_sa, DATAFLOW_SA},
        grants={
            (PIPELINE_SA, "storage.objects.create", OBJECTS),  # objectUser on the whole bucket
            (PIPELINE_SA, "aiplatform.customJobs.create", PROJECT_RESOURCE),
            (PIPELINE_SA, "aiplatform.hyperparameterTuningJobs.create", PROJECT_RESOURCE),  # aiplatform.user too
            (PIPELINE_SA, "dataflow.jobs.create", PROJECT_RESOURCE),
            (PIPELINE_SA, "iam.serviceAccounts.actAs", _account(training_sa)),
            (PIPELINE_SA, "iam.serviceAccounts.actAs", _account(DATAFLOW_SA)),
            (training_sa, "storage.objects.create", OBJECTS + "root/pipeline_root/"),  # prefix condition
            (DATAFLOW_SA, "dataflow.workItems.lease", PROJECT_RESOURCE),
            (DATAFLOW_SA, "storage.objects.create", OBJECTS + "root/pipeline_root/"),
            (DATAFLOW_SA, "storage.objects.create", OBJECTS + "root/tmp/"),
            (DATAFLOW_SA, "artifactregistry.repositories.downloadArtifacts",
             f"//artifactregistry.googleapis.com/{IMAGES}"),
        },
        images={f"{IMAGES}/packages/pipeline/tags/0.1.0", f"{IMAGES}/packages/pipeline-tpu/tags/0.1.0"},
        subnetworks={SUBNET: True},
        # Vertex AI custom-training TPU quota granted in two regions (new projects have 0).
        quotas={f"aiplatform.googleapis.com/{TPU_V5E_QUOTA}": {"us-central1": 8, "europe-west4": 4},
                f"aiplatform.googleapis.com/{TPU_V3_QUOTA}": {"us-central1": 8}})


def raw_example(row: dict[str, str], schema, config):
    """A CSV row as the pipeline reads it, as a tf.Example without the label: an empty cell, or one holding a
    missing-value token (`NA`), is a feature with no values. `schema`: a tensorflow_metadata Schema."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    example = tf.train.Example()
    for feature in schema.feature:
        if feature.name == config.features.label or feature.name not in row:
            continue
        value, target = row[feature.name], example.features.feature[feature.name]
        if value in config.data.missing_values:
            value = ""
        if feature.type == schema_pb2.INT:
            target.int64_list.value.extend([int(value)] if value else [])
        elif feature.type == schema_pb2.FLOAT:
            target.float_list.value.extend([float(value)] if value else [])
        else:
            target.bytes_list.value.extend([value.encode()] if value else [])
    return example
