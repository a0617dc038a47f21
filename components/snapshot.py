"""DatasetSnapshot: the first step of the DAG, freezing the raw input by content.

It copies the mutable source into `<snapshots_root>/<digest>/` (or, pinned to
a digest, checks that snapshot is intact) and emits a DatasetSnapshot artifact
whose value is the snapshot's data directory and whose properties carry the
digest. ExampleGen takes its input_base from that value, so it never reads the
source itself, and MLMD links every downstream artifact to the digest.

Caching: a cached snapshot must not outlive a change of the source. The driver
runs before TFX's cache lookup and adds a cheap fingerprint of the source
(names, sizes, mtimes or GCS generations) to the execution properties, the
same way ExampleGen's own driver keys its cache.
"""

from __future__ import annotations

from typing import Any, Optional

from tfx import types
from tfx.dsl.components.base import base_component, base_driver, base_executor, executor_spec
from tfx.proto.orchestration import driver_output_pb2
from tfx.types import artifact, component_spec, value_artifact
from tfx.types.system_executions import Process

from pipeline import snapshots

SOURCE_URI, SNAPSHOTS_ROOT, DIGEST, FINGERPRINT = "source_uri", "snapshots_root", "digest", "source_fingerprint"
SNAPSHOT_KEY = "snapshot"


class DatasetSnapshot(value_artifact.ValueArtifact):
    """Value: the URI of the snapshot's data directory (what ExampleGen reads)."""

    TYPE_NAME = "DatasetSnapshot"
    PROPERTIES = {
        "digest": artifact.Property(type=artifact.PropertyType.STRING),
        "rows": artifact.Property(type=artifact.PropertyType.INT),
        "source_uri": artifact.Property(type=artifact.PropertyType.STRING),
        "snapshot_uri": artifact.Property(type=artifact.PropertyType.STRING),
        "created": artifact.Property(type=artifact.PropertyType.STRING),
    }

    def encode(self, value: str) -> bytes:
        return value.encode("utf-8")

    def decode(self, serialized_value: bytes) -> str:
        return serialized_value.decode("utf-8")


class SnapshotSpec(types.ComponentSpec):
    PARAMETERS = {
        SOURCE_URI: component_spec.ExecutionParameter(type=str),
        SNAPSHOTS_ROOT: component_spec.ExecutionParameter(type=str),
        # Pinned: reuse this published snapshot instead of reading the source.
        DIGEST: component_spec.ExecutionParameter(type=str, optional=True),
        # Set by the driver at run time; part of the cache key.
        FINGERPRINT: component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {}
    OUTPUTS = {SNAPSHOT_KEY: component_spec.ChannelParameter(type=DatasetSnapshot)}
    TYPE_ANNOTATION = Process


class SnapshotDriver(base_driver.BaseDriver):
    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        props = execution_info.exec_properties
        result = driver_output_pb2.DriverOutput()
        result.exec_properties[FINGERPRINT].string_value = (
            f"pinned:{props[DIGEST]}" if props.get(DIGEST) else snapshots.fingerprint(props[SOURCE_URI]))
        return result


class SnapshotExecutor(base_executor.BaseExecutor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        root = exec_properties[SNAPSHOTS_ROOT]
        pinned: Optional[str] = exec_properties.get(DIGEST) or None
        manifest = (snapshots.get(root, pinned) if pinned
                    else snapshots.create(exec_properties[SOURCE_URI], root))
        problems = snapshots.csv_problems(manifest)
        if problems:
            raise snapshots.SnapshotError(
                f"snapshot {manifest.digest} of {manifest.source_uri} has malformed CSV; ExampleGen cannot read it:\n"
                + "\n".join(f"  {p}" for p in problems))
        out = output_dict[SNAPSHOT_KEY][0]
        out.digest = manifest.digest
        out.rows = manifest.rows
        out.source_uri = manifest.source_uri
        out.snapshot_uri = manifest.uri
        out.created = manifest.created
        out.value = manifest.data_uri


class Snapshot(base_component.BaseComponent):
    SPEC_CLASS = SnapshotSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(SnapshotExecutor)
    DRIVER_CLASS = SnapshotDriver

    def __init__(self, source_uri: str, snapshots_root: str, digest: Optional[str] = None):
        super().__init__(SnapshotSpec(
            source_uri=source_uri, snapshots_root=snapshots_root, digest=digest or None,
            snapshot=types.Channel(type=DatasetSnapshot)))
