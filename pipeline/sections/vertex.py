"""The `vertex` and `dataflow` sections of the config (pipeline.config.Config embeds them)."""

from __future__ import annotations

import datetime
from typing import Any, Optional

from pydantic import Field, field_validator, model_validator

from pipeline.sections.presets import PRESETS, Preset, PresetName, single_host_error
from pipeline.sections.strings import (
    LABEL_KEY_RE,
    LABEL_VALUE_RE,
    SUBNET_RE,
    AcceleratorType,
    Image,
    MachineType,
    ProjectId,
    Region,
    ServiceAccount,
    Subnetwork,
    TpuTopology,
    check,
)
from trainer.config import Section


class WorkerPoolSection(Section):
    """The Trainer's Vertex AI CustomJob machines: a preset (pipeline/sections/presets.py), optionally adjusted."""
    preset: PresetName = "tpu_v5e"
    machine_type: Optional[MachineType] = None
    accelerator_type: Optional[AcceleratorType] = None
    accelerator_count: Optional[int] = Field(None, ge=1, le=64)
    tpu_topology: Optional[TpuTopology] = None
    # Extra workers (workerpool1) for MultiWorkerMirroredStrategy; TF on
    # Vertex TPUs is single-host, so TPU presets take none.
    extra_workers: int = Field(0, ge=0, le=64)
    # Empty: the image the preset names (vertex.trainer_image, gpu_image or pipeline_image).
    image: Optional[Image] = None

    @model_validator(mode="after")
    def _fits_the_preset(self) -> "WorkerPoolSection":
        if self.is_tpu and self.extra_workers:
            raise ValueError(f"preset {self.preset} runs on one TPU host; extra_workers must be 0")
        # An override may resize the preset's machine, not turn it into another
        # kind: the image, runtime environment and accelerator check follow the preset.
        base = self.spec.machine_spec
        for key in ("accelerator_type", "accelerator_count", "tpu_topology"):
            if getattr(self, key) is not None and key not in base:
                raise ValueError(f"preset {self.preset} takes no {key} (its machine: {dict(base)}); "
                                 "pick the preset of the machine you want")
        prefix = self.spec.accelerator_prefix
        if self.accelerator_type is not None and prefix and not self.accelerator_type.startswith(prefix):
            raise ValueError(f"accelerator_type {self.accelerator_type} does not fit preset {self.preset} "
                             f"(expects {prefix}...)")
        problem = single_host_error(self.spec, self.machine_spec)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def spec(self) -> Preset:
        return PRESETS[self.preset]

    @property
    def is_tpu(self) -> bool:
        return self.spec.accelerator == "tpu"

    @property
    def machine_spec(self) -> dict[str, Any]:
        spec = dict(self.spec.machine_spec)
        for key in ("machine_type", "accelerator_type", "accelerator_count", "tpu_topology"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        return spec


# Why a preset's image must be given, not replaced by the pipeline image.
_IMAGE_NEEDED = {
    "trainer_image": "the TPU image (infra/docker/Dockerfile.tpu): the pipeline image has no libtpu",
    "gpu_image": "the CUDA image (infra/docker/Dockerfile.gpu): the pipeline image has no CUDA libraries, "
                 "so TensorFlow would find no GPU and train on CPU",
}


class Price(Section):
    """What one replica of a worker-pool preset costs per hour, as read from a price list: never measured."""
    usd_per_hour: float = Field(gt=0)
    read_on: datetime.date  # when the figure was read: prices change
    source: str  # where: the page (https://...) the figure was read from

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if not v.startswith("https://") or any(c.isspace() for c in v):
            raise ValueError(f"{v!r} is not the https:// address of the page the price was read from")
        return v


class VertexSection(Section):
    """Where and as whom the pipeline runs on Vertex AI Pipelines. No credentials here:
    the client uses Application Default Credentials."""
    project: ProjectId
    region: Region = "us-central1"
    # The pipeline image (TFX 1.16 + this project) and its TPU variant for the Trainer.
    pipeline_image: Image
    trainer_image: Optional[Image] = None
    # The CUDA variant for the gpu preset.
    gpu_image: Optional[Image] = None
    # Runs the pipeline's steps; the Trainer's CustomJob runs as training_service_account.
    service_account: ServiceAccount
    training_service_account: Optional[ServiceAccount] = None
    labels: dict[str, str] = {}
    # Runtime parameter values passed to PipelineJob; names must exist in the compiled spec.
    parameter_values: dict[str, Any] = {}
    worker_pool: WorkerPoolSection = WorkerPoolSection()
    # Hourly price of one replica of each preset (machine and accelerators), for the estimated cost of a
    # run's training (pipeline/runs/cost.py). Read them for your region from cloud.google.com/vertex-ai/pricing;
    # a preset without one gets no cost estimate.
    prices: dict[PresetName, Price] = {}

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            check(LABEL_KEY_RE, key, "label key (lower-case letter first, then [a-z0-9_-], max 63)")
            check(LABEL_VALUE_RE, value, f"value for label {key!r} ([a-z0-9_-], max 63)")
        return v

    @model_validator(mode="after")
    def _preset_image(self) -> "VertexSection":
        pool = self.worker_pool
        if not pool.image and getattr(self, pool.spec.image) is None:
            raise ValueError(f"worker_pool.preset {pool.preset} runs vertex.{pool.spec.image}, which is not set; "
                             f"it must be {_IMAGE_NEEDED[pool.spec.image]}")
        return self

    @property
    def trainer_container_image(self) -> str:
        pool = self.worker_pool
        return pool.image or getattr(self, pool.spec.image)


class DataflowSection(Section):
    """Beam on Dataflow for the Beam-powered components when the data outgrows one machine."""
    enabled: bool = True
    machine_type: MachineType = "n1-standard-4"
    max_num_workers: int = Field(10, ge=1, le=1000)
    disk_size_gb: int = Field(50, ge=10, le=65536)
    # The workers' own account (infra/terraform output dataflow_service_account:
    # roles/dataflow.worker, bucket and registry access); the pipeline's
    # account launches the jobs and acts as this one.
    service_account: Optional[ServiceAccount] = None
    # Full subnetwork URL or regions/REGION/subnetworks/NAME (infra/terraform
    # output dataflow_subnetwork), in vertex.region.
    subnetwork: Optional[Subnetwork] = None
    use_public_ips: bool = False

    def check_workers(self, region: str) -> None:
        """Settings with which every Dataflow job would fail; run by Config once it knows vertex is set."""
        if not self.enabled:
            return
        if self.service_account is None:
            raise ValueError("dataflow.service_account is required: the account the Dataflow workers run as, "
                             "with roles/dataflow.worker (infra/terraform output dataflow_service_account)")
        if not self.use_public_ips and self.subnetwork is None:
            raise ValueError(
                "dataflow.use_public_ips is false but no dataflow.subnetwork is set: workers without public IPs "
                "reach Cloud Storage, Artifact Registry and Google APIs only through Private Google Access, which the "
                "default network's subnets have off, so every Dataflow step would fail (Dataflow docs, "
                "'Configure internet access and firewall rules'); set dataflow.subnetwork to a subnetwork with "
                "Private Google Access and a firewall rule for TCP 12345-12346 between workers "
                "(infra/terraform output dataflow_subnetwork), or use_public_ips: true")
        subnet = self.subnetwork_parts("")
        if subnet and subnet[1] != region:
            raise ValueError(f"dataflow.subnetwork {self.subnetwork!r} is not in vertex.region {region!r}, "
                             "where the Dataflow jobs run")

    def subnetwork_parts(self, default_project: str) -> Optional[tuple[str, str, str]]:
        """(project, region, name) of dataflow.subnetwork; the short form is in `default_project`."""
        if self.subnetwork is None:
            return None
        m = SUBNET_RE.match(self.subnetwork)
        return m["project"] or default_project, m["region"], m["name"]
