"""The Trainer as a Vertex AI CustomJob on the configured machines; without a `vertex` section, TFX's Trainer.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Any

from tfx.components import Trainer

from pipeline.config import Config
from pipeline.errors import ConfigError
from pipeline.sections.presets import env_list
from trainer.run_fn import CONFIG_KEY


def trainer_class(config: Config) -> type:
    """TFX's Vertex training extension runs the same run_fn inside a CustomJob."""
    return vertex_extension().Trainer if config.vertex else Trainer


def vertex_extension():
    # Imported on demand: it pulls in google-cloud-aiplatform, which local runs don't need.
    from tfx.v1.extensions import google_cloud_ai_platform

    return google_cloud_ai_platform


def trainer_custom_config(config: Config) -> dict[str, Any]:
    if config.vertex is None:
        return {CONFIG_KEY: config.trainer.model_dump()}
    ext = vertex_extension()
    vertex = config.vertex
    # checkpoint_dir stays empty unless set (then gs://, see Config): run_fn
    # then checkpoints under the Trainer's model_run dir, which on Vertex is
    # gs://<pipeline root>/... and the same for every restart of one CustomJob,
    # so a preempted job resumes, while a new pipeline run starts afresh.
    trainer = config.trainer.model_dump()
    trainer["strategy"] = trainer_strategy(config)
    # The trainer refuses to start without the accelerator the preset pays for.
    trainer["require_accelerator"] = vertex.worker_pool.spec.accelerator
    job_spec: dict[str, Any] = {"worker_pool_specs": worker_pool_specs(config)}
    if vertex.training_service_account:
        job_spec["service_account"] = vertex.training_service_account
    if vertex.worker_pool.extra_workers or vertex.worker_pool.is_tpu:
        job_spec["scheduling"] = job_scheduling()
    return {
        CONFIG_KEY: trainer,
        ext.ENABLE_VERTEX_KEY: True,
        ext.VERTEX_REGION_KEY: vertex.region,
        ext.TRAINING_ARGS_KEY: {"project": vertex.project, "job_spec": job_spec, "labels": dict(vertex.labels)},
    }


def job_scheduling() -> dict[str, Any]:
    """A job that is "not resilient to workers leaving" restarts whole when one does (aiplatform_v1
    Scheduling.restart_job_on_worker_restart, google/cloud/aiplatform_v1/types/custom_job.py): synchronous
    workers, and a TPU slice, whose chips are one system set up once at start. The restarted job resumes
    from its checkpoint. disable_retries would override it, so it stays unset."""
    return {"restart_job_on_worker_restart": True}


def worker_pool_specs(config: Config) -> list[dict[str, Any]]:
    """The CustomJob's pools in the proto's snake_case, which TFX's Vertex client passes on
    unchanged apart from the container command; the runtime environment is the preset's."""
    pool = config.vertex.worker_pool
    container: dict[str, Any] = {"image_uri": config.vertex.trainer_container_image}
    if pool.spec.env:
        container["env"] = env_list(pool.spec.env)
    chief = {"machine_spec": pool.machine_spec, "replica_count": 1, "container_spec": container}
    specs = [chief]
    if pool.extra_workers:
        specs.append({**chief, "replica_count": pool.extra_workers})
    return specs


def trainer_strategy(config: Config) -> str:
    """The trainer's strategy follows the machine; an explicit, contradicting choice is an error."""
    pool = config.vertex.worker_pool
    if pool.is_tpu:
        expected = "tpu"
    elif pool.extra_workers:
        expected = "multi_worker"
    elif pool.machine_spec.get("accelerator_count", 0) > 1:
        expected = "mirrored"
    else:
        expected = "default"
    chosen = config.trainer.strategy
    if chosen not in ("auto", expected):
        raise ConfigError(f"trainer.strategy={chosen!r} does not fit vertex.worker_pool (preset {pool.preset}, "
                          f"{pool.extra_workers} extra workers): use 'auto' or {expected!r}")
    return expected
