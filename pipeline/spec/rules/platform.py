"""The rules on a Kubeflow package's platform spec: its form, and the pod labels the backend needs on each pod."""

from __future__ import annotations

from typing import Any, Iterator

from pipeline.spec.backends import Backend
from pipeline.spec.model import Pipeline
from pipeline.spec.rules.violation import Violation

_FIELD = "platformSpec.platforms.kubernetes.deploymentSpec.executors"
# What the dry run models of a KubernetesExecutorConfig (kubeflow/pipelines kubernetes_platform/proto/
# kubernetes_executor_config.proto): pod_metadata's two maps. Every other field would change the pod.
_POD_METADATA = {"labels", "annotations"}


def platform_spec(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    platform = pipeline.platform
    if not platform:
        return
    if backend.name != "kubeflow":
        yield Violation("platform-spec", "platformSpec", f"{backend.title} is not known to read a platform spec")
        return
    for key in sorted(set(platform) - {"platforms"}):
        yield Violation("platform-spec", f"platformSpec.{key}", "not a PlatformSpec field")
    platforms = platform.get("platforms", {})
    for name in sorted(set(platforms) - {"kubernetes"}):
        yield Violation("platform-spec", f"platformSpec.platforms.{name}", "the backend reads the kubernetes one only")
    kubernetes = platforms.get("kubernetes", {})
    for key in sorted(set(kubernetes) - {"deploymentSpec"}):
        yield Violation("platform-spec", f"platformSpec.platforms.kubernetes.{key}", "not emulated by the dry run")
    executors = pipeline.spec.get("deploymentSpec", {}).get("executors", {})
    for label, config in kubernetes.get("deploymentSpec", {}).get("executors", {}).items():
        field = f"{_FIELD}.{label}"
        if label not in executors:
            yield Violation("platform-spec", field, "names no executor of the pipeline spec")
        for key in sorted(set(config) - {"podMetadata"}):
            yield Violation("platform-spec", f"{field}.{key}", "not emulated by the dry run")
        metadata = config.get("podMetadata", {})
        for key in sorted(set(metadata) - _POD_METADATA):
            yield Violation("platform-spec", f"{field}.podMetadata.{key}", "not a PodMetadata field")
        for kind in sorted(_POD_METADATA & set(metadata)):
            if not _string_map(metadata[kind]):
                yield Violation("platform-spec", f"{field}.podMetadata.{kind}", "must map strings to strings (the "
                                "backend ignores an executor config that does not parse)")


def pod_labels(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    if not backend.pod_labels:
        return
    configs = pipeline.platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get(
        "executors", {})
    for label, executor in sorted(pipeline.spec.get("deploymentSpec", {}).get("executors", {}).items()):
        if "container" not in executor:
            continue
        labels = configs.get(label, {}).get("podMetadata", {}).get("labels", {})
        missing = {k: v for k, v in backend.pod_labels.items() if labels.get(k) != v}
        if missing:
            yield Violation("pod-labels", f"{_FIELD}.{label}.podMetadata.labels",
                            f"lacks {', '.join(f'{k}: {v!r}' for k, v in missing.items())}: the pod gets no API token, "
                            "so the run lease cannot take over from a cancelled run and the exit handler cannot tell "
                            "how the run ended (recompile with this code: make compile)")


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
