"""What each Vertex worker-pool preset needs: machine, image, runtime environment,
and the accelerator the trainer must find or refuse to start. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, Mapping, Optional

# Where the TPU image keeps libtpu (infra/docker/Dockerfile.tpu).
LIBTPU_PATH = "/lib/libtpu.so"
PJRT_ENV = {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": LIBTPU_PATH, "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true"}


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


PRESETS: dict[str, Preset] = {
    # A TPU VM: topology, no accelerator fields.
    "tpu_v5e": Preset({"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, "trainer_image", PJRT_ENV,
                      "tpu", tpu_generation="v5litepod",
                      training_quota="custom_model_training_tpu_v5e"),
    # The legacy "cloud-tpu" machine with 8 cores.
    "tpu_v3": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V3", tpu_generation="v3",
                     training_quota="custom_model_training_tpu_v3"),
    "tpu_v2": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V2", tpu_generation="v2"),
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


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    """container_spec.env as the CustomJob proto spells it (repeated EnvVar name/value)."""
    return [{"name": k, "value": v} for k, v in sorted(env.items())]
