"""What each Vertex worker-pool preset needs: machine, image, runtime environment,
and the accelerator the trainer must find or refuse to start.

One table, read by pipeline/vertex/config.py (validation), dag.py (the
Trainer's CustomJob spec) and preflight.py (is the TPU type offered here).

Sources for the runtime column:
- TPU v5e runs TensorFlow only through the PJRT runtime (Cloud TPU lists only
  "-pjrt" TF runtimes for v5e; Vertex's "Training with TPU VMs" page asks TF
  images for v5e to put libtpu.so in /lib and set the PJRT variables). TF
  2.16 loads libtpu as a pluggable device only when TF_PLUGGABLE_DEVICE_LIBRARY_PATH
  names it, with NEXT_PLUGGABLE_DEVICE_USE_C_API=true (tensorflow/__init__.py
  in the tensorflow-tpu 2.16 wheel). infra/docker/Dockerfile.tpu puts
  libtpu.so at /lib/libtpu.so and leaves the variables to the job spec.
- TPU v2/v3 use the StreamExecutor runtime, which finds libtpu.so on the
  default library path; the PJRT variables would switch them to PJRT, so
  their jobs get none.
- GPU: TF 2.16 sees a GPU only with the CUDA libraries of tensorflow[and-cuda]
  (infra/docker/Dockerfile.gpu); the pipeline image has none and would train
  on CPU, so the gpu preset runs vertex.gpu_image.
"""

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
    # Cloud TPU's name for the generation (v5litepod-4, v3-8): what preflight looks up.
    tpu_generation: Optional[str] = None


PRESETS: dict[str, Preset] = {
    # A TPU VM: topology, no accelerator fields.
    "tpu_v5e": Preset({"machine_type": "ct5lp-hightpu-4t", "tpu_topology": "2x2"}, "trainer_image", PJRT_ENV,
                      "tpu", tpu_generation="v5litepod"),
    # The legacy "cloud-tpu" machine with 8 cores.
    "tpu_v3": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V3", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V3", tpu_generation="v3"),
    "tpu_v2": Preset({"machine_type": "cloud-tpu", "accelerator_type": "TPU_V2", "accelerator_count": 8},
                     "trainer_image", {}, "tpu", accelerator_prefix="TPU_V2", tpu_generation="v2"),
    "gpu": Preset({"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 1},
                  "gpu_image", {}, "gpu", accelerator_prefix="NVIDIA_"),
    "cpu": Preset({"machine_type": "n1-standard-8"}, "pipeline_image", {}, None),
}

PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


def cloud_tpu_type(preset: Preset, machine_spec: Mapping[str, Any]) -> Optional[str]:
    """Cloud TPU's accelerator type for a TPU machine spec (v5litepod-4 for 2x2, v3-8), else None."""
    if preset.tpu_generation is None:
        return None
    if "tpu_topology" in machine_spec:
        chips = math.prod(int(n) for n in machine_spec["tpu_topology"].split("x"))
        return f"{preset.tpu_generation}-{chips}"
    return f"{preset.tpu_generation}-{machine_spec['accelerator_count']}"


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    """container_spec.env as the CustomJob proto spells it (repeated EnvVar name/value)."""
    return [{"name": k, "value": v} for k, v in sorted(env.items())]
