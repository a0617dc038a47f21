"""What each service account in the config must be allowed to do for its step, and where.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Optional

from pipeline.cloud import images
from pipeline.cloud.access import Need, bucket_writes, option_needs, writes
from pipeline.config import Config, join


def needs(config: Config) -> list[Need]:
    """Every (account, permission, resource) the configured run relies on."""
    vertex, flow, p = config.vertex, config.dataflow, config.pipeline
    project = f"//cloudresourcemanager.googleapis.com/projects/{vertex.project}"
    pipeline = ("vertex.service_account", vertex.service_account)
    result = [
        *bucket_writes(config, *pipeline),
        Need(*pipeline, "aiplatform.customJobs.create", project, "start the Trainer's CustomJob",
             grant="roles/aiplatform.user"),
        *option_needs(config, *pipeline),
    ]
    if config.tuning is not None and config.tuning.reuse is None:
        result.append(Need(*pipeline, "aiplatform.hyperparameterTuningJobs.create", project,
                           "start the Tuner's HyperparameterTuningJob", grant="roles/aiplatform.user"))
    if vertex.training_service_account:
        training = ("vertex.training_service_account", vertex.training_service_account)
        result += [
            Need(*pipeline, "iam.serviceAccounts.actAs", _account(training[1]),
                 "run the CustomJob as the training account", grant="roles/iam.serviceAccountUser on it"),
            writes(*training, p.pipeline_root, "write the model and checkpoints",
                    "roles/storage.objectUser on the bucket (may be limited to pipeline_root/)"),
        ]
    if flow is not None and flow.enabled:
        workers = ("dataflow.service_account", flow.service_account)
        result += [
            Need(*pipeline, "dataflow.jobs.create", project, "launch Dataflow jobs",
                 grant="roles/dataflow.developer or the Terraform's dataflow launcher role"),
            Need(*pipeline, "iam.serviceAccounts.actAs", _account(workers[1]),
                 "start Dataflow workers as their account", grant="roles/iam.serviceAccountUser on it"),
            Need(*workers, "dataflow.workItems.lease", project, "run Dataflow work items",
                 grant="roles/dataflow.worker"),
            writes(*workers, p.pipeline_root, "write Beam outputs", "roles/storage.objectUser on the bucket"),
            writes(*workers, join(p.root_uri, "tmp", "dataflow"), "write Dataflow temp and staging files",
                    "roles/storage.objectUser on the bucket"),
        ]
        repository = _repository(vertex.pipeline_image)
        if repository:
            result.append(Need(*workers, "artifactregistry.repositories.downloadArtifacts",
                               f"//artifactregistry.googleapis.com/{repository}", "pull the pipeline image",
                               grant="roles/artifactregistry.reader on the repository"))
    return result


def _account(email: str) -> str:
    # name@PROJECT.iam.gserviceaccount.com lives in PROJECT, which may not be vertex.project.
    project = email.split("@", 1)[1].split(".", 1)[0]
    return f"//iam.googleapis.com/projects/{project}/serviceAccounts/{email}"


def _repository(image: str) -> Optional[str]:
    ref = images.parse(image)
    return ref.repository_name if ref else None
