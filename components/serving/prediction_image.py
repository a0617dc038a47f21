"""Vertex AI's prebuilt TensorFlow prediction image for an endpoint: which TensorFlow it runs, whether that can load
what this environment's TensorFlow exports, and the registry nearest a region. Why: docs/serving.md, "The
prediction image's TensorFlow"."""

from __future__ import annotations

import re
from importlib import metadata
from typing import Optional

# cloud.google.com/vertex-ai/docs/predictions/pre-built-containers: "[region]-docker.pkg.dev/vertex-ai/prediction/
# tf2-[cpu|gpu].[major]-[minor]:latest", each image in three Artifact Registry multi-regions (us, europe, asia); "the
# Google Cloud console selects the URI that best matches the location where you are using Vertex AI". Its newest
# TensorFlow is 2.15, as in the pinned client's google.cloud.aiplatform.constants.prediction.TF_CONTAINER_URIS.
_PREBUILT = re.compile(r"^(us|europe|asia)-docker\.pkg\.dev/vertex-ai/prediction/tf2-(cpu|gpu)\.(\d+)-(\d+):latest$")
# Our choice for the regions outside the three multi-regions: the nearest one.
_REGISTRY_OF = {"us": "us", "northamerica": "us", "southamerica": "us", "europe": "europe", "me": "europe",
                "africa": "europe", "asia": "asia", "australia": "asia"}
# The TensorFlow wheels that export our models, by where they run: the pipeline image, the TPU image, the GPU image
# (infra/docker/), all at the minor version of requirements.lock.
_TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu")


def tf_version(image_uri: str) -> Optional[tuple[int, int]]:
    """The TensorFlow (major, minor) a prebuilt prediction image runs; None for any other image."""
    found = _PREBUILT.match(image_uri)
    return (int(found[3]), int(found[4])) if found else None


def exporter_tf() -> tuple[int, int]:
    """The TensorFlow (major, minor) the Trainer exports with: this environment's, installed from the lock."""
    for name in _TF_DISTRIBUTIONS:
        try:
            major, minor = metadata.version(name).split(".")[:2]
            return int(major), int(minor)
        except metadata.PackageNotFoundError:
            continue
    raise RuntimeError(f"none of {', '.join(_TF_DISTRIBUTIONS)} is installed: no TensorFlow exports models here")


def older_than_exporter(image_uri: str) -> str:
    """Why `image_uri` may not load what we export ("" when its TensorFlow is at least the exporter's). TensorFlow
    loads SavedModels of older versions, not newer ones (an op or attribute added since is unknown to it), and the
    serving gate can load a candidate only under this environment's TensorFlow: no other is installed here."""
    image, ours = tf_version(image_uri), exporter_tf()
    if image is None or image >= ours:
        return ""
    return (f"{image_uri} runs TensorFlow {image[0]}.{image[1]}, older than the {ours[0]}.{ours[1]} that exports the "
            f"models here; the serving gate loads a candidate under {ours[0]}.{ours[1]} only (no other TensorFlow "
            "is installed here), so whether the image can load it is not checked. Vertex lists no prebuilt "
            "TensorFlow prediction image newer than 2.15 (cloud.google.com/vertex-ai/docs/predictions/"
            "pre-built-containers)")


def default_uri(region: str, accelerator: str = "cpu", tf: tuple[int, int] = (2, 15)) -> str:
    """The prebuilt image in the Artifact Registry multi-region nearest `region` (a Vertex AI location)."""
    registry = _REGISTRY_OF.get(region.split("-", 1)[0])
    if registry is None:
        raise ValueError(f"region {region!r}: no Vertex AI prediction image registry is known near it "
                         f"(regions starting {', '.join(sorted(_REGISTRY_OF))}); set serving.vertex_endpoint.image_uri")
    return f"{registry}-docker.pkg.dev/vertex-ai/prediction/tf2-{accelerator}.{tf[0]}-{tf[1]}:latest"
