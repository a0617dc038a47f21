"""What each Vertex worker-pool preset needs: machine, image, runtime environment,
and the accelerator the trainer must find or refuse to start. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Literal, Mapping, Optional

from trainer import pod

# Where the TPU image keeps libtpu (infra/docker/Dockerfile.tpu).
LIBTPU_PATH = "/lib/libtpu.so"
PJRT_ENV = {pod.PLUGGABLE_LIBRARY_ENV: LIBTPU_PATH, pod.PLUGGABLE_C_API_ENV: "true"}


@dataclasses.dataclass(frozen=True)
class Host:
    """One TPU host, as a Vertex machine type of a TPU preset: the most one worker-pool replica holds."""
    machine_type: str
    topology: Optional[str] = None  # TPU VM machines (v5e): the chips of one host, as machine_spec.tpu_topology
    accelerator_count: Optional[int] = None  # cloud-tpu (v2/v3): the cores of one host


@dataclasses.dataclass(frozen=True)
class Preset:
    machine_spec: Mapping[str, Any]
    # The vertex.* config field naming the image the Trainer runs.
    image: Literal["trainer_image", "gpu_image", "pipeline_image"]
    # container_spec.env of the Trainer's worker pools.
    env: Mapping[str, str]
    # trainer.require_accelerator: the trainer fails at start without it.
    accelerator: Optional[Literal["tpu", "gpu"]]
    # Accelerator types this preset accepts as an override (prefix).
    accelerator_prefix: Optional[str] = None
    # Cloud TPU's name for the generation (v5litepod-4, v3-8): how preflight names the slice.
    tpu_generation: Optional[str] = None
    # Vertex AI's custom-training quota metric for it (aiplatform.googleapis.com/<this>, per region, in cores).
    training_quota: Optional[str] = None
    # TPU presets: the machine types it may use, each one host (single_host_error; sources in docs/internals.md).
    hosts: tuple[Host, ...] = ()


PRESETS: dict[str, Preset] = {
    # A TPU VM: topology, no accelerator fields.
    "tpu_v5e": Preset({"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, "trainer_image", PJRT_ENV,
                      "tpu", tpu_generation="v5litepod",
                      training_quota="custom_model_training_tpu_v5e",
                      hosts=(Host("ct5lp-hightpu-1t", "1x1"), Host("ct5lp-hightpu-4t", "2x2"),
                             Host("ct5lp-hightpu-8t", "2x4"))),
    # The legacy "cloud-tpu" machine with 8 cores.
    "tpu_v3": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V3", tpu_generation="v3",
                     training_quota="custom_model_training_tpu_v3", hosts=(Host("cloud-tpu", accelerator_count=8),)),
    "tpu_v2": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V2", tpu_generation="v2",
                     hosts=(Host("cloud-tpu", accelerator_count=8),)),
    "gpu": Preset({"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
                  "gpu_image", {}, "gpu", accelerator_prefix="NVIDIA_"),
    "cpu": Preset({"machine_type": "n1-standard-8"}, "pipeline_image", {}, None),
}

PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


def tpu_cores(preset: Preset, machine_spec: Mapping[str, Any]) -> Optional[int]:
    """The TPU cores a machine spec takes (what the training quota counts), None without a TPU."""
    if preset.tpu_generation is None:
        return None
    if "tpu_topology" in machine_spec:  # a TPU VM slice: its chips, one core each (v5e)
        return math.prod(int(n) for n in machine_spec["tpu_topology"].split("x"))
    return int(machine_spec["accelerator_count"])


def cloud_tpu_type(preset: Preset, machine_spec: Mapping[str, Any]) -> Optional[str]:
    """Cloud TPU's accelerator type for a TPU machine spec (v5litepod-4 for 2x2, v3-8), else None."""
    cores = tpu_cores(preset, machine_spec)
    return None if cores is None else f"{preset.tpu_generation}-{cores}"


def _chips(topology: str) -> int:
    return math.prod(int(n) for n in topology.split("x"))


# Why Vertex takes one host only: its TensorFlow-on-TPU training is single-host (docs/internals.md).
_ONE_HOST = ("Vertex AI runs TensorFlow on one TPU host only "
             "(cloud.google.com/vertex-ai/docs/training/training-with-tpu-vm)")


def single_host_error(preset: Preset, machine_spec: Mapping[str, Any]) -> Optional[str]:
    """Why `machine_spec` is not one host of `preset`'s TPU machines (the fix included), or None when it is.
    A larger slice would start one uncoordinated trainer per host; a smaller one is not a slice Vertex offers."""
    if not preset.hosts:
        return None
    hosts = {h.machine_type: h for h in preset.hosts}
    machine = machine_spec.get("machine_type")
    host = hosts.get(machine)
    if host is None:
        return (f"vertex.worker_pool.machine_type {machine!r} is not a TPU {preset.tpu_generation} machine of this "
                f"preset; use one of {', '.join(hosts)} (one host each)")
    pod_path = f"to use more than one host, train outside Vertex as a TPU pod's client ({pod.POD_DOCS})"
    if host.accelerator_count is not None:
        count = machine_spec.get("accelerator_count")
        if count == host.accelerator_count:
            return None
        name = f"{preset.tpu_generation}-{host.accelerator_count}"
        if isinstance(count, int) and count > host.accelerator_count:
            return (f"vertex.worker_pool.accelerator_count {count} on {machine} is a {preset.tpu_generation}-{count} "
                    f"pod slice of {math.ceil(count / host.accelerator_count)} hosts ({host.accelerator_count} cores "
                    f"per host), but {_ONE_HOST}; use accelerator_count {host.accelerator_count} ({name}), "
                    f"or {pod_path}")
        return (f"vertex.worker_pool.accelerator_count {count} on {machine}: one host is {name}; "
                f"use {host.accelerator_count}")
    asked = machine_spec.get("tpu_topology")
    if asked == host.topology:
        return None
    if not isinstance(asked, str) or not re.fullmatch(r"[0-9]+(x[0-9]+)+", asked):
        return f"vertex.worker_pool.tpu_topology {asked!r}: {machine} is one host of {host.topology}; set that"
    fit = next((h.machine_type for h in preset.hosts if h.topology == asked), None)
    chips, per_host = _chips(asked), _chips(host.topology)
    if chips > per_host:
        largest = max(preset.hosts, key=lambda h: _chips(h.topology))
        instead = (f"on one host, {asked} needs vertex.worker_pool.machine_type {fit}" if fit else
                   f"no {preset.tpu_generation} machine holds {chips} chips on one host (the largest, "
                   f"{largest.machine_type}, holds {largest.topology})")
        return (f"vertex.worker_pool.tpu_topology {asked} on {machine} is a slice of {math.ceil(chips / per_host)} "
                f"hosts ({host.topology} per host), but {_ONE_HOST}; {instead}; {pod_path}")
    return (f"vertex.worker_pool.tpu_topology {asked} does not fit {machine}, whose one host is {host.topology}"
            + (f"; for {asked} use vertex.worker_pool.machine_type {fit}" if fit else ""))


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    """container_spec.env as the CustomJob proto spells it (repeated EnvVar name/value)."""
    return [{"name": k, "value": v} for k, v in sorted(env.items())]
